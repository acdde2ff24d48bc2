"""The best-checkpoint decision and the quality options, without training (the slow run is in
test_quality_training.py)."""

from __future__ import annotations

import pytest

from utils.options.arguments import TrainArguments
from utils.training.evaluation.best_checkpoint import CheckpointChoice
from utils.training.recording.run_record import write_run


def evaluations(choice: CheckpointChoice, rows: list[dict]) -> list[tuple[bool, str]]:
    """Feed evaluations in order, keeping the winners as the run would; (better, by) of each."""
    out = []
    for step, values in enumerate(rows, start=1):
        values = {"eval_loss": None, "cer": None, "similarity": None, "combined": None, **values}
        better, by, why = choice.decide(step, values, [f"cer: no model {step}"])
        if better:
            choice.best = {
                "step": step,
                "value": choice.rule.value_of(values) if by == choice.rule.value else None,
                "by": by,
                "why": why,
                "metrics": values,
            }
        out.append((better, by))
    return out


def test_each_rule_keeps_its_direction(tmp_path):
    rows = [
        {"eval_loss": 3.0, "cer": 0.5, "similarity": 0.6},
        {"eval_loss": 2.0, "cer": 0.7, "similarity": 0.7},
        {"eval_loss": 2.5, "cer": 0.4, "similarity": 0.5},
    ]
    assert [b for b, _ in evaluations(CheckpointChoice("eval_loss", 0, tmp_path, None), rows)] == [True, True, False]
    assert [b for b, _ in evaluations(CheckpointChoice("cer", 0, tmp_path, None), rows)] == [True, False, True]
    assert [b for b, _ in evaluations(CheckpointChoice("similarity", 0, tmp_path, None), rows)] == [True, True, False]
    # combined = 0.5 (1 - CER) + 0.5 similarity: 0.55, 0.5, 0.55 (a tie does not win).
    assert [b for b, _ in evaluations(CheckpointChoice("combined", 0, tmp_path, None), rows)] == [True, False, False]


def test_combined_and_naturalness_see_whether_the_voice_stops_and_how_natural_it_sounds(tmp_path):
    """Same CER and similarity: the checkpoint that stops (lower babble rate) wins under combined; the most natural
    one under naturalness; and early stopping counts by the same values."""
    rows = [
        {"eval_loss": 3.0, "cer": 0.2, "similarity": 0.8, "naturalness": 3.0, "babble_rate": 0.5},
        {"eval_loss": 2.5, "cer": 0.2, "similarity": 0.8, "naturalness": 3.0, "babble_rate": 0.0},
        {"eval_loss": 2.0, "cer": 0.2, "similarity": 0.8, "naturalness": 3.5, "babble_rate": 0.5},
    ]
    combined = CheckpointChoice("combined", 0, tmp_path, None)
    assert [b for b, _ in evaluations(combined, rows)] == [True, True, False] and combined.best["step"] == 2
    natural = CheckpointChoice("naturalness", 0, tmp_path, None)
    assert [b for b, _ in evaluations(natural, rows)] == [True, False, True] and natural.best["step"] == 3
    stopping = CheckpointChoice("combined", 1, tmp_path, None)
    assert [stopping._count(values) for values in rows] == [False, False, True], "no better than step 2: stop"


def test_the_reason_shows_enough_digits_to_tell_the_two_values_apart(tmp_path):
    choice = CheckpointChoice("eval_loss", 0, tmp_path, None)
    evaluations(choice, [{"eval_loss": 7.591432}])
    better, _, why = choice.decide(2, {"eval_loss": 7.591207}, [])
    assert better and why == "eval_loss 7.5912 is lower than 7.5914 (step 1)"
    better, _, why = choice.decide(3, {"eval_loss": 2.0}, [])
    assert better and why == "eval_loss 2 is lower than 7.591 (step 1)"


def test_a_missing_value_keeps_a_provisional_best_by_eval_loss_until_one_is_measured(tmp_path):
    choice = CheckpointChoice("cer", 0, tmp_path, None)
    rows = [
        {"eval_loss": 3.0},
        {"eval_loss": 3.5},
        {"eval_loss": 2.0},
        {"eval_loss": 2.5, "cer": 0.9},
        {"eval_loss": 1.0},
        {"eval_loss": 1.5, "cer": 0.95},
        {"eval_loss": 1.5, "cer": 0.8},
    ]
    assert evaluations(choice, rows) == [
        (True, "eval_loss"),
        (False, "eval_loss"),
        (True, "eval_loss"),
        (True, "cer"),
        (False, "cer"),
        (False, "cer"),
        (True, "cer"),
    ]
    assert choice.best["step"] == 7 and choice.best["value"] == 0.8


def test_a_resumed_run_continues_from_its_recorded_best(tmp_path):
    best = {"rule": "similarity", "step": 40, "value": 0.7, "by": "similarity", "why": "", "metrics": {}}
    write_run(tmp_path, {"best": best, "early_stopping": {"rule": "similarity", "evals_without_improvement": 2}})
    (tmp_path / "best_model.pth").write_bytes(b"weights")
    choice = CheckpointChoice("similarity", 3, tmp_path, None)
    assert choice.best["step"] == 40 and choice.stopper.evals_without_improvement == 2
    assert choice.decide(50, {"similarity": 0.65}, [])[0] is False and choice._count({"similarity": 0.65})
    # Another rule starts afresh: the recorded best was chosen by a different measure.
    assert CheckpointChoice("cer", 3, tmp_path, None).best is None


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(best_by="cer", quality_eval=0), "best_by='cer' is measured on generated speech"),
        (dict(best_by="loss"), "best_by must be one of eval_loss, cer, similarity, combined"),
        (dict(quality_eval=-1), "quality_eval must be a whole number of at least 0"),
        (dict(early_stop_patience=1.5), "early_stop_patience must be a whole number"),
    ],
)
def test_quality_options_are_checked(change, message):
    with pytest.raises(ValueError, match=message):
        TrainArguments(**change)
