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
