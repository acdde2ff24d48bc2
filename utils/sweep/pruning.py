"""When a trial falls behind: Optuna's median pruner, fed by each of the trial's evaluations (its epoch as the step).

A trial reports its rule's value at each evaluation that has one (every evaluation's eval loss; the scored ones'
CER, similarity, naturalness or combined score). It is stopped once that value is worse than the median of the
finished trials' values at the same epoch, after one finished trial: the stop is the Stop button's (at a step
boundary, with a checkpoint), so a pruned trial keeps what it trained.
"""

from __future__ import annotations

from typing import Any

STARTUP_TRIALS = 1  # finished trials before any is pruned


def make_pruner() -> Any:
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=STARTUP_TRIALS, n_warmup_steps=0)
