"""The Export tab over export_voice (issue 36): a profile and a voice name after the old inputs, so a script calling
/export_model(run, delete) still gets the coqui export; what will not carry over is said, as text."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import gradio as gr
import pytest
import torch

from utils.model.ready import READY_DIR, write_inference_settings
from utils.training.process.runner import TrainingRunner
from webui.context import UIContext
from webui.export_tab import export_handler


def _app_with_run(finished_run: Path, folder: Path) -> tuple[UIContext, str]:
    """An app's output folder holding a copy of the session's finished run (its record and ready/), with sampling
    settings an app of the export takes from itself."""
    output = folder / "output"
    run = output / finished_run.name
    run.mkdir(parents=True)
    shutil.copy2(finished_run / "run.json", run / "run.json")
    shutil.copytree(finished_run / READY_DIR, run / READY_DIR)
    tuned = {"temperature": 0.6, "length_penalty": 1.0, "repetition_penalty": 5.0, "top_k": 50, "top_p": 0.85}
    write_inference_settings(run / READY_DIR, tuned, {"settings": tuned})
    return UIContext(output_dir=output, runner=TrainingRunner(output)), run.name


def test_the_old_call_exports_for_coqui_with_the_voice_under_the_runs_name(finished_run, tmp_path):
    ctx, run = _app_with_run(finished_run, tmp_path)
    archive, message = export_handler(ctx, run, False)
    archive = Path(archive)
    assert archive.parent == ctx.output_dir / "exports" / "coqui" and archive.name == f"{run}.zip"
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
        assert {f"{run}/{name}" for name in ("model.pth", "config.json", "vocab.json", "speakers_xtts.pth")} <= names
        with zipped.open(f"{run}/speakers_xtts.pth") as speakers:
            assert run in torch.load(speakers, weights_only=True), "the voice is stored under its name"
    assert message.startswith("Exported") and "tts-server" in message and "Will not carry over" not in message


def test_a_profile_and_a_name_after_the_old_inputs(finished_run, tmp_path):
    ctx, run = _app_with_run(finished_run, tmp_path)
    archive, message = export_handler(ctx, run, False, "ebook2audiobook", " my_voice ")
    archive = Path(archive)
    assert archive.name == "my_voice.zip" and archive.parent.name == "ebook2audiobook"
    with zipfile.ZipFile(archive) as zipped:
        assert {"config.json", "model.pth", "vocab.json", "ref.wav"} <= set(zipped.namelist()), "flat"
    # What will not carry over, as text: the name's '_' and the settings' names escaped for Markdown.
    assert "**Will not carry over:**" in message
    assert "temperature 0.75" in message and "not the voice's temperature 0.6" in message
    assert "my\\_voice" in message and "repetition\\_penalty" in message
    again, _ = export_handler(ctx, run, False, "ebook2audiobook", "my_voice")
    assert Path(again).name == "my_voice-2.zip" and archive.is_file(), "never over an earlier export"

    archive, message = export_handler(ctx, run, False, "openedai-speech", "")
    with zipfile.ZipFile(archive) as zipped:
        assert f"voices/{run}/voice_to_speaker.yaml" in zipped.namelist(), "laid out from openedai-speech's folder"
    assert "Will not carry over" not in message, "openedai-speech takes the voice's settings"


@pytest.mark.parametrize(
    ("profile", "name", "why"),
    [
        ("sillytavern", "", "profile must be one of coqui, alltalk"),
        ("coqui", "../../etc", "not a plain name"),
        ("coqui", "a<b>", "not a plain name"),
        ("coqui", "Tiny Speaker", "one of the base model's speakers"),
    ],
)
def test_a_bad_profile_or_name_is_refused_and_nothing_is_written(finished_run, tmp_path, profile, name, why):
    ctx, run = _app_with_run(finished_run, tmp_path)
    with pytest.raises(gr.Error, match=why):
        export_handler(ctx, run, False, profile, name)
    assert not (ctx.output_dir / "exports").exists() or not any((ctx.output_dir / "exports").rglob("*.*"))
