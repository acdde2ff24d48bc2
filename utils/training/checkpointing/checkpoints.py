"""The checkpoints a run writes: atomic, named by the steps done, never non-finite, and only what a resume needs.

- `checkpoint_<steps done>.pth` holds the trained weights (not the frozen DVAE and HiFi-GAN, which come
  from the base model), the optimizer, scheduler and scaler, and the random generators' states
  (utils.training.checkpointing.random_state): everything a resume needs to go on as the run would have. Only the
  newest `keep` of them stay on disk.
- `best_model.pth` holds the weights only (no optimizer state): the best model by the run's `best_by` rule
  (the lowest eval loss by default; utils.training.evaluation.best_checkpoint).
- Every file is written to a temporary file and renamed, so a crash or a full disk leaves the previous
  file, never a truncated one; a full disk ends the run with `DiskFull`, naming the last good checkpoint.
- A model whose weights are no longer finite (NaN/inf) is never saved, and older checkpoints are only
  removed after a newer finite one is safely on disk.
- The write happens in the background (utils.training.checkpointing.async_save): the loop waits only for a CPU copy of
  the state. `poll` (at each step's end) takes a finished write's follow-up or error; `flush` waits for it.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from utils.files import is_disk_full, save_torch_atomic
from utils.training.checkpointing.async_save import BackgroundWriter, cpu_copy
from utils.training.recording.checkpoint_files import BEST_MODEL_FILE, checkpoint_path, checkpoints, write_temporaries

log = logging.getLogger(__name__)


class DiskFull(RuntimeError):
    """The disk filled up while a checkpoint was written; the previous checkpoints are intact."""


def newest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a resume continues from: the newest full one, else the best model."""
    found = checkpoints(run_dir)
    if found:
        return found[-1][1]
    best = Path(run_dir) / BEST_MODEL_FILE
    return best if best.is_file() else None


def set_aside_newer(run_dir: Path, steps_done: int) -> Path | None:
    """Move the checkpoints of more than `steps_done` steps into `superseded-<time>/` in the run folder: a
    resume from an older checkpoint starts a new branch, whose checkpoints must neither be mistaken for
    the old branch's nor pruned in their favour. Nothing is deleted. Returns the folder, or None."""
    newer = [path for step, path in checkpoints(run_dir) if step > steps_done]
    if not newer:
        return None
    folder = run_dir / f"superseded-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    folder.mkdir(exist_ok=True)
    for path in newer:
        os.replace(path, folder / path.name)
    log.warning("Resumed at step %d: the later checkpoints were moved to %s.", steps_done, folder)
    return folder


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporary files of checkpoint writes that a killed process left (kill -9 mid-write: the
    rename never happened, the finished checkpoints are intact). Only for a run no process is writing."""
    stale = write_temporaries(run_dir)
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def non_finite_tensors(state: dict[str, Any]) -> list[str]:
    """Names of floating-point tensors holding NaN or inf."""
    return [
        name
        for name, value in state.items()
        if torch.is_tensor(value) and value.is_floating_point() and not torch.isfinite(value).all()
    ]


def _objects_state(objects: Any) -> Any:
    if objects is None:
        return None
    items = objects if isinstance(objects, list) else [objects]
    return [item.state_dict() for item in items if item is not None]


class CheckpointWriter:
    """Writes a trainer's checkpoints into its run folder by the rules in the module docstring."""

    def __init__(
        self,
        run_dir: Path,
        keep: int,
        on_saved: Callable[[str, Path, int], None] | None = None,
        *,
        background: bool = True,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.keep = max(1, keep)
        self.on_saved = on_saved  # ("last" | "best", path, steps done), e.g. to record it in run.json
        self.skipped_non_finite = 0
        self.background = background
        self.writer = BackgroundWriter()

    def poll(self) -> None:
        """At a step boundary: prune and record a finished background write, or raise its error (DiskFull)."""
        self.writer.poll()

    def flush(self) -> None:
        """Wait for the write in flight; then as `poll`."""
        self.writer.wait()

    def _submit(self, state: dict[str, Any], path: Path, follow_up: Callable[[Path], None]) -> None:
        if not self.background:
            follow_up(self._write(state, path))
            return
        self.writer.wait()  # at most one save in flight, and one copy in memory
        copy = cpu_copy(state)  # the next step changes the weights and moments in place
        self.writer.submit(lambda: self._write(copy, path), follow_up, target=path)

    def _model_state(self, trainer: Any) -> dict[str, Any] | None:
        state = trainer._get_model().state_dict()
        bad = non_finite_tensors(state)
        if bad:
            self.skipped_non_finite += 1
            log.warning("Not saving: %d weight tensors are NaN/inf (e.g. %s).", len(bad), bad[0])
            return None
        return state

    def _write(self, state: dict[str, Any], path: Path) -> Path:
        try:
            return save_torch_atomic(state, path)
        except (OSError, RuntimeError) as exc:
            if not is_disk_full(exc):  # torch reports a full disk as "RuntimeError: ... unexpected pos"
                raise
            newest = newest_checkpoint(self.run_dir)
            kept = f"the last good checkpoint is kept: {newest}" if newest else "no earlier checkpoint exists"
            raise DiskFull(
                f"The disk is full: {path.name} could not be written to {path.parent}. Free some space "
                f"and resume the run; {kept}."
            ) from exc

    def _base_record(self, trainer: Any, steps_done: int) -> dict[str, Any]:
        # coqui's restore adds 1 to "step" (the index of the last completed step).
        return {
            "config": trainer.config.to_dict(),
            "step": steps_done - 1,
            "epoch": trainer.epochs_done,
            "date": datetime.date.today().isoformat(),
        }

    def save(self, trainer: Any, steps_done: int) -> Path | None:
        """A full checkpoint after `steps_done` steps (its path; written in the background); None when the
        weights are not finite."""
        model = self._model_state(trainer)
        if model is None:
            return None
        generators = trainer.random_state()
        state = {
            **self._base_record(trainer, steps_done),
            # The epoch of the step boundary the generators were taken at (after Ctrl-C mid-way: the last step's).
            **({"epoch": generators["sampler"]["epoch"]} if generators else {}),
            "model": model,
            "optimizer": _objects_state(trainer.optimizer),
            "scheduler": _objects_state(trainer.scheduler),
            "scaler": trainer.scaler.state_dict() if trainer.use_amp_scaler else None,
            # The generators at this step boundary: a resume draws what this run draws next (exact resume).
            "random_state": generators,
        }
        path = checkpoint_path(self.run_dir, steps_done)
        self._submit(state, path, lambda written: self._after_save(written, steps_done))
        return path

    def _after_save(self, path: Path, steps_done: int) -> None:
        for _, old in checkpoints(self.run_dir)[: -self.keep]:
            if old != path:
                old.unlink(missing_ok=True)
        if self.on_saved is not None:
            self.on_saved("last", path, steps_done)

    def save_best(
        self,
        trainer: Any,
        steps_done: int,
        loss: dict[str, Any],
        on_done: Callable[[Path], None] | None = None,
    ) -> Path | None:
        """The best model so far, weights only; None when the weights are not finite. `on_done(path)` runs on the
        training thread once the file is on disk (so a record of it never runs ahead of the file)."""
        model = self._model_state(trainer)
        if model is None:
            return None
        state = {**self._base_record(trainer, steps_done), "model": model, "model_loss": loss}
        path = self.run_dir / BEST_MODEL_FILE

        def written(done: Path) -> None:
            if on_done is not None:
                on_done(done)
            if self.on_saved is not None:
                self.on_saved("best", done, steps_done)

        self._submit(state, path, written)
        return path
