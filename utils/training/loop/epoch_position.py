"""Where a run stands in its epochs, for an exact resume: the first epoch after a resume trains only the batches
the stopped run had not reached, drawing from the random generators as the run had left them.

The epoch's order of batches comes from (seed, epoch) in the batch sampler (utils.training.inputs.batching), so a
resume recomputes it and skips the batches done; the generators' state at a step's end is what a checkpoint saves
(utils.training.checkpointing.random_state).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any

from utils.training.checkpointing import random_state

log = logging.getLogger(__name__)


class EpochPosition:
    """The resume's place in its epoch, and the random state at the last step's end."""

    def __init__(self, resuming: bool, saved_state: dict[str, Any] | None) -> None:
        self.resuming = resuming  # only the first epoch after a resume is a partial one
        self.saved_state = saved_state  # the checkpoint's generators, restored at the first batch after a resume
        self.boundary: dict[str, Any] | None = None  # the random state at the last step's end

    def epoch_loader(self, full: Any, epochs_done: int, total_steps_done: int) -> Any:
        """The loader of this epoch: `full`, or after a resume its batches not yet trained (a `FirstSteps`)."""
        done_in_epoch = total_steps_done - epochs_done * len(full) if self.resuming else 0
        self.resuming = False
        batches = getattr(full, "batch_sampler", None)
        if hasattr(batches, "set_epoch"):  # the epoch's order comes from (seed, epoch): a resume recomputes it
            batches.set_epoch(epochs_done)
            batches.skip_batches = done_in_epoch if 0 < done_in_epoch <= len(full) else 0
        saved, self.saved_state = self.saved_state, None
        restore = None if saved is None else (lambda: random_state.restore(saved))
        where = (saved or {}).get("sampler") or {}
        if where and (where.get("epoch"), where.get("position")) != (epochs_done, done_in_epoch):
            log.warning(
                "The checkpoint was saved at epoch %s, batch %s; resuming at epoch %s, batch %s.",
                where.get("epoch"),
                where.get("position"),
                epochs_done,
                done_in_epoch,
            )
        if not 0 < done_in_epoch <= len(full) and restore is None:
            return full
        steps = len(full) - done_in_epoch if 0 < done_in_epoch <= len(full) else len(full)
        return FirstSteps(full, steps, restore)

    def state_now(self, loader: Any, epochs_done: int, total_steps_done: int) -> dict[str, Any]:
        """The generators and the sampler's place now."""
        full = loader.loader if isinstance(loader, FirstSteps) else loader
        position = total_steps_done - epochs_done * len(full) if full is not None else 0
        return random_state.capture(epochs_done, position)

    def mark_step_end(self, loader: Any, epochs_done: int, total_steps_done: int) -> None:
        self.boundary = self.state_now(loader, epochs_done, total_steps_done)


class FirstSteps:
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
