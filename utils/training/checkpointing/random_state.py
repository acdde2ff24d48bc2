"""The random states a run draws from, saved in every full checkpoint and restored on resume: a resumed run draws
what the uninterrupted run would have drawn, so it trains (on a CPU) to the same losses, step for step.

A step draws from Python's `random` (the conditioning slice of each clip), NumPy's global generator, torch's CPU
generator (dropout; the data loader's base seed) and, on a GPU, each CUDA generator. The sampler needs none of
them: its order is a function of (seed, epoch) and its position is the batches of the epoch already trained; both
are recorded beside the generators, so a resume can say where it stands. `capture` is taken at the step boundary
where the checkpoint is; `restore` is applied at the same boundary of the resumed run: after the epoch's data
loader iterator is made (making it draws a seed), before its first batch is loaded.

`EpochPosition` is where a run stands in its epochs for the trainer: the first epoch after a resume trains only the
batches the stopped run had not reached (the batch sampler's order comes from (seed, epoch): a resume recomputes it
and skips the batches done), drawing from the generators as the run had left them.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

KEY = "random_state"
log = logging.getLogger(__name__)


def capture(epoch: int, position: int) -> dict[str, Any]:
    """Every generator's state now, and the sampler's (epoch, batches of the epoch trained), as plain values and
    tensors (a checkpoint is loaded with weights_only=True)."""
    version, internal, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return {  # taken at every step's end: tuples and tensors, no per-number conversion
        "python": (version, internal, gauss),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": list(cuda),
        "sampler": {"epoch": int(epoch), "position": int(position)},
    }


def restore(state: dict[str, Any]) -> None:
    """Set every generator to a `capture`d state (CUDA's where this machine has as many GPUs as the saved one)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    saved = state["numpy"]
    keys = np.asarray(saved["keys"], dtype=np.int64).astype(np.uint32)
    np.random.set_state(("MT19937", keys, saved["pos"], saved["has_gauss"], saved["cached"]))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all(cuda)
    elif cuda:
        log.warning(
            "The checkpoint's CUDA generator states (%d GPUs) do not fit this machine: not restored.", len(cuda)
        )


def saved_state(checkpoint: str | Path | None) -> dict[str, Any] | None:
    """The random state a full checkpoint holds (None: none saved, e.g. by an older version, or a weights file)."""
    if checkpoint is None or not Path(checkpoint).is_file():
        return None
    state = torch.load(str(checkpoint), map_location="cpu", weights_only=True, mmap=True)
    found = state.get(KEY) if isinstance(state, dict) else None
    return found if isinstance(found, dict) else None


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
        partial = 0 < done_in_epoch <= len(full)
        batches = getattr(full, "batch_sampler", None)
        if hasattr(batches, "set_epoch"):  # the epoch's order comes from (seed, epoch): a resume recomputes it
            batches.set_epoch(epochs_done)
            batches.skip_batches = done_in_epoch if partial else 0
        saved, self.saved_state = self.saved_state, None
        on_start = None if saved is None else (lambda: restore(saved))
        where = (saved or {}).get("sampler") or {}
        if where and (where.get("epoch"), where.get("position")) != (epochs_done, done_in_epoch):
            log.warning(
                "The checkpoint was saved at epoch %s, batch %s; resuming at epoch %s, batch %s.",
                where.get("epoch"),
                where.get("position"),
                epochs_done,
                done_in_epoch,
            )
        if not partial and on_start is None:
            return full
        return FirstSteps(full, len(full) - done_in_epoch if partial else len(full), on_start)

    def state_now(self, full: Any, epochs_done: int, total_steps_done: int) -> dict[str, Any]:
        """The generators and the sampler's place now (`full`: the epoch's whole loader, None before the first)."""
        position = total_steps_done - epochs_done * len(full) if full is not None else 0
        return capture(epochs_done, position)

    def mark_step_end(self, full: Any, epochs_done: int, total_steps_done: int) -> None:
        self.boundary = self.state_now(full, epochs_done, total_steps_done)


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
