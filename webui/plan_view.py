"""What the Fine-tune form's settings will do, shown beside it: the optimizations applied, the effective batch and
the steps it makes, the learning rate with several GPUs, and the planner's GPU memory per phase."""

from __future__ import annotations

import math
from typing import Any

from utils.options.arguments import TrainArguments
from utils.options.optimizations import TrainingOptimizer
from utils.training.inputs.batching import optimizer_steps_per_epoch, steps_per_epoch
from webui import form
from webui.context import UIContext
from webui.shown import shown

# The options "What will be applied" reads, in the order plan_markdown takes them (the decisions are
# TrainingOptimizer.from_arguments', as in the run and the planner). enable_mixed_precision is precision's alias:
# a hidden component, True unless an API call says False.
PLAN_OPTIONS = (
    "enable_grad_checkpoint",
    "enable_sdpa",
    "enable_mixed_precision",
    "precision",
    "enable_tf32",
    "optimizer",
    "torch_compile",
    "lora_rank",
)


def plan_markdown(*values: Any) -> str:
    """The optimizations the form's values ask for (PLAN_OPTIONS, in order), as the run will apply them."""
    given = {name: value for name, value in zip(PLAN_OPTIONS, values, strict=False) if value is not None}
    try:
        args = TrainArguments(**{k: bool(v) if k.startswith("enable_") else v for k, v in given.items()})
    except ValueError as exc:
        return f"#### What will be applied\n{shown(exc)}"
    text = "#### What will be applied\n" + TrainingOptimizer.from_arguments(args).plan().to_markdown()
    if args.lora_rank:  # applied when the model is built (utils.training.loop.lora), so not in the optimizer's plan
        text += f"\n- **LoRA**: rank {args.lora_rank}: the GPT frozen, low-rank adapters on its blocks trained"
    return text


def _whole(value: Any, default: int = 1) -> int:
    try:
        return max(1, int(float(value)))
    except (TypeError, ValueError):
        return default


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def batch_markdown(
    train_rows: Any,
    batch_size: Any,
    grad_acumm: Any,
    num_epochs: Any,
    devices: Any = None,
    learning_rate: float | None = None,
) -> str:
    """The effective batch (clips per optimizer step, counting the GPUs' processes) and the steps it makes."""
    accumulation, epochs = _whole(grad_acumm), _whole(num_epochs)
    if str(batch_size).strip().lower() == "auto":
        return (
            f"**Effective batch** auto × {accumulation}: the largest batch that fits is chosen at Start "
            "(see the memory plan below)"
        )
    batch = _whole(batch_size)
    ranks = max(1, len(form.to_display("devices", devices) if isinstance(devices, str) else devices or []))
    factors = f"{batch} × {accumulation}" + (f" × {ranks} GPUs" if ranks > 1 else "")
    lines = [f"**Effective batch** {factors} = {batch * accumulation * ranks} clips per optimizer step"]
    if not train_rows:
        lines[0] += " · check a dataset to see steps per epoch"
    else:
        steps = steps_per_epoch(int(train_rows), batch, ranks)  # each GPU's process takes its share
        updates = optimizer_steps_per_epoch(steps, accumulation)
        lines.append(
            f"**{int(train_rows)} training clips** → {_counted(steps, 'step')} and "
            f"{_counted(updates, 'optimizer step')} per epoch, {_counted(steps * epochs, 'step')} in "
            f"{_counted(epochs, 'epoch')}"
        )
    if ranks > 1:
        lines.append(learning_rate_advice(ranks, learning_rate))
    return "  \n".join(lines)


def learning_rate_advice(ranks: int, learning_rate: float | None) -> str:
    """How to scale the learning rate for `ranks` processes (AdamW: the square-root rule)."""
    scaled = f" ({learning_rate:.2g} → {learning_rate * math.sqrt(ranks):.2g})" if learning_rate else ""
    return (
        f"**Learning rate with {ranks} GPUs:** each optimizer step averages {ranks}× the clips and an epoch has "
        f"{ranks}× fewer steps. Keep the rate and add epochs, or scale it by about √{ranks} = "
        f"{math.sqrt(ranks):.2f}{scaled} for about the same progress per epoch (AdamW's square-root rule; the "
        f"linear rule, ×{ranks}, comes from SGD and is usually too strong for fine-tuning)."
    )


def memory_plan_markdown(ctx: UIContext, values: dict[str, Any], progress: Any = None) -> str:
    """The planner's peak GPU memory for the form's settings, phase by phase, against the GPU's free memory, and
    what would fit; `progress(message)` hears the planner while it traces a configuration it has no model of."""
    from utils.memory_plan.child import plan_in_child
    from utils.memory_plan.planner import GIB, detected_free_bytes

    try:
        arguments = form.arguments_from_form(values, str(ctx.output_dir), need_dataset=False)
        keywords = {k: v for k, v in arguments.to_dict().items() if k not in ("train_csv", "eval_csv", "resume_from")}
        estimate = plan_in_child("estimate_gpt_memory", on_progress=progress, **keywords)
    except ValueError as exc:
        return f"**Memory plan:** {shown(exc)}"
    free = detected_free_bytes()
    lines = ["#### Memory plan (peak GPU memory of each phase of the run)", estimate.to_markdown()]
    if free is None:
        lines.append("No GPU here: planned for an Ampere-or-newer GPU. Compare with your card's memory.")
        return "\n\n".join(lines)
    verdict = "fits" if estimate.fits(free) else "does **not** fit"
    lines.append(f"This GPU has {free / GIB:.2f} GiB free: the run {verdict} (with a 10% margin).")
    if not estimate.fits(free):
        ways = [w for w in plan_in_child("ways_to_fit", free, on_progress=progress, **keywords) if w["fits"]]
        lines += [f"- {w['change']}: {w['peak_gib']:.2f} GiB" for w in ways] or ["Nothing tried fits: free GPU memory."]
    return "\n\n".join(lines)
