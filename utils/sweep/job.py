"""A sweep running in the background of a long-lived process (the web app): started, followed and stopped from
another thread, one at a time."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any

from utils.sweep.sweep import SweepProgress, SweepResult


class SweepJob:
    def __init__(self) -> None:
        self.state = SweepProgress(done=True, message="No sweep yet.")
        self.result: SweepResult | None = None
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, run: Callable[..., SweepResult], **kwargs: Any) -> None:
        """Run `run(**kwargs, state=..., stop_event=...)` (sweep_gpt) on a thread; RuntimeError while one runs."""
        if self.active:
            raise RuntimeError("A sweep is already running: stop it or wait for it to end.")
        self._stop = threading.Event()
        self.state, self.result, self.error = SweepProgress(message="Starting: checking the dataset..."), None, ""

        def work() -> None:
            try:
                self.result = run(**kwargs, state=self.state, stop_event=self._stop)
            except Exception as exc:  # noqa: BLE001 - shown on the page; the app goes on
                self.error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
                self.state.message = f"The sweep failed: {self.error}"
                traceback.print_exc()
            finally:
                self.state.done = True

        self._thread = threading.Thread(target=work, name="sweep", daemon=True)
        self._thread.start()

    def stop(self) -> str:
        if not self.active:
            return "No sweep is running."
        self._stop.set()
        return "Stopping: the running trial saves a checkpoint and stays in the study (Start sweep resumes it)."

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
