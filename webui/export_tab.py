"""Export tab: download a run's voice as a zip laid out for the app that will speak it (an export profile of
utils.model.export_profiles); optionally delete the run's training checkpoints."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gradio as gr

from utils.model.export_profiles import DEFAULT_PROFILE, EXPORTS_DIR, PROFILES, export_voice, profile_choices
from utils.model.inference import find_ready_dir
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


def export_handler(
    ctx: UIContext, run: str, delete_checkpoints: bool, profile: str = DEFAULT_PROFILE, voice_name: str = ""
) -> tuple[str, str]:
    """Export the run's voice as a zip in `profile`'s layout (utils.model.export_profiles.export_voice) under
    `voice_name` (empty: the run's name); returns (zip path, message: what the zip is for, how to use it and what
    will not carry over)."""
    if not run:
        raise gr.Error("Pick a run to export.")
    try:  # strictly: a script's "false" is a string, and every non-empty string is truthy
        delete_checkpoints = form.checked_flag("delete_checkpoints", delete_checkpoints)
    except ValueError as exc:
        raise page_error(exc) from exc
    profile = profile or DEFAULT_PROFILE
    if not isinstance(profile, str) or profile not in PROFILES:
        raise page_error(f"profile must be one of {', '.join(PROFILES)}; got {str(profile)[:60]!r}.")
    if voice_name is not None and not isinstance(voice_name, str):
        raise page_error(f"voice_name must be text; got {type(voice_name).__name__}.")
    try:
        ready = find_ready_dir(ctx.roots.run_folder(run, "run"))
        exported = export_voice(
            ready, profile, ctx.output_dir / EXPORTS_DIR / profile, (voice_name or "").strip() or None, archive=True
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    run_dir = ready.parent
    target = exported.path
    said = [
        f"Exported {shown(target.name)} ({target.stat().st_size / 1024**2:.0f} MB) for "
        f"{shown(PROFILES[profile].app)}, the voice named {shown(exported.name)}.",
        shown(exported.usage, keep_newlines=True),
    ]
    if exported.not_carried:
        said.append("**Will not carry over:**\n" + "\n".join(f"- {shown(note)}" for note in exported.not_carried))
    if delete_checkpoints:
        if ctx.training_active():
            said.append("Checkpoints kept: a training run is active.")
        elif ctx.output_dir not in run_dir.resolve().parents or not (run_dir / RUN_FILE).is_file():
            said.append(f"Checkpoints kept: {shown(run_dir)} is not a run of this app (under {shown(ctx.output_dir)}).")
        else:
            removed = delete_training_checkpoints(run_dir)
            said.append(f"Deleted {len(removed)} training checkpoint file(s); this run can no longer be resumed.")
    message = "\n\n".join(said)
    return str(target), message


def create_export_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("4. Export", id="export"):
        gr.Markdown(
            "Download a run's voice as a zip laid out for the app that will speak it: coqui TTS (`TTS.api`, `tts`, "
            "`tts-server`; the voice stored under its name), AllTalk v2, xtts-api-server (SillyTavern), "
            "openedai-speech, ebook2audiobook, Auralis, or all of them at once. The message says how to load it "
            "and what the app will not take from the voice."
        )
        with gr.Row():
            run = gr.Dropdown(ctx.run_choices(ready_only=True), label="Run", allow_custom_value=True)
            refresh_runs = gr.Button("↻ Runs", scale=0)
        with gr.Row():
            profile = gr.Dropdown(profile_choices(), value=DEFAULT_PROFILE, label="For (export profile)")
            voice_name = gr.Textbox(
                "",
                label="Voice name",
                placeholder="the run's name",
                info="The speaker and file name in the app: letters, digits, spaces, '_', '-', '.'.",
            )
        delete = gr.Checkbox(False, label="Delete the bulky training checkpoints after export (not while training)")
        export = gr.Button("Export", variant="primary")
        message = gr.Markdown()
        archive = gr.File(label="Zip")
        finish_export_view.create_finish_export(ctx)
    refresh_runs.click(
        lambda: gr.update(choices=ctx.run_choices(ready_only=True)), None, run, api_visibility="undocumented"
    )
    # New inputs go after the old ones, with defaults: scripts calling /export_model(run, delete) keep working.
    export.click(
        functools.partial(export_handler, ctx),
        [run, delete, profile, voice_name],
        [archive, message],
        api_name="export_model",
    )
    return ctx.register("export", {"run": run, "profile": profile, "voice_name": voice_name})
