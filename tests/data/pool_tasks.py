"""Tasks for the worker-pool tests: module-level functions, as a spawned worker process imports them."""

from __future__ import annotations

import os
import signal
import time


def square(x: int) -> tuple[int, int]:
    """x squared and the process that computed it; 13 raises, 17 exits, 19 is killed (SIGKILL) mid-task."""
    if x == 13:
        raise ValueError("thirteen is refused")
    if x == 17:
        os._exit(3)
    if x == 19:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.002 * (x % 5))  # finish out of order
    return x * x, os.getpid()


def scaled(x: int, factor: int) -> int:
    return x * factor


def slow(x: int) -> int:
    time.sleep(0.2)
    return x
