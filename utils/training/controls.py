"""What a run borrows from its caller: a way to be asked to stop, and the process's torch settings (given back)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psutil
import torch

from utils.training.ranks import distributed


class StopFlag:
    """Adapts the ways a caller can ask for a stop: an Event-like object or a callable."""

    def __init__(self, stop: Any) -> None:
        self.stop = stop

    def __call__(self) -> bool:
        if self.stop is None:
            return False
        if hasattr(self.stop, "is_set"):
            return bool(self.stop.is_set())
        return bool(self.stop())


@contextlib.contextmanager
def torch_settings_restored() -> Iterator[None]:
    """A run changes process-wide torch settings (threads; coqui's trainer sets TF32 and cuDNN flags from its
    config); give the caller's process its own back afterwards."""
    saved = (
        torch.get_num_threads(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.enabled,
    )
    # coqui's XTTS dataset module sets torch to one thread when imported; CPU training wants them all.
    # The ranks of a multi-process run share this machine's cores.
    cores = psutil.cpu_count(logical=False) or torch.get_num_threads() * distributed.local_world_size()
    torch.set_num_threads(max(1, cores // distributed.local_world_size()))
    try:
        yield
    finally:
        torch.set_num_threads(saved[0])
        (
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
            torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic,
            torch.backends.cudnn.enabled,
        ) = saved[1:]
