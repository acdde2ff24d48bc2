"""Which evaluation is best: the rule the user picks, the combined score, and early stopping.

Combined score (higher is better, in [0, 1]):

    core     = CER_WEIGHT * (1 - min(CER, 1)) + (1 - CER_WEIGHT) * clamp(similarity, 0, 1)
    combined = CORE_WEIGHT * core + NATURALNESS_WEIGHT * (naturalness - 1) / 4 + STOPPING_WEIGHT * (1 - babble rate)

with CER_WEIGHT = 0.5 (intelligibility and likeness to the speaker count equally), CORE_WEIGHT = 0.7,
NATURALNESS_WEIGHT = STOPPING_WEIGHT = 0.15. CER is capped at 1 (a transcript of babble can exceed it) so one
ruined clip cannot outweigh the similarity term; the similarity of Resemblyzer embeddings already lies in [0, 1];
naturalness, a predicted MOS of 1-5, is mapped to [0, 1]; the babble rate is the share of clips that did not stop
or ran over 1.5 times their expected length (utils.quality.babble). CER and similarity are needed; a missing
naturalness or babble rate leaves its weight to the others (without both, combined is the core alone).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum

CER_WEIGHT = 0.5
CORE_WEIGHT = 0.7
NATURALNESS_WEIGHT = 0.15
STOPPING_WEIGHT = 0.15


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def combined_score(
    cer: float | None,
    similarity: float | None,
    *,
    naturalness: float | None = None,
    babble_rate: float | None = None,
    cer_weight: float = CER_WEIGHT,
) -> float | None:
    """The combined score of the module docstring; None when the CER or the similarity is missing."""
    if not 0.0 <= cer_weight <= 1.0:
        raise ValueError(f"cer_weight must be between 0 and 1, got {cer_weight}")
    if _missing(cer) or _missing(similarity):
        return None
    intelligibility = 1.0 - min(max(cer, 0.0), 1.0)
    core = cer_weight * intelligibility + (1.0 - cer_weight) * min(max(similarity, 0.0), 1.0)
    terms = [(CORE_WEIGHT, core)]
    if not _missing(naturalness):
        terms.append((NATURALNESS_WEIGHT, min(max((naturalness - 1.0) / 4.0, 0.0), 1.0)))
    if not _missing(babble_rate):
        terms.append((STOPPING_WEIGHT, 1.0 - min(max(babble_rate, 0.0), 1.0)))
    return sum(w * v for w, v in terms) / sum(w for w, _ in terms)


class BestRule(str, Enum):
    """What "best checkpoint" means: lowest eval loss, lowest CER, highest similarity, highest combined score or
    highest naturalness."""

    EVAL_LOSS = "eval_loss"
    CER = "cer"
    SIMILARITY = "similarity"
    COMBINED = "combined"
    NATURALNESS = "naturalness"

    @property
    def higher_is_better(self) -> bool:
        return self in (BestRule.SIMILARITY, BestRule.COMBINED, BestRule.NATURALNESS)

    @classmethod
    def parse(cls, value: str | BestRule) -> BestRule:
        """The rule named ``value`` (case-insensitive); ValueError listing the choices otherwise."""
        if isinstance(value, BestRule):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            choices = ", ".join(r.value for r in cls)
            raise ValueError(f"unknown best-checkpoint rule {value!r}: choose one of {choices}") from None

    def value_of(self, metrics: Mapping[str, float | None]) -> float | None:
        """This rule's number from an evaluation's metrics (keys eval_loss, cer, similarity, combined, naturalness;
        combined is computed from cer, similarity, naturalness and babble_rate when absent). None when missing or
        NaN."""
        if self is BestRule.COMBINED and metrics.get("combined") is None:
            value = combined_score(
                metrics.get("cer"),
                metrics.get("similarity"),
                naturalness=metrics.get("naturalness"),
                babble_rate=metrics.get("babble_rate"),
            )
        else:
            value = metrics.get(self.value)
        if value is None or math.isnan(float(value)):
            return None
        return float(value)


def is_better(rule: BestRule | str, new: float | None, best: float | None, *, min_delta: float = 0.0) -> bool:
    """Whether ``new`` beats ``best`` under ``rule`` by more than ``min_delta``. A missing (None or NaN)
    new value never wins; anything beats a missing best."""
    rule = BestRule.parse(rule)
    if min_delta < 0:
        raise ValueError(f"min_delta must be >= 0, got {min_delta}")
    if new is None or math.isnan(new):
        return False
    if best is None or math.isnan(best):
        return True
    return new > best + min_delta if rule.higher_is_better else new < best - min_delta


def better_evaluation(
    rule: BestRule | str,
    new: Mapping[str, float | None],
    best: Mapping[str, float | None] | None,
    *,
    min_delta: float = 0.0,
) -> bool:
    """Whether the evaluation with metrics ``new`` beats the best so far (``best``; None before the
    first) under ``rule``: :func:`is_better` on :meth:`BestRule.value_of` of each."""
    rule = BestRule.parse(rule)
    return is_better(rule, rule.value_of(new), None if best is None else rule.value_of(best), min_delta=min_delta)


class EarlyStopping:
    """Stop after ``patience`` evaluations in a row without improvement under ``rule``.

    >>> stop = EarlyStopping("cer", patience=2)
    >>> [stop.update(v) for v in (0.30, 0.20, 0.25, 0.22)], stop.should_stop
    ([True, True, False, False], True)
    """

    def __init__(self, rule: BestRule | str, patience: int, *, min_delta: float = 0.0) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be a whole number of evaluations >= 1, got {patience!r}")
        if min_delta < 0:
            raise ValueError(f"min_delta must be >= 0, got {min_delta}")
        self.rule = BestRule.parse(rule)
        self.patience = patience
        self.min_delta = min_delta
        self.best: float | None = None
        self.evals_without_improvement = 0

    def update(self, value: float | None) -> bool:
        """Record one evaluation's value; True when it is the new best. A missing value counts as no
        improvement."""
        if is_better(self.rule, value, self.best, min_delta=self.min_delta):
            self.best = float(value)
            self.evals_without_improvement = 0
            return True
        self.evals_without_improvement += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.evals_without_improvement >= self.patience
