"""The cadence of scored evaluations: within a share of the run's wall time, first and last always scored."""

from __future__ import annotations

from utils.options.arguments import TrainArguments, option_of
from utils.training.evaluation.quality_eval import ScoringBudget


class Clock:
    """A run's wall time, advanced by the test (epochs and scorings of known length)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scored_evaluations(share: float, epoch_seconds: float, scoring_seconds: float, epochs: int) -> list[bool]:
    clock = Clock()
    budget = ScoringBudget(share, clock)
    scored = []
    for epoch in range(epochs):
        clock.now += epoch_seconds
        if budget.should_score(final=epoch == epochs - 1):
            clock.now += scoring_seconds
            budget.record(scoring_seconds)
            scored.append(True)
        else:
            scored.append(False)
    return scored


def test_scoring_that_costs_more_than_an_epoch_is_spread_out_to_its_share():
    # The CPU run: an epoch of 125 s, a scored evaluation of 342 s.
    scored = scored_evaluations(0.2, 125, 342, 30)
    assert scored[0] and scored[-1], "the first and the last evaluation are always scored"
    assert 3 <= sum(scored) < 30
    total = 30 * 125 + 342 * sum(scored)
    middle = 342 * (sum(scored) - 1)  # all but the final one, which is scored whatever it costs
    assert middle / (total - 342) <= 0.2 + 1e-9, "the scorings before the last stay within the share"


def test_cheap_scoring_is_done_at_every_evaluation_and_share_1_always_scores():
    assert all(scored_evaluations(0.2, 100, 10, 12)), "10% of the run: every evaluation is scored"
    assert all(scored_evaluations(1.0, 10, 300, 6))


def test_the_budget_is_an_option_with_its_default_said_in_the_form():
    assert TrainArguments().quality_eval_share == 0.2
    from webui.form_spec import FORM  # the form's layout lives in the web layer

    spec, ui = option_of("quality_eval_share"), FORM.get("quality_eval_share")
    assert ui is not None and "20%" in ui.info and "1 scores every evaluation" in spec.help
