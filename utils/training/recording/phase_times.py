"""Where a run's wall time goes: seconds per phase (startup, training steps, data, eval loss, scored
evaluation, saves, export, reference choice, inference search), recorded in run.json `timings` when the run ends.

Phases nest and are exclusive: a phase entered inside another pauses it (a checkpoint written from a step's
callback counts as a save, not as training), so the phases of the training thread add up to the wall time.
On a GPU each phase also keeps the CUDA allocator's peak while it ran (`peak_gib` allocated, `reserved_gib` held
from the driver; a phase's peak includes the phases inside it, so `data`, around the training steps, holds theirs).
The run writes them into run.json at every evaluation, so a run that dies keeps what it measured.
Work on another thread (the background scoring of an evaluation) is counted apart, as `background`: it
overlaps the phases and is not part of the sum.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from utils.device.memory import watch_peak

# The phases, in the order a run goes through them (names of run.json `timings.phases`).
STARTUP = "startup"  # dataset validation, model build and weight load, trainer init: until the first epoch
TRAIN_STEPS = "train_steps"  # coqui's train_step: forward, backward, optimizer step, step callbacks
DATA = "data"  # the training loop between steps: the data loader's next batch, logging
EVAL_LOSS = "eval_loss"  # coqui's eval pass over the eval split
SCORED_EVAL = "scored_eval"  # speaking the held-out sentences (and scoring them when it is not in the background)
SCORING_WAIT = "scoring_wait"  # waiting for a background scoring's result (at the run's end)
SAVES = "saves"  # checkpoint and best-model writes: the copy taken in the loop, and any wait for a write
EXPORT = "export"  # ready/ (and a LoRA adapter) written after training
REFERENCE_CHOICE = "reference_choice"  # reference clips tried on ready/ (utils.training.evaluation.reference_choice)
INFERENCE_SEARCH = "inference_search"  # sampling settings tried on ready/ (utils.training.evaluation.inference_search)
OTHER = "other"  # the rest of the loop (epoch bookkeeping, the choice of the best model, run records)


class PhaseTimes:
    """Exclusive seconds per phase of the thread that trains, and seconds of background work."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.started = clock()
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.background: dict[str, float] = {}
        self.peaks: dict[str, int] = {}  # CUDA peak allocated bytes per phase (GPU runs)
        self.reserved: dict[str, int] = {}  # CUDA peak reserved bytes per phase (allocated + the allocator's cache)
        self._stack: list[list[Any]] = []  # [name, resumed at] of the phases entered, innermost last
        self._lock = threading.Lock()
        self._owner = threading.get_ident()
        self.ended: float | None = None

    def _add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the time inside as `name` (a phase entered inside pauses this one). On another thread than
        the one that created this object, the time counts as background work."""
        if threading.get_ident() != self._owner:
            begin = self.clock()
            try:
                yield
            finally:
                self.add_background(name, self.clock() - begin)
            return
        now = self.clock()
        if self._stack:
            outer = self._stack[-1]
            self._add(outer[0], now - outer[1])
        self._stack.append([name, now])
        self.counts[name] = self.counts.get(name, 0) + 1
        try:
            with watch_peak() as watch:
                yield
        finally:
            if watch.peak_bytes is not None:
                self.peaks[name] = max(self.peaks.get(name, 0), watch.peak_bytes)
            if watch.reserved_bytes is not None:
                self.reserved[name] = max(self.reserved.get(name, 0), watch.reserved_bytes)
            now = self.clock()
            inner = self._stack.pop()
            self._add(inner[0], now - inner[1])
            if self._stack:
                self._stack[-1][1] = now

    def add(self, name: str, seconds: float) -> None:
        """`seconds` of a phase timed by the caller, outside any other phase."""
        self._add(name, seconds)
        self.counts[name] = self.counts.get(name, 0) + 1

    def training_started(self) -> None:
        """The training loop begins, on the thread that trains (the one whose phases count from now on): the
        time until now that no phase counted was the startup (once)."""
        self._owner = threading.get_ident()
        if STARTUP not in self.seconds and not self._stack:
            self.seconds[STARTUP] = max(0.0, self.clock() - self.started - sum(self.seconds.values()))
            self.counts[STARTUP] = 1

    def add_background(self, name: str, seconds: float) -> None:
        with self._lock:
            self.background[name] = self.background.get(name, 0.0) + seconds

    def end(self) -> None:
        self.ended = self.clock()

    def wall(self) -> float:
        return (self.ended if self.ended is not None else self.clock()) - self.started

    def as_dict(self) -> dict[str, Any]:
        """{"wall_s", "phases": {name: {"seconds", "count", "share"}}, "background": {name: seconds}}; `other` is
        the wall time no phase counted."""
        wall = self.wall()
        phases = {
            name: {
                "seconds": round(s, 3),
                "count": self.counts.get(name, 0),
                "share": round(s / wall, 4) if wall else 0,
                **({"peak_gib": round(self.peaks[name] / 1024**3, 3)} if name in self.peaks else {}),
                **({"reserved_gib": round(self.reserved[name] / 1024**3, 3)} if name in self.reserved else {}),
            }
            for name, s in self.seconds.items()
        }
        rest = max(0.0, wall - sum(self.seconds.values()))
        phases[OTHER] = {
            "seconds": round(rest + self.seconds.get(OTHER, 0.0), 3),
            "count": self.counts.get(OTHER, 0),
            "share": round((rest + self.seconds.get(OTHER, 0.0)) / wall, 4) if wall else 0,
        }
        with self._lock:
            background = {name: round(s, 3) for name, s in self.background.items()}
        return {"wall_s": round(wall, 3), "phases": phases, "background": background}
