"""Checkpoint writes off the training loop's critical path: a background thread writes a CPU copy.

Serialising a checkpoint (weights, AdamW's two moments) takes seconds and grows with the model (7 s at 12
layers on a CPU, GBs at full size); the loop only has to wait for a copy of the tensors. `BackgroundWriter`:
- takes a CPU copy of the state at once (`cpu_copy`: the next optimizer step changes the weights in place),
  and hands the write to one thread: at most one save is in flight, a second waits for the first;
- runs the follow-up of a finished write (pruning older checkpoints, recording the save in run.json) in the
  training thread, at the next `poll` (a step boundary) or `wait`, so those never race the loop's own writes;
- re-raises a failed write (a full disk: `DiskFull`) in the training thread at that same point.
The write itself stays atomic (a temporary file renamed over the target), so a kill -9 mid-write leaves
the previous checkpoint intact, as a blocking write did. Memory: one CPU copy of what is being saved.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def cpu_copy(state: Any) -> Any:
    """The state with every tensor copied to the CPU (new storage, even for CPU tensors), containers rebuilt."""
    if torch.is_tensor(state):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, dict):
        return {key: cpu_copy(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(cpu_copy(value) for value in state)
    return state


class BackgroundWriter:
    """One write at a time on a background thread; follow-ups and errors come back to the caller's thread."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._result: Path | None = None
        self._error: BaseException | None = None
        self._on_done: Callable[[Path], None] | None = None
        self.pending: Path | None = None  # the file being written

    def submit(
        self, write: Callable[[], Path], on_done: Callable[[Path], None] | None = None, target: Path | None = None
    ) -> None:
        """Run `write` (which writes a state already copied) in the background; `on_done(path)` follows it in
        this thread. Waits for the save before it first (so at most one is in flight)."""
        self.wait()
        self.pending = target

        def run() -> None:
            try:
                self._result = write()
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread
                self._error = exc

        self._result, self._error, self._on_done = None, None, on_done
        # Not a daemon: an interpreter that exits with a write in flight finishes it first.
        self._thread = threading.Thread(target=run, name="checkpoint-writer", daemon=False)
        self._thread.start()

    @property
    def in_flight(self) -> bool:
        return self._thread is not None

    def poll(self) -> None:
        """At a step boundary: the follow-up of a finished write, or its error; nothing while it runs."""
        if self._thread is not None and not self._thread.is_alive():
            self._finish()

    def wait(self) -> None:
        """Block until the write in flight (if any) is done; then as `poll`."""
        if self._thread is not None:
            self._thread.join()
            self._finish()

    def _finish(self) -> None:
        self._thread = None
        self.pending = None
        error, self._error = self._error, None
        if error is not None:
            raise error
        if self._on_done is not None and self._result is not None:
            self._on_done(self._result)
