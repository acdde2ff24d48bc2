"""Best-checkpoint rules, the combined score and early stopping."""

import math

import pytest

from utils.quality.selection import BestRule, EarlyStopping, better_evaluation, combined_score, is_better


def test_combined_score_formula():
    assert combined_score(0.0, 1.0) == 1.0
    assert combined_score(0.2, 0.8) == pytest.approx(0.5 * 0.8 + 0.5 * 0.8)
    assert combined_score(3.0, 0.6) == pytest.approx(0.3)  # CER capped at 1
    assert combined_score(0.1, 0.7, cer_weight=1.0) == pytest.approx(0.9)
    assert combined_score(None, 0.7) is None and combined_score(0.1, math.nan) is None
    with pytest.raises(ValueError, match="cer_weight"):
        combined_score(0.1, 0.5, cer_weight=2)


def test_rules_know_their_direction():
    assert is_better("eval_loss", 1.0, 1.5) and not is_better("eval_loss", 1.5, 1.0)
    assert is_better("cer", 0.1, 0.2) and not is_better(BestRule.CER, 0.3, 0.2)
    assert is_better("similarity", 0.9, 0.8) and not is_better("similarity", 0.7, 0.8)
    assert is_better("Combined", 0.7, 0.6) and not is_better("combined", 0.6, 0.6)
    assert is_better("cer", 0.2, None) and not is_better("cer", None, 0.2) and not is_better("cer", math.nan, 0.2)
    assert not is_better("cer", 0.195, 0.2, min_delta=0.01) and is_better("cer", 0.18, 0.2, min_delta=0.01)
    with pytest.raises(ValueError, match="eval_loss, cer, similarity, combined, naturalness"):
        BestRule.parse("wer")


def test_value_of_reads_metrics():
    metrics = {"eval_loss": 2.5, "cer": 0.2, "similarity": 0.8}
    assert BestRule.EVAL_LOSS.value_of(metrics) == 2.5
    assert BestRule.COMBINED.value_of(metrics) == pytest.approx(0.8)  # computed from cer and similarity
    assert BestRule.SIMILARITY.value_of({"similarity": None}) is None
    first = {"eval_loss": 2.0, "cer": 0.30, "similarity": 0.8}
    second = {"eval_loss": 2.2, "cer": 0.10, "similarity": 0.8}
    assert better_evaluation("cer", second, first) and not better_evaluation("eval_loss", second, first)
    assert better_evaluation("combined", second, first) and better_evaluation("similarity", first, None)


def test_early_stopping_counts_evaluations_without_improvement():
    stop = EarlyStopping("cer", patience=2)
    assert [stop.update(v) for v in (0.30, 0.20)] == [True, True] and not stop.should_stop
    assert stop.update(0.25) is False and not stop.should_stop
    assert stop.update(0.15) is True and stop.evals_without_improvement == 0  # an improvement resets
    assert stop.update(None) is False and stop.update(0.16) is False and stop.should_stop
    assert stop.best == 0.15
    higher = EarlyStopping("similarity", patience=1)
    assert higher.update(0.5) and not higher.update(0.4) and higher.should_stop
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="patience"):
            EarlyStopping("cer", patience=bad)


def test_combined_score_counts_naturalness_and_babble_when_measured():
    core = 0.5 * 0.8 + 0.5 * 0.8  # CER 0.2, similarity 0.8
    assert combined_score(0.2, 0.8, naturalness=5.0, babble_rate=0.0) == pytest.approx(0.7 * core + 0.15 + 0.15)
    assert combined_score(0.2, 0.8, naturalness=1.0, babble_rate=1.0) == pytest.approx(0.7 * core)
    # One missing: its weight goes to the others (0.7 and 0.15 of 0.85).
    assert combined_score(0.2, 0.8, naturalness=3.0) == pytest.approx((0.7 * core + 0.15 * 0.5) / 0.85)
    assert combined_score(0.2, 0.8, babble_rate=0.5) == pytest.approx((0.7 * core + 0.15 * 0.5) / 0.85)
    assert combined_score(None, 0.8, naturalness=4.0, babble_rate=0.0) is None, "CER and similarity are needed"
    # A voice that babbles scores lower than the same voice that stops, all else equal.
    assert combined_score(0.2, 0.8, naturalness=3.5, babble_rate=0.5) < combined_score(
        0.2, 0.8, naturalness=3.5, babble_rate=0.0
    )


def test_naturalness_is_a_rule_of_its_own_and_combined_reads_it():
    assert is_better("naturalness", 3.2, 3.1) and not is_better(BestRule.NATURALNESS, 2.9, 3.1)
    assert BestRule.NATURALNESS.value_of({"naturalness": 3.4}) == 3.4
    metrics = {"cer": 0.2, "similarity": 0.8, "naturalness": 5.0, "babble_rate": 0.0}
    assert BestRule.COMBINED.value_of(metrics) == pytest.approx(0.7 * 0.8 + 0.3)
    stop = EarlyStopping("naturalness", patience=1)
    assert stop.update(3.0) and not stop.update(2.9) and stop.should_stop
