"""Confirming a planned batch size on the GPU: one real step, backing off on out-of-memory.

The planner's figure carries a margin, but only the device can say for sure. `confirm_batch_size`
is the hook for that: the caller passes a function that runs one real training step at a given
batch size (and frees its memory afterwards); on CUDA out-of-memory the batch shrinks and the step
is tried again. It needs no GPU itself, so its logic is tested on the CPU.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable

import torch

# Each retry keeps this fraction of the batch that failed (at least one less).
BACK_OFF = 0.8


def _free_cuda_cache() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()  # tensors of the failed step held by reference cycles
        torch.cuda.empty_cache()


def confirm_batch_size(
    planned: int,
    try_step: Callable[[int], object],
    *,
    minimum: int = 1,
    on_retry: Callable[[int, int], object] | None = None,
) -> int:
    """Run `try_step(batch)` from `planned` down until it runs without CUDA OOM; return that batch.

    `on_retry(failed, next)` is told about each back-off (for a log line). Raises ValueError for a
    bad `planned`/`minimum`, and re-raises torch.OutOfMemoryError when even `minimum` does not fit.
    """
    if planned < minimum or minimum < 1:
        raise ValueError(f"planned batch ({planned}) must be at least minimum ({minimum}), which must be >= 1.")
    batch = planned
    while True:
        try:
            try_step(batch)
            return batch
        except torch.OutOfMemoryError:
            _free_cuda_cache()
            if batch <= minimum:
                raise
            smaller = max(minimum, min(batch - 1, math.floor(batch * BACK_OFF)))
            if on_retry is not None:
                on_retry(batch, smaller)
            batch = smaller
