"""Fit my GPU and Estimate on the page: what they show (issue 29), the planner's progress while it traces."""

from __future__ import annotations

import pytest

from tests.webui.test_handlers import FORM, make_context
from webui.fit_gpu_view import FILLED, fit_for_form, streamed
from webui.plan_view import batch_markdown


def test_one_step_is_not_one_steps():
    text = batch_markdown(7, 16, 1, 1)
    assert "1 step and 1 optimizer step per epoch, 1 step in 1 epoch" in text, text
    assert "1 steps" not in text and "1 epochs" not in text
    assert "2 steps and 1 optimizer step per epoch, 6 steps in 3 epochs" in batch_markdown(7, 4, 2, 3)


def test_the_page_fits_the_batch_to_the_checked_dataset(tmp_path):
    """Issue 29: with 7 training clips checked, Fit my GPU fills the form with batch 7, not 16."""
    values = {**FORM, "version": "v2.0.2", "batch_size": "8", "grad_acumm": 2}
    message, *updates = fit_for_form(make_context(tmp_path), values, "80 GB card", 7)
    filled = dict(zip(FILLED, (u["value"] for u in updates), strict=True))
    assert filled["batch_size"] in (7, "7") and filled["grad_acumm"] == 1, (filled, message)
    assert "7 training clips" in message


@pytest.mark.slow
def test_a_traced_plan_shows_its_progress_before_its_answer(tmp_path, tiny_base):
    """A configuration with no shipped memory model is traced in the planner's process: the page says so while
    it waits (the messages come through the child's pipe), then shows the plan."""
    from webui.plan_view import memory_plan_markdown

    ctx = make_context(tmp_path)
    values = {**FORM, "grad_clip": 0.7, "batch_size": "3"}  # settings no other test has traced in the child
    shown = list(
        streamed(lambda progress: memory_plan_markdown(ctx, values, progress), lambda note: f"waiting: {note}")
    )
    assert shown[0].startswith("waiting: Tracing the training step"), shown[:2]
    assert "Predicted peak" in shown[-1] and "| scored evaluation" not in shown[-1], "quality_eval is 0 in FORM"
    assert "| eval loss |" in shown[-1] and "| checkpoint save |" in shown[-1]
