"""What the Fine-tune tab does before anything runs: a base model that is not there fails in a second."""

from __future__ import annotations

import time

import gradio as gr
import pytest

from tests.helpers import write_dataset
from tests.webui.test_handlers import FORM, make_context
from webui.train_tab import start_run


def test_start_with_a_base_model_not_downloaded_fails_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("XTTS_MODELS_DIR", str(tmp_path / "models"))
    csv = write_dataset(tmp_path / "data", 4)
    ctx = make_context(tmp_path)
    started = time.monotonic()
    with pytest.raises(gr.Error, match="v2.0.2.*missing.*cannot be downloaded now"):
        start_run(ctx, {**FORM, "version": "v2.0.2", "train_csv": str(csv)})
    assert time.monotonic() - started < 5
    assert not ctx.runner.is_active() and ctx.runner.state.status.value == "idle", "nothing was spawned"
    assert not (tmp_path / "models" / "v2.0.2").exists()


def test_missing_audio_keeps_its_meaning_and_an_upload_beside_a_typed_path_is_named(tmp_path, tiny_base):
    from tests.webui.test_shown import assert_shown_as_text
    from webui.dataset_handlers import validate_handler

    csv = write_dataset(tmp_path / "data", 6)
    for clip in sorted((tmp_path / "data" / "wavs").glob("*.wav"))[:3]:
        clip.unlink()
    ctx = make_context(tmp_path)
    summary, _, histogram, *_ = validate_handler(
        ctx, str(csv), str(csv), None, "", "en", 11.6, "tiny", False, progress=lambda *a, **k: None
    )
    text = assert_shown_as_text(summary)
    gone = (tmp_path / "data" / "wavs" / "clip_000.wav").resolve()
    assert f"3 rows will not be used: 3 × Audio not found at {gone} and others." in text, text
    assert "Checked the uploaded train CSV; the typed path was not used." in text
    assert "type the CSV's path" not in text, "the user did type it"
    assert histogram["y_lim"] == [0, 4], "a count axis of whole clips, never 0.000000"


def test_after_a_run_the_form_and_the_batch_line_show_its_values(tmp_path):
    from utils.training.process.runner import RunState
    from utils.training.recording.run_record import RunStatus
    from webui import form
    from webui.train_tab import form_on_load

    ctx = make_context(tmp_path)
    ran = {**form.form_values({}), "batch_size": "auto", "num_epochs": 3, "grad_acumm": 2}
    arguments = {name: form.from_display(name, ran[form.component_id(name)]) for name, _ in form.form_fields()}
    ctx.runner.state = RunState(status=RunStatus.FINISHED, arguments={**arguments, "train_csv": "x.csv"})
    *values, batch = form_on_load(ctx)
    by_id = dict(zip(form.form_ids(), values, strict=True))
    assert by_id["batch_size"] == "auto" and by_id["num_epochs"] == 3
    assert batch.startswith("**Effective batch** auto × 2"), batch


def test_half_the_rows_rejected_is_not_ready_to_train_and_the_preview_says_which(tmp_path, tiny_base):
    from tests.helpers import page_text
    from webui.dataset_handlers import validate_handler

    csv = write_dataset(tmp_path / "data", 8)
    for clip in sorted((tmp_path / "data" / "wavs").glob("*.wav"))[::2]:  # lines 2, 4, 6, 8
        clip.unlink()
    ctx = make_context(tmp_path)
    summary, problems, _, preview, *players = validate_handler(
        ctx, None, str(csv), None, "", "en", 11.6, "tiny", False, progress=lambda *a, **k: None
    )[:7]
    text = page_text(summary)
    assert "Ready to train" not in text and text.startswith("⚠ 4 of 8 rows rejected: only 4 usable"), text
    used = dict(zip(preview["line"], preview["used"], strict=True))
    assert all(used[line].startswith("✗ rejected: Audio not found") for line in (2, 4, 6, 8)), used
    assert all(used[line] == "✓" for line in (3, 5, 7, 9)), used
    played = [p["label"] for p in players if p.get("visible")]
    assert played and all(label.startswith(("line 3:", "line 5:", "line 7:")) for label in played), played
    assert list(preview.columns) == ["line", "used", "audio_file", "text", "speaker"]


def test_a_zip_names_the_csv_it_checked(tmp_path, tiny_base):
    import zipfile

    from tests.helpers import page_text
    from webui.dataset_handlers import zip_handler

    write_dataset(tmp_path / "data", n=5)
    upload = tmp_path / "data" / "voice.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        for file in sorted((tmp_path / "data").rglob("*.*")):
            if file != upload:
                archive.write(file, f"voice/{file.relative_to(tmp_path / 'data')}")
    summary = zip_handler(make_context(tmp_path), str(upload), "en", 11.6)[0]
    assert "Checked the zip's metadata.csv (the typed path and an uploaded CSV were not used)." in page_text(summary)


def test_missing_weights_are_a_panel_naming_each_file_the_folder_and_how_to_get_them(tmp_path, monkeypatch):
    from tests.helpers import page_text
    from utils.constants import MODEL_FILES
    from webui.base_model_view import missing_weights_markdown

    monkeypatch.setenv("XTTS_MODELS_DIR", str(tmp_path / "models"))
    (tmp_path / "models" / "v2.0.2").mkdir(parents=True)
    (tmp_path / "models" / "v2.0.2" / "vocab.json").write_text("{}")
    text = page_text(missing_weights_markdown("v2.0.2"))
    missing = [name for name in MODEL_FILES if name != "vocab.json"]
    assert f"{len(missing)} of its files are not on this machine" in text
    lines = text.splitlines()
    assert all(name in lines for name in missing) and "vocab.json" not in lines, "each missing file on its line"
    assert str(tmp_path / "models" / "v2.0.2") in text, "the folder they go in"
    assert "https://huggingface.co/coqui/XTTS-v2" in text and "Start training" in text and "tiny" in text
    assert "=" not in text and "custom_model" not in text and "version=" not in text, "no API words"
    assert missing_weights_markdown("tiny") == "" and missing_weights_markdown("../etc") == ""
    for name in MODEL_FILES:
        (tmp_path / "models" / "v2.0.2" / name).write_bytes(b"x")
    assert missing_weights_markdown("v2.0.2") == "", "complete: no panel"
