"""`metrics.jsonl`: one JSON object per training step and per evaluation, written as the run goes.

`MetricsLogger` is a coqui dashboard logger (the trainer hands it every step's losses and every eval's
averages) plus two step callbacks that time each step. Each record is appended and flushed at once,
so the web UI (another process) can follow the file while training runs. The records are declared in
utils.training.recording.records (TrainRecord, EvalRecord, QualityRecord, StatusRecord); this logger builds them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from trainer.logging.base_dash_logger import BaseDashboardLogger

from utils.device.memory import get_memory_stats, reset_peak_allocated
from utils.files import append_jsonl
from utils.training.recording.records import EvalRecord, LoggedRecord, QualityRecord, StatusRecord, TrainRecord
from utils.training.recording.run_record import RunStatus
from utils.training.recording.tensorboard_log import TensorBoardMirror

EventCallback = Callable[[dict[str, Any]], None]


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value.item() if isinstance(value, torch.Tensor) else value)
    return value if math.isfinite(value) else None


class MetricsLogger(BaseDashboardLogger):
    """Writes metrics.jsonl and forwards each record to `on_event`."""

    def __init__(
        self,
        path: str | Path,
        *,
        batch_size: int,
        steps_per_epoch: int,
        total_steps: int,
        on_event: EventCallback | None = None,
        tensorboard: TensorBoardMirror | None = None,
    ) -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = total_steps
        self.on_event = on_event
        self.tensorboard = tensorboard
        # The trainer it logs for (`log_for`): its epoch and the clips its model failed to load.
        self.trainer: Any = None
        self.last_train: dict[str, Any] | None = None
        self.nonfinite_streak = 0
        self._pending: TrainRecord | None = None
        self._step_started = 0.0
        self._last_step_ended: float | None = None
        self._run_started = time.time()

    # --- step timing callbacks (the trainer calls them around each step) -------------------------
    def log_for(self, trainer: Any) -> None:
        """The trainer this logger records for (it calls this once it is built)."""
        self.trainer = trainer

    def on_train_step_start(self) -> None:
        self._step_started = time.perf_counter()

    def on_train_step_end(self, extra: dict[str, Any] | None = None) -> None:
        """The step's record, written; `extra`: what a multi-process run adds (the loss over the ranks, each rank's
        memory)."""
        ended = time.perf_counter()
        step_time = ended - self._step_started
        loader_time = 0.0 if self._last_step_ended is None else max(0.0, self._step_started - self._last_step_ended)
        self._last_step_ended = ended
        pending, self._pending = self._pending, None
        if pending is None:
            return
        pending = dataclasses.replace(
            pending,
            step_time=round(step_time, 4),
            loader_time=round(loader_time, 4),
            samples_per_sec=round(self.batch_size / step_time, 3) if step_time > 0 else None,
            **(extra or {}),
        )
        self.last_train = self._emit(pending)

    def on_train_epoch_start(self) -> None:
        # Time spent between epochs (eval, checkpoints) is not data loading.
        self._last_step_ended = None

    # --- coqui dashboard logger interface ---------------------------------------------------------
    def train_step_stats(self, step: int, stats: dict[str, Any]) -> None:
        text_ce, mel_ce = _number(stats.get("loss_text_ce")), _number(stats.get("loss_mel_ce"))
        # The trainer logs "loss" divided by the gradient accumulation steps; the sum of the two
        # weighted terms is the loss itself, comparable with the eval loss.
        loss = text_ce + mel_ce if text_ce is not None and mel_ce is not None else _number(stats.get("loss"))
        self.nonfinite_streak = 0 if loss is not None else self.nonfinite_streak + 1
        self._pending = TrainRecord(
            step=step + 1,  # steps done, counting this one
            epoch=self._epoch(),
            total_steps=self.total_steps,
            loss=loss,
            loss_text_ce=text_ce,
            loss_mel_ce=mel_ce,
            lr=_number(stats.get("current_lr")),
            grad_norm=_number(stats.get("grad_norm")),
            amp_scale=_number(stats.get("amp_scaler")),
            clips_failed=self.clips_failed(),
        )

    def eval_stats(self, step: int, stats: dict[str, Any]) -> None:
        self._emit(
            EvalRecord(
                step=step,
                epoch=self._epoch(),
                total_steps=self.total_steps,
                eval_loss=_number(stats.get("avg_loss")),
                eval_loss_text_ce=_number(stats.get("avg_loss_text_ce")),
                eval_loss_mel_ce=_number(stats.get("avg_loss_mel_ce")),
            )
        )

    def status(self, status: str, **fields: Any) -> None:
        """A run-level event: started, resumed, stopped, finished, failed... (StatusRecord's fields)."""
        self._emit(StatusRecord(status=status, **fields))
        if self.tensorboard is not None:
            # A status record is where a reader looks: what is buffered reaches the files now.
            if RunStatus.parse(status).ended:
                self.tensorboard.close()
            else:
                self.tensorboard.flush()

    def quality(self, record: QualityRecord) -> None:
        """Measured quality of one evaluation (utils.training.evaluation.best_checkpoint writes it)."""
        self._emit(record)

    def clips_failed(self) -> int:
        """Clips the data loader could not load so far (the model collects them from every batch)."""
        model = self.trainer.model if self.trainer is not None else None
        return len(model.clip_failures) if model is not None else 0

    def _epoch(self) -> int:
        return (self.trainer.epochs_done if self.trainer is not None else 0) + 1

    def _emit(self, typed: LoggedRecord) -> dict[str, Any]:
        """Stamp the record (time, memory), append it to the file, pass it on; returns it as written."""
        now = time.time()
        typed = dataclasses.replace(
            typed, time=round(now, 3), elapsed_s=round(now - self._run_started, 2), **get_memory_stats()
        )
        # Peaks per record (per step, per eval) show where memory spikes, not just the run's maximum.
        reset_peak_allocated()
        record = typed.to_json()
        append_jsonl(self.path, record)
        if self.tensorboard is not None:
            self.tensorboard(record)
        if self.on_event is not None:
            self.on_event(dict(record))
        return record

    # --- the rest of the abstract interface: nothing else is recorded ------------------------------
    def model_weights(self, model, step):
        pass

    def add_scalar(self, title, value, step):
        pass

    def add_figure(self, title, figure, step):
        pass

    def add_audio(self, title, audio, step, sample_rate):
        pass

    def add_text(self, title, text, step):
        pass

    def add_artifact(self, file_or_dir, name, artifact_type, aliases=None):
        pass

    def flush(self):
        if self.tensorboard is not None:
            self.tensorboard.flush()

    def finish(self):
        self.flush()
