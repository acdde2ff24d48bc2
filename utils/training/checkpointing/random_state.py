"""The random states a run draws from, saved in every full checkpoint and restored on resume: a resumed run draws
what the uninterrupted run would have drawn, so it trains (on a CPU) to the same losses, step for step.

A step draws from Python's `random` (the conditioning slice of each clip), NumPy's global generator, torch's CPU
generator (dropout; the data loader's base seed) and, on a GPU, each CUDA generator. The sampler needs none of
them: its order is a function of (seed, epoch) and its position is the batches of the epoch already trained; both
are recorded beside the generators, so a resume can say where it stands. `capture` is taken at the step boundary
where the checkpoint is; `restore` is applied at the same boundary of the resumed run: after the epoch's data
loader iterator is made (making it draws a seed), before its first batch is loaded.
"""

from __future__ import annotations

import logging
import random
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
