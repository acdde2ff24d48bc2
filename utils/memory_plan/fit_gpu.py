""" "Fit my GPU": the fastest training configuration that fits a GPU's free memory (or a card size), and why.

Candidates, fastest first: a full fine-tune without gradient checkpointing (1.37x faster than with it,
measured on 12 layers, interleaved), with checkpointing, with checkpointing and 8-bit AdamW, then LoRA
(rank 16) without and with checkpointing. The first whose largest fitting batch reaches the wanted effective
batch (or `MIN_USEFUL_BATCH`) is taken; if none does, the one that fits the largest batch. The effective
batch (batch_size x grad_acumm) of the arguments is kept: batch_size is the largest that fits up to it, and
grad_acumm makes up the rest (1 when the batch alone reaches it; accumulating holds gradients, so batches
with grad_acumm >= 2 are planned with them held). SDPA and mixed precision stay on; every figure is the
planner's (`largest_batch_that_fits`, with its safety margin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from utils.memory_plan.planner import GIB, detected_free_bytes, estimate_gpt_memory, largest_batch_that_fits
from utils.options.arguments import TrainArguments, fold_precision_alias
from utils.options.plan_options import CARD_SIZES_GB, checked_plan_call

# Of a card's memory, what a training process can have: the driver and display keep a little.
CARD_USABLE_FRACTION = 0.97
MIN_USEFUL_BATCH = 4  # below this a configuration is only taken when nothing reaches it
LORA_RANK = 16
CHECKPOINTING_SLOWDOWN = 1.37  # measured: 12 layers, interleaved runs (docs/memory_plan.md)

CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("full fine-tune, no gradient checkpointing", {"enable_grad_checkpoint": False, "lora_rank": 0}),
    ("full fine-tune, gradient checkpointing", {"enable_grad_checkpoint": True, "lora_rank": 0}),
    (
        "full fine-tune, gradient checkpointing, 8-bit AdamW",
        {"enable_grad_checkpoint": True, "lora_rank": 0, "optimizer": "adamw_8bit"},
    ),
    (f"LoRA rank {LORA_RANK}, no gradient checkpointing", {"enable_grad_checkpoint": False, "lora_rank": LORA_RANK}),
    (f"LoRA rank {LORA_RANK}, gradient checkpointing", {"enable_grad_checkpoint": True, "lora_rank": LORA_RANK}),
)

MIXED_PRECISIONS = ("bf16", "fp16")


@dataclass
class GpuFit:
    """The chosen configuration (`keywords` for train_gpt), its planned peak, and why it was chosen."""

    keywords: dict[str, Any]
    name: str
    peak_gib: float
    required_gib: float
    free_gib: float
    reasons: list[str] = field(default_factory=list)
    tried: list[dict[str, Any]] = field(default_factory=list)

    def to_markdown(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.keywords.items())
        lines = [
            f"**{self.name}**: `{shown}`",
            "",
            f"Planned peak {self.peak_gib:.2f} GiB; {self.required_gib:.2f} GiB needed with the margin, "
            f"of {self.free_gib:.2f} GiB free.",
            "",
            *[f"- {reason}" for reason in self.reasons],
            "",
            "| configuration | batch that fits (up to the effective batch) | grad_acumm |",
            "|---|---|---|",
            *[_tried_row(t) for t in self.tried],
        ]
        return "\n".join(lines)


def _tried_row(tried: dict[str, Any]) -> str:
    if tried["largest_batch"] == 0:
        return f"| {tried['name']} | does not fit | – |"
    return f"| {tried['name']} | {tried['largest_batch']} | {tried['grad_acumm']} |"


def free_memory_for(card_gb: float | None, free_bytes: int | None) -> tuple[int, str]:
    """(free bytes, where the figure comes from): given bytes, a card size, or the detected GPU."""
    if free_bytes is not None:
        return int(free_bytes), f"{free_bytes / GIB:.2f} GiB free (given)"
    if card_gb is not None:
        if card_gb <= 0:
            raise ValueError(f"card_gb must be a card size in GB (e.g. {', '.join(map(str, CARD_SIZES_GB))}).")
        usable = int(card_gb * GIB * CARD_USABLE_FRACTION)
        article = "an" if f"{card_gb:g}".startswith("8") else "a"
        return usable, f"{article} {card_gb:g} GB card: {usable / GIB:.2f} GiB usable ({CARD_USABLE_FRACTION:.0%})"
    detected = detected_free_bytes()
    if detected is None:
        raise ValueError("No GPU detected: choose a card size (card_gb=8, for example) or give free_bytes.")
    return detected, f"the GPU's free memory now: {detected / GIB:.2f} GiB"


def _batch_for(effective: int, keywords: dict[str, Any], free: int, progress: Any = None) -> tuple[int, int]:
    """(batch_size, grad_acumm) keeping `effective`: one step when the batch alone fits it, else the largest
    batch planned with the gradients held between micro-steps. (0, 0) when nothing fits."""
    alone = largest_batch_that_fits(free, **{**keywords, "grad_acumm": 1}, progress=progress)
    if alone >= effective:
        return effective, 1
    held = largest_batch_that_fits(free, **{**keywords, "grad_acumm": 2}, progress=progress)
    if held == 0:
        return (alone, 1) if alone else (0, 0)
    return held, math.ceil(effective / held)


def fit_my_gpu(
    *args: Any,
    card_gb: float | None = None,
    free_bytes: int | None = None,
    progress: Any = None,
    train_rows: int | None = None,
    **kwargs: Any,
) -> GpuFit:
    """The fastest configuration of `train_gpt(*args, **kwargs)` that fits the GPU; see the module docstring.

    `card_gb`: plan for a card of this size (4, 6, 8, 12, 16, 24, 48, 80); `free_bytes`: for this much free
    memory; neither: the detected GPU's free memory. The arguments' batch_size x grad_acumm is the effective
    batch kept, at most `train_rows` (the dataset's training clips, when known: a larger batch holds no more).
    `progress(message)` hears each configuration planned, and a trace where one is needed.
    Raises ValueError when not even LoRA with batch 1 fits.
    """
    own = {"card_gb": card_gb, "free_bytes": free_bytes, "train_rows": train_rows}
    checked = checked_plan_call(args, {**kwargs, **own})  # utils.options
    card_gb, free_bytes, train_rows = (checked.pop(name) for name in own)
    kwargs = checked
    free, source = free_memory_for(card_gb, free_bytes)
    given = fold_precision_alias({**dict(zip(TrainArguments.positional_names(), args)), **kwargs})
    wanted, effective = _effective_batch(given, train_rows)
    # The fastest settings: SDPA and mixed precision on (a precision asked for by name kept, fp32 made auto).
    precision = given.get("precision", TrainArguments.precision)
    fastest = {"enable_sdpa": True, "precision": precision if precision in MIXED_PRECISIONS else "auto"}
    common = {**{k: v for k, v in given.items() if k not in ("batch_size", "grad_acumm")}, **fastest}
    tried = []
    for name, change in CANDIDATES:
        if progress is not None:
            progress(f"planning: {name}")
        keywords = {**common, **change}
        size, accumulation = _batch_for(effective, keywords, free, progress)
        tried.append({"name": name, "change": change, "largest_batch": size, "grad_acumm": accumulation})
    useful = [t for t in tried if t["largest_batch"] >= min(effective, MIN_USEFUL_BATCH)]
    fitting = [t for t in tried if t["largest_batch"] > 0]
    if not fitting:
        raise ValueError(
            f"Nothing fits in {source}: not even LoRA rank {LORA_RANK} with batch 1 and gradient checkpointing. "
            "Lower max_audio_length, or train on a larger GPU."
        )
    chosen = useful[0] if useful else max(fitting, key=lambda t: t["largest_batch"])
    keywords = {
        **chosen["change"],
        "batch_size": chosen["largest_batch"],
        "grad_acumm": chosen["grad_acumm"],
        **fastest,
    }
    keywords.setdefault("optimizer", "adamw")
    estimate = estimate_gpt_memory(**{**common, **keywords}, progress=progress)
    return GpuFit(
        keywords=keywords,
        name=chosen["name"],
        peak_gib=estimate.peak_gib,
        required_gib=estimate.required_bytes / GIB,
        free_gib=free / GIB,
        reasons=_reasons(chosen, tried, effective, source, useful, wanted),
        tried=tried,
    )


def _effective_batch(given: dict[str, Any], train_rows: int | None) -> tuple[int, int]:
    """The effective batch (batch_size x grad_acumm) the arguments ask for ("auto": the default batch size), and
    the one kept: at most the dataset's training clips, when known."""
    batch = given.get("batch_size", TrainArguments.batch_size)
    batch = int(batch) if str(batch).strip().isdigit() else int(TrainArguments.batch_size)
    wanted = max(1, batch * int(given.get("grad_acumm", TrainArguments.grad_acumm)))
    return wanted, min(wanted, train_rows) if train_rows else wanted


def _reasons(
    chosen: dict[str, Any], tried: list[dict[str, Any]], effective: int, source: str, useful: list, wanted: int
) -> list[str]:
    reasons = [f"Memory: {source}."]
    if effective < wanted:
        reasons.append(
            f"The dataset has {effective} training clips: the effective batch is {effective}, not {wanted} "
            "(a larger batch would hold the same clips)."
        )
    for t in tried[: tried.index(chosen)]:
        why = "nothing fits" if t["largest_batch"] == 0 else f"only batch {t['largest_batch']} fits"
        reasons.append(f"Not {t['name']}: {why}.")
    if not chosen["change"]["enable_grad_checkpoint"]:
        reasons.append(f"Gradient checkpointing off: ~{CHECKPOINTING_SLOWDOWN}x faster steps, and the batch fits.")
    if chosen["change"].get("lora_rank"):
        reasons.append("LoRA: the base weights stay frozen (half precision); adapters and their optimizer are small.")
    accumulation = chosen["grad_acumm"]
    reasons.append(
        f"Effective batch {effective} kept: batch {chosen['largest_batch']} x grad_acumm {accumulation}"
        + (" (one step per update, no gradients held)." if accumulation == 1 else ".")
    )
    if not useful:
        reasons.append(f"No configuration reaches batch {min(effective, MIN_USEFUL_BATCH)}: the largest batch wins.")
    return reasons
