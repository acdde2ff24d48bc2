""" "Fit my GPU" on the tiny model: the fastest configuration that fits, the effective batch kept, and why."""

from __future__ import annotations

import pytest

from utils.memory_plan.fit_gpu import CANDIDATES, fit_my_gpu
from utils.memory_plan.planner import GIB, estimate_gpt_memory

pytestmark = pytest.mark.slow
TINY = {"version": "tiny", "batch_size": 4, "grad_acumm": 2}  # effective batch 8


def test_a_large_card_gets_the_fastest_configuration_in_one_step():
    fit = fit_my_gpu(card_gb=80, **TINY)
    assert fit.name == CANDIDATES[0][0] and fit.keywords["enable_grad_checkpoint"] is False
    assert (fit.keywords["batch_size"], fit.keywords["grad_acumm"]) == (8, 1), "effective batch 8 in one step"
    assert fit.keywords["lora_rank"] == 0 and "no gradients held" in fit.to_markdown()


def test_a_tight_budget_falls_back_to_what_fits_and_says_why():
    free = int(0.70 * GIB)  # the tiny model's full fine-tune barely fits here: LoRA or checkpointing must help
    fit = fit_my_gpu(free_bytes=free, **TINY)
    chosen = fit.tried.index(next(t for t in fit.tried if t["name"] == fit.name))
    assert chosen > 0, "the fastest configuration cannot fit this budget"
    assert all(t["largest_batch"] < min(8, 4) for t in fit.tried[:chosen]), "a faster candidate that fits was skipped"
    plan = estimate_gpt_memory(version="tiny", **fit.keywords)
    assert plan.fits(free), "the chosen configuration does not fit"
    assert fit.keywords["batch_size"] * fit.keywords["grad_acumm"] >= 8, "the effective batch was not kept"
    assert sum(r.startswith("Not ") for r in fit.reasons) == chosen, fit.reasons


def test_nothing_fits_is_a_clear_error():
    with pytest.raises(ValueError, match="Nothing fits"):
        fit_my_gpu(free_bytes=int(0.3 * GIB), **TINY)


# At full size from the shipped memory model (no trace): the display of what does not fit, and a small dataset.
PUBLISHED = {"version": "v2.0.2", "batch_size": 8, "grad_acumm": 2}  # effective batch 16


def test_a_configuration_where_nothing_fits_says_so_not_batch_0():
    """Issue 29: the table showed "batch 0 / grad_acumm 0" for the configurations that do not fit a 4 GB card."""
    fit = fit_my_gpu(card_gb=4, **PUBLISHED)
    shown = fit.to_markdown()
    nothing = [t for t in fit.tried if t["largest_batch"] == 0]
    assert nothing and fit.keywords["lora_rank"] == 16, "a full fine-tune cannot fit 4 GB; LoRA does"
    assert "| 0 | 0 |" not in shown and " 0 |" not in shown
    for tried in nothing:
        assert f"| {tried['name']} | does not fit |" in shown


def test_the_batch_is_at_most_the_datasets_training_clips():
    """Issue 29: Fit my GPU suggested batch 16 for a dataset of 7 clips."""
    fit = fit_my_gpu(card_gb=80, train_rows=7, **PUBLISHED)
    assert (fit.keywords["batch_size"], fit.keywords["grad_acumm"]) == (7, 1)
    assert any("7 training clips" in reason for reason in fit.reasons), fit.reasons
    roomy = fit_my_gpu(card_gb=80, train_rows=500, **PUBLISHED)
    assert roomy.keywords["batch_size"] * roomy.keywords["grad_acumm"] == 16, "a large dataset keeps the batch"
