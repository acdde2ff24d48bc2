""" "Fit my GPU" on the Fine-tune tab: a card size (or this GPU's free memory), a button, the planner's choice with
its reasons, and the form filled with it in one click. A thin layer over utils.memory_plan.fit_gpu.fit_my_gpu."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import gradio as gr

from utils.memory_plan.fit_gpu import CARD_SIZES_GB
from webui import form
from webui.context import UIContext
from webui.shown import shown

THIS_GPU = "this GPU's free memory"
CARD_CHOICES = [THIS_GPU, *(f"{size} GB card" for size in CARD_SIZES_GB)]
# The form fields a fit sets (train_gpt keywords; their component ids come from webui.form).
FILLED = (
    "batch_size",
    "grad_acumm",
    "enable_grad_checkpoint",
    "enable_sdpa",
    "precision",
    "optimizer",
    "lora_rank",
)


T = TypeVar("T")
_DONE = object()


def streamed(compute: Callable[[Callable[[str], None]], T], waiting: Callable[[str], T]) -> Iterator[T]:
    """A generator handler's outputs: `waiting(message)` for each progress message of `compute(on_progress)` (run on
    a thread) as it comes, then its answer. The page thus says what a long plan is doing (a trace) while it runs."""
    messages: queue.Queue = queue.Queue()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["answer"] = compute(messages.put)
        except BaseException as exc:  # noqa: BLE001 - raised in the handler below
            outcome["error"] = exc
        finally:
            messages.put(_DONE)

    threading.Thread(target=run, name="plan-with-progress", daemon=True).start()
    while (message := messages.get()) is not _DONE:
        yield waiting(message)
    if "error" in outcome:
        raise outcome["error"]
    yield outcome["answer"]


def card_gb(choice: str) -> float | None:
    return None if not choice or choice == THIS_GPU else float(choice.split()[0])


def fit_for_form(
    ctx: UIContext, values: dict[str, Any], card: str, train_rows: Any = None, progress: Any = None
) -> tuple[Any, ...]:
    """(markdown, then one update per FILLED field): the fit's values, or unchanged fields and the reason.
    `train_rows`: the checked dataset's training clips (the batch is at most that); `progress(message)`: the
    planner's messages while it plans."""
    from utils.memory_plan.child import plan_in_child

    unchanged = tuple(gr.update() for _ in FILLED)
    rows = int(train_rows) if isinstance(train_rows, (int, float)) and train_rows > 0 else None
    try:
        arguments = form.arguments_from_form(values, str(ctx.output_dir), need_dataset=False)
        keywords = {k: v for k, v in arguments.to_dict().items() if k not in ("train_csv", "eval_csv", "resume_from")}
        fit = plan_in_child("fit_my_gpu", card_gb=card_gb(card), train_rows=rows, on_progress=progress, **keywords)
    except ValueError as exc:
        return (f"**Fit my GPU:** {shown(exc)}", *unchanged)
    updates = tuple(gr.update(value=form.to_display(name, fit.keywords[name])) for name in FILLED)
    return ("#### Fit my GPU: the form now holds\n" + fit.to_markdown(), *updates)


def create_fit_gpu(ctx: UIContext) -> dict[str, Any]:
    """The controls, rendered where this is called (inside the Fine-tune tab's settings)."""
    with gr.Accordion("Fit my GPU: the fastest settings that fit", open=False):
        with gr.Row():
            card = gr.Dropdown(CARD_CHOICES, value=THIS_GPU, label="Plan for", scale=1, elem_id="fit-gpu-card")
            button = gr.Button("Fit my GPU", scale=0, elem_id="fit-gpu-button")
        result = gr.Markdown(elem_id="fit-gpu-result")
    return {"fit_card": card, "fit_button": button, "fit_result": result}


def wire_fit_gpu(ctx: UIContext, ui: dict[str, Any], components: list[Any]) -> None:
    """The button plans with the form's values and writes the choice into the form's fields."""
    targets = [ctx.form_component(form.component_id(name)) for name in FILLED]
    unchanged = tuple(gr.update() for _ in FILLED)

    def handler(card: str, rows: Any, *values: Any) -> Iterator[tuple[Any, ...]]:
        chosen = dict(zip(form.form_ids(), values, strict=True))
        yield from streamed(
            lambda progress: fit_for_form(ctx, chosen, card, rows, progress),
            lambda message: (f"**Fit my GPU:** {shown(message)} …", *unchanged),
        )

    # Planned in the planner's own process (utils.memory_plan.child): nothing of this process is patched.
    ui["fit_button"].click(
        handler,
        [ui["fit_card"], ctx["dataset.usable_train_rows"], *components],
        [ui["fit_result"], *targets],
        api_name="fit_my_gpu",
        concurrency_limit=1,
    )
