"""What the trainer is given when it is built: each collaborator of the training loop as a small typed protocol.

`FineTuneTrainer` (utils.training.loop.trainer) receives one `TrainerParts` at construction and calls its parts
at the places its epoch names (`FineTuneTrainer._train_epoch`, `_epochs`); nothing is assigned to a trainer after
it is built and no collaborator is looked up by name (tests/training/test_trainer_contract.py holds both).
The parts come from the rooms that own them: scoring from utils.training.evaluation.best_checkpoint, the
out-of-memory record from utils.training.loop.oom, the ranks from utils.training.ranks.data_parallel, the
metrics and phase times from utils.training.recording, the checkpoint writer from utils.training.checkpointing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from utils.training.checkpointing.checkpoints import CheckpointWriter
from utils.training.recording.metrics import MetricsLogger
from utils.training.recording.phase_times import PhaseTimes


class Scoring(Protocol):
    """The run's choice of the best checkpoint (utils.training.evaluation.best_checkpoint.CheckpointChoice): scored
    evaluations, best_model.pth and early stopping."""

    stop_requested: bool  # a multi-process run's early stop, agreed by every rank at the next step

    def score_baseline(self, trainer: Any) -> None:
        """Before the first step of a new run: the starting weights scored as the baseline."""

    def __call__(self, trainer: Any) -> None:
        """At an epoch's end: the evaluation, and best_model.pth when it is the best (may raise an early stop)."""

    def collect(self) -> None:
        """At a step's end: the record of a background scoring that has finished."""

    def wait(self) -> None:
        """Before the run ends: the scoring still in the background, recorded."""


class OutOfMemoryHandler(Protocol):
    """A run's record of the out-of-memory errors its trainer recovers from (utils.training.loop.oom.OutOfMemoryLog)."""

    micro_batch: int | None  # a resume's clips per forward/backward (the micro-batch its run reached)

    def __call__(self, event: dict[str, Any]) -> None:
        """An error recovered from (the micro-batch halved) or stopped at: recorded where the page reads it."""

    def what_would_fit(self, trained: bool = True) -> str:
        """The memory planner's advice for a run that stops at one clip per micro-batch."""


class RankSync(Protocol):
    """A multi-process run's side of each step (utils.training.ranks.data_parallel.DataParallelRanks)."""

    def join(self, model: Any) -> None:
        """Before the first step, on every rank (a collective): the GPT wrapped to average gradients."""

    def on_step_start(self, position: int, steps_in_epoch: int, grad_accum_steps: int) -> None:
        """Whether this step's backward exchanges gradients (the last of an optimizer step's batches does)."""

    def step_end(self, trainer: Any, batch: dict[str, Any], local_stop: bool) -> bool:
        """After each step, on every rank: one all_reduce; returns whether any rank asked to stop."""

    def record_fields(self) -> dict[str, Any]:
        """What rank 0 adds to the step's metrics record (the loss over the ranks, each rank's memory)."""


def never_stop() -> bool:
    return False


@dataclass(frozen=True)
class TrainerParts:
    """Everything a FineTuneTrainer works with besides coqui's own arguments (the model, config, samples)."""

    metrics: MetricsLogger  # metrics.jsonl: coqui's dashboard logger, and the step and epoch timing
    checkpoints: CheckpointWriter  # checkpoint_<n>.pth and best_model.pth, atomic and in the background
    should_stop: Callable[[], bool] = never_stop  # the caller's Stop (the page's button, a stop file)
    timings: PhaseTimes = field(default_factory=PhaseTimes)  # where the wall time goes (run.json `timings`)
    scoring: Scoring | None = None  # None: the best model is the one with the lowest loss, no scored evaluation
    out_of_memory: OutOfMemoryHandler | None = None  # None: recovered errors are logged only
    ranks: RankSync | None = None  # None: one process
    nonfinite_limit: int = 5  # steps in a row with a NaN/inf loss before the run is declared diverged
