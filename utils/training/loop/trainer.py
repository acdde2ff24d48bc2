"""The training loop of a run: coqui's `Trainer` built once with everything it works with, and the run's epochs
written out in `FineTuneTrainer` (`fit` -> `_epochs` -> `_train_epoch` -> `_step_end`), read top to bottom.

coqui's pieces do the work inside: its `train_step` (format the batch, forward, backward, optimizer and scheduler
step, the step's losses to the metrics logger), its `eval_epoch` (the eval loss) and its optimizer, scheduler,
scaler and restore. What this class changes, and why:
- `fit` returns instead of ending the process (coqui's calls `os._exit` on Ctrl-C and `sys.exit(1)` on any error
  and deletes a run folder that holds no checkpoint): a checkpoint is saved on Ctrl-C, a stop request or an
  error; errors propagate unchanged; `outcome` says how it ended.
- Its collaborators come in at construction as one `TrainerParts` (utils.training.loop.contract): scoring and the
  best checkpoint, phase timings, out-of-memory records, metrics, stop checks, the ranks of a multi-process run.
- Checkpoints are written by `CheckpointWriter` (atomic, in the background, named by the steps done, never NaN,
  only the newest kept), and leave out the frozen DVAE and HiFi-GAN. A resume continues the step count exactly,
  from the newest checkpoint or the one the caller names, and finishes the interrupted epoch's remaining steps only
  (utils.training.checkpointing.random_state.EpochPosition).
- A new run trains in the folder the caller created (`run_dir`), not in one the trainer names by the minute, so
  two runs started together never share a folder; its config.json is written atomically
  (`CoquiTrainer`, the base class).
- An out-of-memory error in a step (or an eval-loss batch) trains the same batch again in micro-batches of half as
  many clips, and the run goes on at that size (utils.training.loop.micro_steps).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import trainer.trainer as coqui_trainer_module
from trainer import Trainer
from trainer.generic_utils import KeepAverage

from utils.files import write_json_atomic
from utils.training.checkpointing import random_state
from utils.training.checkpointing.checkpoints import (
    DiskFull,
    newest_checkpoint,
    remove_stale_temporaries,
    set_aside_newer,
)
from utils.training.checkpointing.random_state import EpochPosition
from utils.training.loop.contract import TrainerParts
from utils.training.loop.micro_steps import OutOfMemoryRecovery, OutOfMemoryStop
from utils.training.ranks import distributed
from utils.training.recording.checkpoint_files import BEST_MODEL_FILE, checkpoint_path
from utils.training.recording.phase_times import DATA, EVAL_LOSS, SAVES, SCORING_WAIT, TRAIN_STEPS
from utils.training.recording.run_record import RunStatus

log = logging.getLogger(__name__)


class StopTraining(Exception):
    """Raised at a step's end to end the run at a step boundary (the UI's Stop button, early stopping)."""


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


class CoquiTrainer(Trainer):
    """coqui's Trainer with the construction hooks above (`run_dir`: a new run's folder; `restore_from`: the
    checkpoint a resume continues from, else the newest full one)."""

    def __init__(
        self, *args: Any, run_dir: Path | None = None, restore_from: Path | None = None, **kwargs: Any
    ) -> None:
        self._restore_from = restore_from  # read by init_training, which coqui's constructor calls
        handlers_before = set(logging.getLogger("trainer").handlers)
        with _construction_hooks(run_dir):
            super().__init__(*args, **kwargs)
        # The trainer adds a log-file handler per instance and never removes it; remember ours.
        self._own_handlers = [h for h in logging.getLogger("trainer").handlers if h not in handlers_before]

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

    def close_log_files(self) -> None:
        trainer_log = logging.getLogger("trainer")
        for handler in self._own_handlers:
            trainer_log.removeHandler(handler)
            handler.close()
        self._own_handlers = []


class FineTuneTrainer(OutOfMemoryRecovery, CoquiTrainer):
    """coqui's Trainer with the run's epochs written out (see the module docstring). About 260 lines on purpose: the
    loop from `fit` to a step's end, and the saves its endings call, are one read.

    After `fit`, `outcome` is FINISHED, STOPPED (stop requested) or INTERRUPTED (Ctrl-C); a diverged loss raises
    TrainingDiverged. `stop_checkpoint` is the checkpoint saved on stop or interrupt, `stop_reason` why the run
    stopped itself (out of memory at one clip per micro-batch).
    """

    def __init__(self, *args: Any, parts: TrainerParts, **kwargs: Any) -> None:
        """coqui's arguments (TrainerArgs, config, model, samples; `run_dir`, `restore_from`: CoquiTrainer) and the
        collaborators this loop calls (`parts`)."""
        super().__init__(*args, dashboard_logger=parts.metrics, **kwargs)
        self.parts = parts
        self.checkpoints = parts.checkpoints
        self.phase_times = parts.timings
        self.outcome: RunStatus | None = None
        self.stop_checkpoint: str | None = None
        self.stop_reason: str | None = None
        self.divergence = DivergenceGuard(parts.metrics, parts.nonfinite_limit)
        self.init_recovery(distributed.is_distributed(), parts.out_of_memory)
        # The checkpoint of this many steps on disk holds this trainer's weights (after a resume: the restored one).
        self._saved_step = self.total_steps_done if self.continue_run else 0
        saved_state = None
        if self.continue_run and distributed.is_main_process():  # the run's earlier process has ended
            saved_state = random_state.saved_state(self.args.restore_path)
            remove_stale_temporaries(Path(self.output_path))
            if self._restore_from is not None:
                set_aside_newer(Path(self.output_path), self.total_steps_done)
        self.position = EpochPosition(self.continue_run, saved_state)
        if self.use_cuda:  # coqui moved the whole model to the GPU; no training step uses the HiFi-GAN decoder
            self.model.xtts.hifigan_decoder.to("cpu")
        parts.metrics.log_for(self)

    # --- the run ---------------------------------------------------------------------------------------
    def fit(self) -> None:  # type: ignore[override]
        """The run from where it stands to its last epoch; every ending saves what it can (see `outcome`)."""
        self._join_ranks()
        self.phase_times.training_started()
        try:
            self._score_baseline()
            self._epochs()
            self.outcome = RunStatus.FINISHED
            self._save_full()  # the finished run can be continued with more epochs
            with self.phase_times.phase(SAVES):
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

    def finish_without_training(self) -> None:
        """Instead of `fit` for a run with only its export left: the restored trainer is the finished run."""
        self._join_ranks()
        self.outcome = RunStatus.FINISHED
        try:
            self.dashboard_logger.finish()
        finally:
            self.close_log_files()

    def _epochs(self) -> None:
        """Each epoch, in this order: its training steps; the eval loss over the eval split; at its end the choice
        of the best checkpoint (a scored evaluation, best_model.pth, early stopping). coqui's `test_run` is not
        called: the run's test sentences are none, its scored evaluation speaks instead."""
        self._restore_best_loss_on_resume()
        for epoch in range(self.epochs_done, self.config.epochs):
            self.callbacks.on_epoch_start(self)  # coqui's: the model's own hooks
            self.epochs_done = epoch
            self.keep_avg_train = KeepAverage()
            self.keep_avg_eval = KeepAverage() if self.config.run_eval else None
            self.c_logger.print_epoch_start(epoch, self.config.epochs, self.output_path)
            self._train_epoch()
            if self.config.run_eval:
                with self.phase_times.phase(EVAL_LOSS), self.eval_pass():
                    self.eval_epoch()
            averages = self.keep_avg_eval if self.keep_avg_eval is not None else self.keep_avg_train
            self.c_logger.print_epoch_end(epoch, averages.avg_values)
            self._epoch_end()
            self.callbacks.on_epoch_end(self)

    def _train_epoch(self) -> None:
        """The epoch's steps: for each batch the step's start (timing, the ranks' gradient exchange), coqui's
        `train_step` (forward, backward, optimizer step, the losses to metrics.jsonl) and the step's end
        (`_step_end`); then the epoch's averages to the metrics logger. The first epoch after a resume trains
        only the steps the stopped run had left."""
        if self.train_loader is None:
            self.train_loader = self.get_train_dataloader(self.train_samples)
        loader = self.position.epoch_loader(self.train_loader, self.epochs_done, self.total_steps_done)
        self.model.train()
        self.callbacks.on_train_epoch_start(self)  # coqui's: the model's own (XTTS: all in eval but the GPT)
        self.parts.metrics.on_train_epoch_start()
        self.c_logger.print_train_start()
        steps, started = len(loader), time.time()
        with self.phase_times.phase(DATA):  # what the steps inside leave: the loader's next batch, logging
            for position, batch in enumerate(loader):
                with self.phase_times.phase(TRAIN_STEPS):
                    self.parts.metrics.on_train_step_start()
                    if self.parts.ranks is not None:
                        self.parts.ranks.on_step_start(position + 1, steps, self.grad_accum_steps)
                    self.train_step(batch, steps, position, started)
                    self._step_end(batch)
                started = time.time()
        self.callbacks.on_train_epoch_end(self)
        self._stepped_optimizers.clear()  # coqui's scheduler steps per optimizer step (scheduler_after_epoch off)
        if self.args.rank in (None, 0):
            self.dashboard_logger.train_epoch_stats(self.total_steps_done, self.keep_avg_train.avg_values)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _step_end(self, batch: dict[str, Any]) -> None:
        """After each step, in this order: the ranks agree on a stop (one all_reduce), the random state at this
        step boundary is kept (what a Ctrl-C's checkpoint saves), the step's metrics record is written, a
        background save's or scoring's result is taken in, a periodic checkpoint is saved, then the run stops
        when asked or when the loss has diverged."""
        ranks = self.parts.ranks
        agreed = False
        if ranks is not None:  # the caller's stop, or rank 0's early stop: every rank stops after this step
            scoring_stop = self.parts.scoring is not None and self.parts.scoring.stop_requested
            agreed = ranks.step_end(self, batch, self.parts.should_stop() or scoring_stop)
        self.position.mark_step_end(self.train_loader, self.epochs_done, self.total_steps_done)
        self.parts.metrics.on_train_step_end(ranks.record_fields() if ranks is not None else None)
        self.checkpoints.poll()  # a background write that finished: its follow-up or its error (DiskFull)
        if self.parts.scoring is not None:
            self.parts.scoring.collect()
        if self.total_steps_done % self.config.save_step == 0:
            self._save_full()
        if agreed if ranks is not None else self.parts.should_stop():
            raise StopTraining
        self.divergence()  # raises TrainingDiverged after a streak of NaN/inf losses

    def _epoch_end(self) -> None:
        """At an epoch's end (rank 0): the scoring's choice of the best checkpoint; without scoring, the weights
        only when the eval loss (else the train loss) is the lowest so far."""
        if self.args.rank not in (None, 0):
            return
        if self.parts.scoring is not None:
            self.parts.scoring(self)
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
        if loss[key] is not None and loss[key] < self.best_loss[key]:
            with self.phase_times.phase(SAVES):
                saved = self.checkpoints.save_best(self, self.total_steps_done, loss)
            if saved is not None:
                self.best_loss = loss

    # --- around the epochs -----------------------------------------------------------------------------
    def _join_ranks(self) -> None:
        if self.parts.ranks is not None:  # a collective: every rank joins before its first step
            self.parts.ranks.join(self.model)

    def _score_baseline(self) -> None:
        """Before the first step: the starting weights scored as the run's baseline."""
        if self.parts.scoring is not None and self.args.rank in (None, 0):
            self.parts.scoring.score_baseline(self)

    def _wait_for_scoring(self) -> None:
        """The scores still being computed in the background are recorded before the run ends (none lost)."""
        if self.parts.scoring is not None:
            with self.phase_times.phase(SCORING_WAIT):
                self.parts.scoring.wait()

    def _restore_best_loss_on_resume(self) -> None:
        """On resume, the loss to beat is the best model's (read without loading its tensors)."""
        best = self.output_path / BEST_MODEL_FILE
        if self.continue_run and best.is_file():
            loss = torch.load(str(best), map_location="cpu", weights_only=True, mmap=True).get("model_loss")
            if isinstance(loss, dict):
                self.best_loss = loss

    # --- saves -----------------------------------------------------------------------------------------
    def random_state(self) -> dict[str, Any]:
        """The generators and the sampler's place at this checkpoint's step boundary (what a checkpoint saves): now,
        for a save at a step's end, a stop or the end of the run; the last step's end for a save after Ctrl-C or an
        error, which may come mid-step, after the next batch drew from the generators."""
        if self.outcome in (RunStatus.INTERRUPTED, RunStatus.FAILED) and self.position.boundary is not None:
            return self.position.boundary
        return self.position.state_now(self.train_loader, self.epochs_done, self.total_steps_done)

    def _save_full(self) -> Path | None:
        if self.args.rank not in (None, 0) or self.total_steps_done == 0:
            return None
        existing = checkpoint_path(self.output_path, self.total_steps_done)
        if self._saved_step == self.total_steps_done:
            self.checkpoints.flush()  # it may still be in flight
            if existing.is_file():
                return existing  # written at this step already (a periodic save, then a stop or the end)
        with self.phase_times.phase(SAVES):
            saved = self.checkpoints.save(self, self.total_steps_done)
        if saved is not None:
            self._saved_step = self.total_steps_done
        return saved

    def _save_after_stop(self) -> None:
        saved = self._save_full()
        with self.phase_times.phase(SAVES):
            self.checkpoints.flush()
        self.stop_checkpoint = str(saved) if saved else None
        self._wait_for_scoring()

    def _save_after_failure(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # after an out-of-memory error the save needs the cached blocks back
        try:
            self._save_after_stop()
        except Exception as exc:  # noqa: BLE001 - the original error is the one to report
            log.warning("Could not save a checkpoint after the failure: %s", exc)

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

    # --- coqui's evaluation ------------------------------------------------------------------------
    def eval_precision(self) -> contextlib.AbstractContextManager:
        """coqui's evaluation ran in full precision even when training used autocast; it runs as training does
        (its batch is formatted outside, in full precision, as a training batch is)."""
        device, dtype = self._get_autocast_args(
            mixed_precision=self.config.mixed_precision, precision=self.config.precision
        )
        return torch.autocast(device_type=device, dtype=dtype, enabled=self.config.mixed_precision)

    # --- the end of this trainer -----------------------------------------------------------------------
    def release(self) -> None:
        """Drop the model and optimizer (the caller frees their memory) and close this trainer's log files."""
        self.close_log_files()
        self.model = None
        self.optimizer = None


class DivergenceGuard:
    """Ends the run once the loss has been NaN or infinite `limit` steps in a row (checked at every step's end).

    A few non-finite steps are normal with FP16 (the GradScaler skips them); a streak means the weights
    are broken, so nothing more is saved and the message says what to change."""

    def __init__(self, metrics: Any, limit: int) -> None:
        self.metrics = metrics
        self.limit = limit

    def __call__(self) -> None:
        if self.metrics.nonfinite_streak >= self.limit:
            raise TrainingDiverged(
                f"The loss was NaN or infinite for {self.metrics.nonfinite_streak} steps in a row: training diverged. "
                "Lower the learning rate, or use precision='bf16' or 'fp32'. Earlier checkpoints are kept."
            )
