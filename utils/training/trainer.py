"""Small adaptations of coqui's `GPTTrainer` (the model) and `Trainer` (the loop) for fine-tuning runs.

The training loop is coqui's; these subclasses change only what a notebook or web app cannot live with:
- `Trainer.fit` ends the process (`os._exit` on Ctrl-C, `sys.exit(1)` on any error) and deletes a run
  folder that holds no checkpoint. `FineTuneTrainer.fit` saves a checkpoint on Ctrl-C or a stop request,
  returns, and lets errors propagate unchanged.
- The trainer numbers periodic checkpoints by the index of the last step but best-model checkpoints by
  the count of steps, so resuming from a best model skipped a step number. Here every checkpoint
  records the index of its last completed step, and resuming continues the count exactly.
- Checkpoints leave out the frozen DVAE (210 MB per file); it is loaded from `dvae.pth` at start.
- A new run trains in the folder the caller created (`run_dir`), not in one the trainer names by the
  minute, so two runs started together never share a folder.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trainer.trainer as coqui_trainer_module
from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTTrainer
from trainer import Trainer

from utils.training.run_record import RunStatus

log = logging.getLogger(__name__)

_FROZEN_PREFIXES = ("dvae.",)


class StopTraining(Exception):
    """Raised from a step callback to end the run at a step boundary (the UI's Stop button)."""


class TrainingDiverged(RuntimeError):
    """The loss stayed NaN or infinite: the weights are no longer worth saving."""


class FineTuneGPTTrainer(GPTTrainer):
    """coqui's GPTTrainer whose checkpoints leave out the frozen DVAE."""

    def state_dict(self, *args, **kwargs):  # type: ignore[override]
        state = super().state_dict(*args, **kwargs)
        for key in [k for k in state if k.startswith(_FROZEN_PREFIXES)]:
            del state[key]
        return state

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # type: ignore[override]
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        if strict:
            missing = [k for k in result.missing_keys if not k.startswith(_FROZEN_PREFIXES)]
            if missing or result.unexpected_keys:
                raise RuntimeError(
                    f"Checkpoint does not match the model: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}"
                )
        return result


_folder_lock = threading.Lock()


@contextlib.contextmanager
def _trains_in(run_dir: Path | None) -> Iterator[None]:
    """While the Trainer is built, make its folder naming return `run_dir` (its only hook for that)."""
    if run_dir is None:
        yield
        return
    with _folder_lock:
        original = coqui_trainer_module.get_experiment_folder_path
        coqui_trainer_module.get_experiment_folder_path = lambda root, name: Path(run_dir)
        try:
            yield
        finally:
            coqui_trainer_module.get_experiment_folder_path = original


class FineTuneTrainer(Trainer):
    """coqui's Trainer that returns from `fit` instead of exiting, and can be asked to stop.

    After `fit`, `outcome` is FINISHED, STOPPED (stop requested) or INTERRUPTED (Ctrl-C); a diverged
    loss raises TrainingDiverged. `stop_checkpoint` is the checkpoint saved on stop or interrupt.
    """

    def __init__(self, *args, should_stop: Callable[[], bool] | None = None, run_dir: Path | None = None,
                 **kwargs) -> None:  # fmt: skip
        handlers_before = set(logging.getLogger("trainer").handlers)
        with _trains_in(run_dir):
            super().__init__(*args, **kwargs)
        # The trainer adds a log-file handler per instance and never removes it; remember ours.
        self._own_handlers = [h for h in logging.getLogger("trainer").handlers if h not in handlers_before]
        self.should_stop = should_stop
        self.outcome: RunStatus | None = None
        self._resuming = self.continue_run
        self.stop_checkpoint: str | None = None
        self.callbacks.callbacks_on_train_step_end.append(self._check_stop)

    def save_training_script(self) -> None:
        # The trainer copies sys.argv[0] into the run; in a notebook or the web UI that is the host's
        # launcher, not a training script. run.json records the call instead.
        return

    def _check_stop(self, trainer: Trainer) -> None:
        if self.should_stop is not None and self.should_stop():
            raise StopTraining

    def _steps_as_last_index(self, save: Callable[[], None]) -> None:
        """Run a save with `total_steps_done` as the index of the last completed step (see module doc)."""
        self.total_steps_done -= 1
        try:
            save()
        finally:
            self.total_steps_done += 1

    def train_epoch(self) -> None:
        """coqui's epoch; the first epoch after a resume trains only the steps the stopped run had left."""
        if self.train_loader is None:
            self.train_loader = self.prepare_accelerate_loader(self.get_train_dataloader(self.train_samples))
        full = self.train_loader
        done_in_epoch = self.total_steps_done - self.epochs_done * len(full) if self._resuming else 0
        self._resuming = False  # only the first epoch after a resume is a partial one
        if not 0 < done_in_epoch <= len(full):
            super().train_epoch()
            return
        self.train_loader = _FirstSteps(full, len(full) - done_in_epoch)
        try:
            super().train_epoch()
        finally:
            self.train_loader = full

    def save_best_model(self) -> None:
        # Called at an epoch's end, when total_steps_done counts the steps done.
        self._steps_as_last_index(super().save_best_model)

    def _save_after_stop(self) -> None:
        if self.total_steps_done == 0 or self.args.rank != 0:
            return  # nothing trained yet
        before = set(self.output_path.glob("checkpoint_*.pth"))
        self._steps_as_last_index(super().save_checkpoint)
        saved = sorted(set(self.output_path.glob("checkpoint_*.pth")) - before)
        self.stop_checkpoint = str(saved[-1]) if saved else str(
            self.output_path / f"checkpoint_{self.total_steps_done - 1}.pth"
        )

    def fit(self) -> None:  # type: ignore[override]
        try:
            self._fit()
            self.outcome = RunStatus.FINISHED
        except StopTraining:
            self.outcome = RunStatus.STOPPED
            self._save_after_stop()
        except KeyboardInterrupt:
            self.outcome = RunStatus.INTERRUPTED
            self._save_after_stop()
        except TrainingDiverged:
            self.outcome = RunStatus.FAILED
            raise
        finally:
            try:
                self.dashboard_logger.finish()
            finally:
                self.close_log_files()

    def close_log_files(self) -> None:
        trainer_log = logging.getLogger("trainer")
        for handler in self._own_handlers:
            trainer_log.removeHandler(handler)
            handler.close()
        self._own_handlers = []


class _FirstSteps:
    """The first `steps` batches of a data loader, with that length (the trainer reads both)."""

    def __init__(self, loader: Any, steps: int) -> None:
        self.loader = loader
        self.steps = steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self.loader), self.steps)


class DivergenceGuard:
    """A step callback that ends the run once the loss has been NaN or infinite `limit` steps in a row.

    A few non-finite steps are normal with FP16 (the GradScaler skips them); a streak means the weights
    are broken, so nothing more is saved and the message says what to change."""

    def __init__(self, metrics: Any, limit: int) -> None:
        self.metrics = metrics
        self.limit = limit

    def __call__(self, trainer: Trainer) -> None:
        if self.metrics.nonfinite_streak >= self.limit:
            raise TrainingDiverged(
                f"The loss was NaN or infinite for {self.metrics.nonfinite_streak} steps in a row: training diverged. "
                "Lower the learning rate, or use precision='bf16' or 'fp32'. Earlier checkpoints are kept."
            )
