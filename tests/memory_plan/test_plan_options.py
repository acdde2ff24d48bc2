"""The planner's entries check every keyword before planning (issue 30): a bad number is a ValueError naming the
keyword and what it takes, never a plan of something else nor a raw Python error; and every keyword the planner
takes is declared in utils.options, where TrainArguments' numbers are checked too."""

from __future__ import annotations

import inspect
import math

import pytest

from utils.memory_plan.fit_gpu import fit_my_gpu
from utils.memory_plan.planner import PLANNER_OPTIONS, estimate_gpt_memory
from utils.options.plan_options import OBJECT_OPTIONS, PLAN_OPTIONS, checked_plan_option

TINY = {"version": "tiny"}


@pytest.mark.parametrize(
    "entry, change, message",
    [
        # Silent on main: a plan of the default batch, a plan with no accumulation, "it fits" with a negative margin.
        (fit_my_gpu, dict(batch_size="abc", card_gb=8), "batch_size must be a whole number or auto; got 'abc'"),
        (fit_my_gpu, dict(grad_acumm=0, card_gb=8), "grad_acumm must be a whole number of at least 1; got 0"),
        (estimate_gpt_memory, dict(safety_margin=-5), "safety_margin must be a number >= 0; got -5: .*from 0 to 1"),
        (estimate_gpt_memory, dict(safety_margin=math.nan), "safety_margin must be a number; got nan"),
        # Raw Python errors on main (TypeError, ValueError of int(), OverflowError, AttributeError).
        (fit_my_gpu, dict(card_gb="8"), "card_gb must be a number; got '8': card_gb takes a number from 1 to 1024"),
        (fit_my_gpu, dict(card_gb=math.nan), "card_gb must be a number; got nan"),
        (fit_my_gpu, dict(card_gb=math.inf), "card_gb must be a number; got inf"),
        (fit_my_gpu, dict(card_gb=0.5), "card_gb must be a number >= 1"),
        (fit_my_gpu, dict(free_bytes="lots"), "free_bytes must be a whole number; got 'lots': free_bytes takes"),
        (fit_my_gpu, dict(free_bytes=-1), "free_bytes must be a whole number of at least 0"),
        (estimate_gpt_memory, dict(gpu="H100"), "gpu must be a GPUInfo .*got 'H100'"),
        (estimate_gpt_memory, dict(device="tpu"), "device must be one of cuda, cpu; got 'tpu'"),
        (estimate_gpt_memory, dict(cuda_overhead_bytes="300MB"), "cuda_overhead_bytes must be a whole number"),
        (estimate_gpt_memory, dict(leaner_steps="no"), "leaner_steps must be True or False"),
        (estimate_gpt_memory, dict(batch_size="auto", free_bytes=math.inf), "free_bytes must be a whole number"),
    ],
)
def test_bad_planner_keywords_are_refused_by_name(entry, change, message):
    with pytest.raises(ValueError, match=message):
        entry(**{**TINY, **change})


def test_the_other_entries_check_their_keywords_too():
    from utils.memory_plan.planner import largest_batch_that_fits, ways_to_fit

    with pytest.raises(ValueError, match="safety_margin must be a number >= 0"):
        largest_batch_that_fits(8 * 1024**3, safety_margin=-5, **TINY)
    with pytest.raises(ValueError, match="cuda_overhead_bytes must be a whole number of at least 0"):
        ways_to_fit(8 * 1024**3, cuda_overhead_bytes=-1, **TINY)


def test_every_keyword_the_planner_takes_is_declared_where_numbers_are_checked():
    """The next planner keyword is checked too: it cannot be added to the planner without a declaration."""
    declared = set(PLAN_OPTIONS) | set(OBJECT_OPTIONS)
    assert set(PLANNER_OPTIONS) <= declared, set(PLANNER_OPTIONS) - declared
    fit_keywords = {
        name for name, p in inspect.signature(fit_my_gpu).parameters.items() if p.kind is p.KEYWORD_ONLY
    } - {"progress"}
    assert fit_keywords <= declared, fit_keywords - declared


def test_good_values_come_back_in_their_type():
    assert checked_plan_option("free_bytes", 8e9) == 8_000_000_000 and isinstance(
        checked_plan_option("free_bytes", 8e9), int
    )
    assert checked_plan_option("card_gb", 8) == 8.0 and checked_plan_option("card_gb", None) is None
    assert checked_plan_option("device", "cpu") == "cpu"


@pytest.mark.slow
def test_a_whole_float_of_free_bytes_still_plans():
    fit = fit_my_gpu(free_bytes=8e9, batch_size=4, grad_acumm=2, **TINY)
    assert fit.keywords["batch_size"] * fit.keywords["grad_acumm"] >= 8
