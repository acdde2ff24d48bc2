""" "Finish export" on the Export tab: a run that trained every step but whose ready/ could not be written (the disk
filled during the export) is resumed with its own settings, which exports without training
(utils.training.checkpointing.finish_export). A thin layer over the Fine-tune tab's start: the same checks and the same
runner."""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

from utils.text.visible import clipped
from utils.training.checkpointing.finish_export import finishable_runs, why_not_finishable
from utils.training.recording.run_record import list_runs, load_run
from webui import form
from webui.context import GPU_QUEUE, UIContext
from webui.shown import page_error, shown
from webui.train_tab import start_run


def finish_choices(ctx: UIContext) -> list[tuple[str, str]]:
    """(label, path) of the runs under the output folder whose export is all that is left."""
    return [(f"{run.name} (export failed)", str(run)) for run in finishable_runs(list_runs(ctx.output_dir))]


def finish_export_handler(ctx: UIContext, run: str) -> str:
    """Start the export of `run` from its chosen checkpoint, without training; the message says where to follow it."""
    if not run:
        raise gr.Error("Pick a run whose export failed.")
    try:
        run_dir = ctx.roots.run_folder(run, "run")
    except ValueError as exc:
        raise page_error(exc) from exc
    why = why_not_finishable(run_dir)
    if why:
        raise page_error(f"{clipped(run_dir.name)} has no export left to finish: {why}.")
    values = form.form_values({**(load_run(run_dir).arguments or {}), "resume_from": str(run_dir)})
    start_run(ctx, values)
    return (
        f"Finishing the export of {shown(run_dir.name)} from its chosen checkpoint, without training: follow it on "
        "the Fine-tune tab. Once ready/ is written, the run is listed above for export."
    )


def create_finish_export(ctx: UIContext) -> dict[str, Any]:
    """The controls, rendered where this is called (inside the Export tab)."""
    with gr.Accordion("Finish a run whose export failed", open=False):
        gr.Markdown(
            "A run that trained every step but could not write its `ready/` folder (the disk filled, say): once "
            "there is room again, this writes `ready/` from the run's chosen checkpoint. Nothing is trained again."
        )
        with gr.Row():
            run = gr.Dropdown(finish_choices(ctx), label="Run whose export failed", allow_custom_value=True)
            refresh = gr.Button("↻ Runs", scale=0)
        button = gr.Button("Finish export", elem_id="finish-export-button")
        message = gr.Markdown(elem_id="finish-export-message")
    refresh.click(lambda: gr.update(choices=finish_choices(ctx)), None, run, api_visibility="undocumented")
    button.click(
        functools.partial(finish_export_handler, ctx),
        run,
        message,
        api_name="finish_export",
        concurrency_limit=1,
        concurrency_id=GPU_QUEUE,
    )
    return {"finish_run": run, "finish_button": button}
