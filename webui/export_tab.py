"""Export tab: download a run's ready/ folder as a zip; optionally delete its training checkpoints."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gradio as gr

from utils.model.inference import find_ready_dir
from utils.model.ready import zip_ready
from utils.training.recording.run_record import RUN_FILE
from webui import finish_export_view, form
from webui.context import UIContext
from webui.shown import page_error, shown


def delete_training_checkpoints(run_dir: Path) -> list[Path]:
    """Remove the run's training checkpoints (not ready/); returns what was removed."""
    removed = []
    for path in sorted(run_dir.glob("*.pth")):
        if path.name.startswith(("checkpoint_", "best_model")):
            path.unlink()
            removed.append(path)
    return removed


def export_handler(ctx: UIContext, run: str, delete_checkpoints: bool) -> tuple[str, str]:
    """Zip the run's ready/ folder; returns (zip path, message)."""
    if not run:
        raise gr.Error("Pick a run to export.")
    try:  # strictly: a script's "false" is a string, and every non-empty string is truthy
        delete_checkpoints = form.checked_flag("delete_checkpoints", delete_checkpoints)
    except ValueError as exc:
        raise page_error(exc) from exc
    try:
        ready = find_ready_dir(ctx.roots.run_folder(run, "run"))
    except ValueError as exc:
        raise page_error(exc) from exc
    run_dir = ready.parent
    target = ctx.output_dir / "exports" / f"{run_dir.name}.zip"
    zip_ready(ready, target)
    message = f"Exported {shown(target.name)} ({target.stat().st_size / 1024**2:.0f} MB)."
    if delete_checkpoints:
        if ctx.runner.is_active():
            message += " Checkpoints kept: a training run is active."
        elif ctx.output_dir not in run_dir.resolve().parents or not (run_dir / RUN_FILE).is_file():
            message += f" Checkpoints kept: {shown(run_dir)} is not a run of this app (under {shown(ctx.output_dir)})."
        else:
            removed = delete_training_checkpoints(run_dir)
            message += f" Deleted {len(removed)} training checkpoint file(s); this run can no longer be resumed."
    return str(target), message


def create_export_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("4. Export", id="export"):
        gr.Markdown(
            "Download a run's `ready/` folder (model, config, vocab, speakers, reference wav, front-end "
            "settings) as a zip; it loads as it is with coqui's `Xtts.load_checkpoint`."
        )
        with gr.Row():
            run = gr.Dropdown(ctx.run_choices(ready_only=True), label="Run", allow_custom_value=True)
            refresh_runs = gr.Button("↻ Runs", scale=0)
        delete = gr.Checkbox(False, label="Delete the bulky training checkpoints after export (not while training)")
        export = gr.Button("Export", variant="primary")
        message = gr.Markdown()
        archive = gr.File(label="Zip")
        finish_export_view.create_finish_export(ctx)
    refresh_runs.click(
        lambda: gr.update(choices=ctx.run_choices(ready_only=True)), None, run, api_visibility="undocumented"
    )
    export.click(functools.partial(export_handler, ctx), [run, delete], [archive, message], api_name="export_model")
    return ctx.register("export", {"run": run})
