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
    assert "3 × Audio not found." in text and "found at." not in text
    assert "Checked the uploaded train CSV; the typed path was not used." in text
    assert "type the CSV's path" not in text, "the user did type it"
    assert histogram["y_lim"] == [0, 4], "a count axis of whole clips, never 0.000000"


def test_after_a_run_the_form_and_the_batch_line_show_its_values(tmp_path):
    from utils.training.run_record import RunStatus
    from webui import form
    from webui.runner import RunState
    from webui.train_tab import form_on_load

    ctx = make_context(tmp_path)
    ran = {**form.form_values({}), "batch_size": "auto", "num_epochs": 3, "grad_acumm": 2}
    arguments = {name: form.from_display(name, ran[form.component_id(name)]) for name, _ in form.form_fields()}
    ctx.runner.state = RunState(status=RunStatus.FINISHED, arguments={**arguments, "train_csv": "x.csv"})
    *values, batch = form_on_load(ctx)
    by_id = dict(zip(form.form_ids(), values, strict=True))
    assert by_id["batch_size"] == "auto" and by_id["num_epochs"] == 3
    assert batch.startswith("**Effective batch** auto × 2"), batch
