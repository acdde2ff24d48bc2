"""The shipped memory model (memory_model.json): answers every published version's shipped option sets without a
trace, and agrees with fresh full-size traces of configurations it was not traced at (within 3%)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from utils.constants import XTTS_SAMPLE_RATE
from utils.memory_plan import memory_model as mm
from utils.memory_plan import planner
from utils.memory_plan.regenerate import shipped_keywords
from utils.model.base_models import KNOWN_VERSIONS


def _settings(keywords: dict, batch: int, seconds: float):  # type: ignore[no-untyped-def]
    arguments, options, _ = planner._arguments((), {**keywords, "batch_size": batch})
    return replace(planner.step_settings(arguments, options), audio_samples=round(seconds * XTTS_SAMPLE_RATE))


def test_every_published_version_and_shipped_option_set_is_answered_without_a_trace():
    assert mm.TABLE.is_file(), "memory_model.json is missing: python -m utils.memory_plan.regenerate"
    cached = len(planner._FITS)
    for keywords in shipped_keywords():
        for version in KNOWN_VERSIONS:
            for precision in ("bf16", "fp16"):  # FP16 (Volta, Turing) shares BF16's fit
                estimate = planner.estimate_gpt_memory(**{**keywords, "version": version, "precision": precision})
                assert estimate.trace_seconds == 0.0 and "shipped" in estimate.source, (keywords, version)
    defaults = planner.estimate_gpt_memory(version="v2.0.2")  # the page's untouched form
    assert "shipped" in defaults.source and len(planner._FITS) == cached, "something was traced"
    assert mm.lookup(_settings(shipped_keywords()[0], 2, 29.0)) is None, "past the fitted range: traced"


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, batch, seconds",
    [
        ({"enable_grad_checkpoint": True, "lora_rank": 0, "grad_acumm": 2}, 5, 9.7),  # train_gpt's defaults
        ({"enable_grad_checkpoint": False, "lora_rank": 16, "grad_acumm": 1, "precision": "fp16"}, 7, 21.3),
        ({"enable_grad_checkpoint": False, "lora_rank": 0, "grad_acumm": 1}, 1, 4.2),
    ],
)
def test_the_shipped_model_matches_fresh_traces(change, batch, seconds):
    """A fresh full-size trace at a batch and length the table was not traced at: its training step's and eval
    pass's peaks against the shipped model's, within 3%."""
    from utils.memory_plan.trace import trace_step

    keywords = {**shipped_keywords()[0], **change}
    settings = _settings(keywords, batch, seconds)
    shipped = mm.lookup(settings)
    assert shipped is not None, "not a shipped option set"
    fresh = trace_step(settings)
    traced_step, traced_eval = sum(fresh.peak()[1].values()), sum(fresh.eval_peak()[1].values())
    step, evaluation = sum(shipped.at(batch)[1].values()), sum(shipped.at_eval(batch).values())
    assert abs(step - traced_step) <= 0.03 * traced_step, (step, traced_step)
    assert abs(evaluation - traced_eval) <= 0.03 * traced_eval, (evaluation, traced_eval)
