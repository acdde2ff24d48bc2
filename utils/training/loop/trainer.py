"""Small adaptations of coqui's `GPTTrainer` (the model) and `Trainer` (the loop) for fine-tuning runs.

The training loop is coqui's; these subclasses change only what a notebook or web app cannot live with:
- `Trainer.fit` ends the process (`os._exit` on Ctrl-C, `sys.exit(1)` on any error) and deletes a run
  folder that holds no checkpoint. `FineTuneTrainer.fit` saves a checkpoint on Ctrl-C or a stop request,
  returns, and lets errors propagate unchanged.
- Checkpoints are written by `CheckpointWriter` (atomic, in the background, named by the steps done, never
  NaN, only the newest kept; see utils.training.checkpointing.checkpoints), and leave out the frozen DVAE and HiFi-GAN,
  which are loaded from the base model at start. A resume continues the step count exactly, from the newest
  checkpoint or the one the caller names, and finishes the interrupted epoch's remaining steps only: the
  batches the interrupted session had not reached (the epoch's order is recomputed from seed and epoch).
- A new run trains in the folder the caller created (`run_dir`), not in one the trainer names by the
  minute, so two runs started together never share a folder; its config.json is written atomically.
- An out-of-memory error in a step (or an eval-loss batch) trains the same batch again in micro-batches of half as
  many clips, and the run goes on at that size; at one clip it stops with a checkpoint
  (utils.training.loop.micro_steps).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import trainer.trainer as coqui_trainer_module
from trainer import Trainer

from utils.files import write_json_atomic
from utils.training.checkpointing import random_state
from utils.training.checkpointing.checkpoints import (
    CheckpointWriter,
    DiskFull,
    newest_checkpoint,
    remove_stale_temporaries,
    set_aside_newer,
)
from utils.training.loop.micro_steps import OutOfMemoryRecovery, OutOfMemoryStop
from utils.training.ranks import distributed
from utils.training.recording.checkpoint_files import BEST_MODEL_FILE, checkpoint_path
from utils.training.recording.phase_times import DATA, EVAL_LOSS, SAVES, SCORING_WAIT, TRAIN_STEPS, PhaseTimes, phase
from utils.training.recording.run_record import RunStatus

log = logging.getLogger(__name__)


class StopTraining(Exception):
    """Raised from a step callback to end the run at a step boundary (the UI's Stop button)."""


class TrainingDiverged(RuntimeError):
    """The loss stayed NaN or infinite: the weights are no longer worth saving."""


_construction_lock = threading.Lock()


def _copy_config_atomically(config: Any, out_path: Any, new_fields: dict[str, Any]) -> None:
    if distributed.is_main_process():  # in a multi-process run, only rank 0 writes the run folder
        write_json_atomic(Path(out_path) / "config.json", {**config.to_dict(), **new_fields}, indent=4)


@contextlib.contextmanager
def _construction_hooks(run_dir: Path | None) -> Iterator[None]:
    """While coqui's Trainer is built: it trains in `run_dir` (its folder naming is its only hook for that)
    and writes config.json atomically. Module functions are swapped back at once, under a lock."""
    with _construction_lock:
        saved = coqui_trainer_module.get_experiment_folder_path, coqui_trainer_module.copy_model_files
        if run_dir is not None:
            coqui_trainer_module.get_experiment_folder_path = lambda root, name: Path(run_dir)
        coqui_trainer_module.copy_model_files = _copy_config_atomically
        try:
            yield
        finally:
            coqui_trainer_module.get_experiment_folder_path, coqui_trainer_module.copy_model_files = saved


class FineTuneTrainer(OutOfMemoryRecovery, Trainer):
    """coqui's Trainer that returns from `fit` instead of exiting, and can be asked to stop.

    After `fit`, `outcome` is FINISHED, STOPPED (stop requested) or INTERRUPTED (Ctrl-C); a diverged
    loss raises TrainingDiverged. `stop_checkpoint` is the checkpoint saved on stop or interrupt, `stop_reason`
    why the run stopped itself (out of memory at one clip per micro-batch).
    """

    def __init__(
        self,
        *args,
        should_stop: Callable[[], bool] | None = None,
        run_dir: Path | None = None,
        restore_from: Path | None = None,
        checkpoints: CheckpointWriter | None = None,
        **kwargs,
    ) -> None:
        self._restore_from = restore_from
        self._random_state: dict[str, Any] | None = None  # restored at the first batch after a resume
        self._boundary: dict[str, Any] | None = None  # the random state at the last step's end
        handlers_before = set(logging.getLogger("trainer").handlers)
        with _construction_hooks(run_dir):
            super().__init__(*args, **kwargs)
        # The trainer adds a log-file handler per instance and never removes it; remember ours.
        self._own_handlers = [h for h in logging.getLogger("trainer").handlers if h not in handlers_before]
        self.should_stop = should_stop
        self.outcome: RunStatus | None = None
        self._resuming = self.continue_run
        self.stop_checkpoint: str | None = None
        self.choose_best: Callable[[FineTuneTrainer], None] | None = None  # set by the run; None: lowest loss
        self.checkpoints = checkpoints or CheckpointWriter(self.output_path, self.config.save_n_checkpoints)
        self.init_recovery(distributed.is_distributed())
        self.stop_reason: str | None = None
        # Where the wall time goes (run.json `timings`); the run replaces it with its own, started at its call.
        self.phase_times = PhaseTimes()
        # The checkpoint of this many steps on disk holds this trainer's weights (after a resume: the restored one).
        self._saved_step = self.total_steps_done if self.continue_run else 0
        if self.continue_run and distributed.is_main_process():  # the run's earlier process has ended
            self._random_state = random_state.saved_state(getattr(self.args, "restore_path", None))
            remove_stale_temporaries(Path(self.output_path))
            if self._restore_from is not None:
                set_aside_newer(Path(self.output_path), self.total_steps_done)
        if self.use_cuda and hasattr(self._get_model(), "xtts"):
            # coqui moved the whole model to the GPU; no training step uses the HiFi-GAN decoder.
            self._get_model().xtts.hifigan_decoder.to("cpu")
        self.callbacks.callbacks_on_train_step_end.extend(
            [self._collect_saves, self._periodic_checkpoint, self._check_stop]
        )
        self.callbacks.callbacks_on_train_step_end.insert(0, self._mark_step_boundary)

    def init_training(self, args: Any, coqpit_overrides: list[str], config: Any = None) -> tuple[Any, dict[str, Any]]:
        """A resume reads the run's config.json and restores the checkpoint the caller chose, else the newest
        full one (coqui's own pick loads every best model to compare steps, and prefers a weights-only one)."""
        if not args.continue_path:
            return config, {}
        config.load_json(str(Path(args.continue_path) / "config.json"))
        chosen = self._restore_from or newest_checkpoint(Path(args.continue_path))
        if chosen is None:
            raise ValueError(f"{args.continue_path} holds no checkpoint to continue from.")
        args.restore_path = str(chosen)
        return config, {"restore_path": args.restore_path}

    def _setup_logger_config(self, log_file: str) -> None:
        if distributed.is_main_process():
            super()._setup_logger_config(log_file)
            return
        # Another rank: no trainer_<rank>_log.txt in the run folder, and no console copy of rank 0's progress.
        trainer_log = logging.getLogger("trainer")
        trainer_log.handlers = [h for h in trainer_log.handlers if not isinstance(h, logging.StreamHandler)]

    def save_training_script(self) -> None:
        # The trainer copies sys.argv[0] into the run; in a notebook or the web UI that is the host's
        # launcher, not a training script. run.json records the call instead.
        return

    def _check_stop(self, trainer: Trainer) -> None:
        if self.should_stop is not None and self.should_stop():
            raise StopTraining

    def save_checkpoint(self) -> None:  # type: ignore[override]
        """coqui's own periodic save (counted before the step ends) is off; `_periodic_checkpoint` saves."""

    def _save_full(self) -> Path | None:
        if self.args.rank not in (None, 0) or self.total_steps_done == 0:
            return None
        existing = checkpoint_path(self.output_path, self.total_steps_done)
        if self._saved_step == self.total_steps_done:
            self.checkpoints.flush()  # it may still be in flight
            if existing.is_file():
                return existing  # written at this step already (a periodic save, then a stop or the end)
        with phase(self, SAVES):
            saved = self.checkpoints.save(self, self.total_steps_done)
        if saved is not None:
            self._saved_step = self.total_steps_done
        return saved

    def _collect_saves(self, trainer: Trainer) -> None:
        # A background write that finished: its follow-up (pruning, run.json) or its error (DiskFull), here.
        self.checkpoints.poll()
        collect = getattr(self.choose_best, "collect", None)
        if collect is not None:  # a background scoring that finished: its record, here
            collect()

    def _score_baseline(self) -> None:
        """Before the first step: the starting weights scored as the run's baseline
        (utils.training.evaluation.best_checkpoint)."""
        baseline = getattr(self.choose_best, "score_baseline", None)
        if baseline is not None and self.args.rank in (None, 0):
            baseline(self)

    def _wait_for_scoring(self) -> None:
        """The scores still being computed in the background are recorded before the run ends (none lost)."""
        wait = getattr(self.choose_best, "wait", None)
        if wait is not None:
            with phase(self, SCORING_WAIT):
                wait()

    def train_step(self, *args: Any, **kwargs: Any) -> Any:
        with phase(self, TRAIN_STEPS):
            return super().train_step(*args, **kwargs)

    def eval_epoch(self) -> None:
        with phase(self, EVAL_LOSS):
            super().eval_epoch()

    def _periodic_checkpoint(self, trainer: Trainer) -> None:
        if self.total_steps_done % self.config.save_step == 0:
            self._save_full()

    def _random_state_now(self) -> dict[str, Any]:
        full = self.train_loader.loader if isinstance(self.train_loader, _FirstSteps) else self.train_loader
        position = self.total_steps_done - self.epochs_done * len(full) if full is not None else 0
        return random_state.capture(self.epochs_done, position)

    def _mark_step_boundary(self, trainer: Trainer) -> None:
        self._boundary = self._random_state_now()

    def random_state(self) -> dict[str, Any]:
        """The generators and the sampler's place at this checkpoint's step boundary (what a checkpoint saves): now,
        for a save at a step's end, a stop or the end of the run; the last step's end for a save after Ctrl-C or an
        error, which may come mid-step, after the next batch drew from the generators."""
        if self.outcome in (RunStatus.INTERRUPTED, RunStatus.FAILED) and self._boundary is not None:
            return self._boundary
        return self._random_state_now()

    def train_epoch(self) -> None:
        """coqui's epoch; the first epoch after a resume trains only the steps the stopped run had left, drawing
        from the generators as the run had left them."""
        if self.train_loader is None:
            self.train_loader = self.prepare_accelerate_loader(self.get_train_dataloader(self.train_samples))
        full = self.train_loader
        done_in_epoch = self.total_steps_done - self.epochs_done * len(full) if self._resuming else 0
        self._resuming = False  # only the first epoch after a resume is a partial one
        batches = getattr(full, "batch_sampler", None)
        if hasattr(batches, "set_epoch"):  # the epoch's order comes from (seed, epoch): a resume recomputes it
            batches.set_epoch(self.epochs_done)
            batches.skip_batches = done_in_epoch if 0 < done_in_epoch <= len(full) else 0
        saved, self._random_state = self._random_state, None
        restore = None if saved is None else (lambda: random_state.restore(saved))
        where = (saved or {}).get("sampler") or {}
        if where and (where.get("epoch"), where.get("position")) != (self.epochs_done, done_in_epoch):
            log.warning(
                "The checkpoint was saved at epoch %s, batch %s; resuming at epoch %s, batch %s.",
                where.get("epoch"),
                where.get("position"),
                self.epochs_done,
                done_in_epoch,
            )
        if not 0 < done_in_epoch <= len(full) and restore is None:
            with phase(self, DATA):  # what the steps inside leave: the loader's next batch, logging
                super().train_epoch()
            return
        steps = len(full) - done_in_epoch if 0 < done_in_epoch <= len(full) else len(full)
        self.train_loader = _FirstSteps(full, steps, restore)
        try:
            with phase(self, DATA):
                super().train_epoch()
        finally:
            self.train_loader = full

    def save_best_model(self) -> None:  # type: ignore[override]
        """At an epoch's end: the weights only, when the eval loss (else the train loss) is the lowest so far;
        or as `choose_best` decides (utils.training.evaluation.best_checkpoint: measured quality, early stopping)."""
        if self.args.rank not in (None, 0):
            return
        if self.choose_best is not None:
            self.choose_best(self)
            return
        loss = {
            "train_loss": self._pick_target_avg_loss(self.keep_avg_train) or float("inf"),
            "eval_loss": self._pick_target_avg_loss(self.keep_avg_eval),
        }
        key = (
            "eval_loss"
            if loss["eval_loss"] is not None and self.best_loss.get("eval_loss") is not None
            else "train_loss"
        )
        better = loss[key] is not None and loss[key] < self.best_loss[key]
        if better:
            with phase(self, SAVES):
                saved = self.checkpoints.save_best(self, self.total_steps_done, loss)
            if saved is not None:
                self.best_loss = loss

    def eval_precision(self) -> contextlib.AbstractContextManager:
        """coqui's evaluation ran in full precision even when training used autocast; it runs as training does
        (its batch is formatted outside, in full precision, as a training batch is)."""
        device, dtype = self._get_autocast_args(
            mixed_precision=self.config.mixed_precision, precision=self.config.precision
        )
        return torch.autocast(device_type=device, dtype=dtype, enabled=self.config.mixed_precision)

    def _restore_best_loss(self) -> None:
        """On resume, the loss to beat is the best model's (read without loading its tensors)."""
        best = self.output_path / BEST_MODEL_FILE
        if self.continue_run and best.is_file():
            loss = torch.load(str(best), map_location="cpu", weights_only=True, mmap=True).get("model_loss")
            if isinstance(loss, dict):
                self.best_loss = loss

    def _save_after_stop(self) -> None:
        saved = self._save_full()
        with phase(self, SAVES):
            self.checkpoints.flush()
        self.stop_checkpoint = str(saved) if saved else None
        self._wait_for_scoring()

    def _finish_writes(self) -> None:
        """After a failure: let a save in flight (of earlier, finite weights) land; its error is logged only."""
        try:
            self.checkpoints.flush()
        except Exception as exc:  # noqa: BLE001 - the original error is the one to report
            log.warning("A checkpoint being written when the run failed was not saved: %s", exc)
        try:
            self._wait_for_scoring()
        except Exception as exc:  # noqa: BLE001 - the original error is the one to report
            log.warning("An evaluation being scored when the run failed was not recorded: %s", exc)

    def fit(self) -> None:  # type: ignore[override]
        self.phase_times.training_started()
        try:
            self._score_baseline()
            self._fit()
            self.outcome = RunStatus.FINISHED
            self._save_full()  # the finished run can be continued with more epochs
            with phase(self, SAVES):
                self.checkpoints.flush()  # every file on disk before the run is exported
            self._wait_for_scoring()
        except OutOfMemoryStop as stop:
            self.outcome, self.stop_reason = RunStatus.STOPPED, str(stop)
            self._save_after_stop()
        except StopTraining:
            self.outcome = RunStatus.STOPPED
            self._save_after_stop()
        except KeyboardInterrupt:
            self.outcome = RunStatus.INTERRUPTED
            self._save_after_stop()
        except (TrainingDiverged, DiskFull):
            self.outcome = RunStatus.FAILED  # nothing more worth writing, or no room to write it
            self._finish_writes()
            raise
        except Exception:
            self.outcome = RunStatus.FAILED
            self._save_after_failure()  # the steps since the last checkpoint are not lost
            raise
        finally:
            try:
                self.dashboard_logger.finish()
            finally:
                self.close_log_files()

    def _save_after_failure(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # after an out-of-memory error the save needs the cached blocks back
        try:
            self._save_after_stop()
        except Exception as exc:  # noqa: BLE001 - the original error is the one to report
            log.warning("Could not save a checkpoint after the failure: %s", exc)

    def close_log_files(self) -> None:
        trainer_log = logging.getLogger("trainer")
        for handler in self._own_handlers:
            trainer_log.removeHandler(handler)
            handler.close()
        self._own_handlers = []


class _FirstSteps:
    """The first `steps` batches of a data loader, with that length (the trainer reads both). `on_start` runs once
    the loader's iterator is made, before its first batch is loaded (where a resume restores the generators)."""

    def __init__(self, loader: Any, steps: int, on_start: Callable[[], None] | None = None) -> None:
        self.loader = loader
        self.steps = steps
        self.on_start = on_start

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[Any]:
        batches = iter(self.loader)
        if self.on_start is not None:
            self.on_start()
        return itertools.islice(batches, self.steps)


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
