"""Runs `train_gpt` in a spawned child process, one run at a time, and follows it.

The coqui trainer may end its process on errors and the GPU work must not share the web server's
process, so training lives in a child. The child reports through a queue (its run folder, its
memory every second, its result or error) and through the run's `metrics.jsonl`, which this side
only reads. Stop sets an Event the child checks at each step boundary; the child then saves a
checkpoint and returns normally.
"""

from __future__ import annotations

import collections
import json
import multiprocessing as mp
import os
import queue
import re
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.runs import list_runs, read_run

ACTIVE = ("starting", "running", "stopping")
MEMORY_HISTORY = 900  # samples kept for the memory plot (15 min at one per second)
MEMORY_BACKLOG = 60  # unread memory samples the child queues at most
# The fields of a metrics record the UI uses; the rest (per-step memory) stays in the file.
_FOLLOWED_FIELDS = ("type", "step", "epoch", "total_steps", "loss", "eval_loss", "step_time", "loader_time",
                    "samples_per_sec", "status", "message")  # fmt: skip


def _child_main(kwargs: dict[str, Any], stop_event: Any, messages: Any, log_path: str) -> None:
    """Entry point of the training process."""
    log = open(log_path, "a", buffering=1, encoding="utf-8")
    # Everything the child prints (the trainer's console, warnings, C-level output) goes to the log.
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    done = threading.Event()
    parent = os.getppid()

    def report_memory() -> None:
        from utils.training_optimizations import get_memory_stats

        while not done.wait(1.0):
            if os.getppid() != parent:
                stop_event.set()  # the app is gone: stop at the next step, saving a checkpoint
                return
            try:
                # Nobody polling (no page open): skip samples rather than fill the pipe, which
                # would keep this process from exiting until someone reads it.
                if messages.qsize() < MEMORY_BACKLOG:
                    messages.put({"type": "memory", "time": time.time(), **get_memory_stats()})
            except NotImplementedError:  # qsize() on macOS
                messages.put({"type": "memory", "time": time.time(), **get_memory_stats()})
            except (OSError, ValueError):
                return

    try:
        from utils.gpt_train import train_gpt

        threading.Thread(target=report_memory, daemon=True).start()

        def forward(record: dict[str, Any]) -> None:
            if record.get("type") == "status":
                messages.put({"type": "event", "record": record})

        result = train_gpt(**kwargs, stop_event=stop_event, progress_callback=forward)
        from utils.runs import read_run

        record = read_run(result.run_dir)
        messages.put({"type": "result", "status": result.status,
                      "result": {**result._asdict(), "stop_checkpoint": record.get("stop_checkpoint")}})  # fmt: skip
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the UI
        messages.put({"type": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        traceback.print_exc()
    finally:
        done.set()
        log.flush()


@dataclass
class RunState:
    """What the UI shows about the current (or last) run; changed only under the runner's lock."""

    status: str = "idle"  # idle | starting | running | stopping | finished | stopped | interrupted | failed
    message: str = "No training run yet."
    run_dir: str = ""
    log_path: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    ended_at: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    traceback: str = ""
    memory: dict[str, Any] = field(default_factory=dict)
    memory_history: collections.deque = field(default_factory=lambda: collections.deque(maxlen=MEMORY_HISTORY))


class MetricsFollower:
    """Reads a growing metrics.jsonl incrementally (only new complete lines each time)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.offset = 0
        self.records: list[dict[str, Any]] = []

    def follow(self, path: Path) -> list[dict[str, Any]]:
        if path != self.path:
            self.path, self.offset, self.records = path, 0, []
        if not path.is_file():
            return self.records
        with open(path, encoding="utf-8") as handle:
            handle.seek(self.offset)
            while True:
                line = handle.readline()
                if not line.endswith("\n"):
                    break  # a line being written: read it next time
                self.offset = handle.tell()
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.records.append({k: record[k] for k in _FOLLOWED_FIELDS if k in record})
        return self.records


class TrainingRunner:
    """Starts, stops and follows one training child process at a time."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        self.output_dir = Path(output_dir).resolve()
        self.state = RunState()
        # Every open page's timer and the API poll from their own threads; start/stop too.
        self._lock = threading.RLock()
        self._process: mp.process.BaseProcess | None = None
        self._stop_event: Any = None
        self._messages: Any = None
        self._follower = MetricsFollower()
        self._context = mp.get_context("spawn")

    # --- control ------------------------------------------------------------------------------------
    def is_active(self) -> bool:
        self.poll()
        return self.state.status in ACTIVE

    def start(self, kwargs: dict[str, Any]) -> tuple[bool, str]:
        """Launch a run; (False, reason) if one is already running."""
        with self._lock:
            self.poll()
            if self.state.status in ACTIVE:
                return False, f"A training run is already {self.state.status}; stop it or wait for it to end."
            logs = self.output_dir / ".logs"
            logs.mkdir(parents=True, exist_ok=True)
            log_path = logs / f"train-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
            kwargs = {**kwargs, "output_path": str(kwargs.get("output_path") or self.output_dir)}
            self._stop_event = self._context.Event()
            self._messages = self._context.Queue()
            self._process = self._context.Process(
                target=_child_main, args=(kwargs, self._stop_event, self._messages, str(log_path)), daemon=False,
                name="xtts-training",
            )  # fmt: skip
            self.state = RunState(status="starting", message="Starting: checking the dataset and loading the model...",
                                  log_path=str(log_path), arguments=kwargs, started_at=time.time())  # fmt: skip
            self._follower = MetricsFollower()
            self._process.start()
            return True, "Training started."

    def stop(self) -> str:
        with self._lock:
            self.poll()
            if self.state.status not in ACTIVE or self._stop_event is None:
                return "No training run is active."
            self._stop_event.set()
            self.state.status = "stopping"
            self.state.message = "Stopping at the end of the current step; a checkpoint will be saved..."
            return self.state.message

    def shutdown(self, timeout: float = 120.0) -> None:
        """Ask a running child to stop (it saves a checkpoint) and wait for it; used at app exit."""
        if self._process is None or not self._process.is_alive():
            return
        if self._stop_event is not None:
            self._stop_event.set()
        deadline = time.time() + timeout
        while self._process.is_alive() and time.time() < deadline:
            self.poll()  # keep the queue drained: a child with unread messages cannot exit
            self._process.join(0.5)
        if self._process.is_alive():
            self._process.terminate()

    # --- following ----------------------------------------------------------------------------------
    def poll(self) -> RunState:
        """Drain the child's messages and notice if it died. Cheap; call it on every refresh."""
        with self._lock:
            return self._poll()

    def _poll(self) -> RunState:
        state = self.state
        while self._messages is not None:
            try:
                message = self._messages.get_nowait()
            except (queue.Empty, OSError, ValueError):
                break
            kind = message.get("type")
            if kind == "memory":
                state.memory = message
                state.memory_history.append(message)
            elif kind == "event":
                record = message["record"]
                if record.get("status") in ("started", "resumed"):
                    if state.status == "starting":
                        state.status = "running"
                    state.message = "Training..." if state.status == "running" else state.message
                elif record.get("message"):
                    state.message = record["message"]
            elif kind == "result":
                state.result = message["result"]
                state.run_dir = state.result.get("run_dir", state.run_dir)
                state.status = message["status"]
                state.ended_at = time.time()
                where = state.result.get("stop_checkpoint") or ""
                state.message = {
                    "finished": "Training finished. The voice is ready in the Test and Export tabs.",
                    "stopped": f"Stopped. Checkpoint saved: `{where}`. Resume it from Advanced > Resume run.",
                    "interrupted": f"Interrupted. Checkpoint saved: `{where}`. Resume it from Advanced > Resume run.",
                }.get(state.status, state.status)
            elif kind == "error":
                state.status, state.error, state.traceback = "failed", message["error"], message["traceback"]
                state.ended_at = time.time()
                state.message = f"Training failed: {message['error']}"
        if not state.run_dir and state.status in ACTIVE:
            state.run_dir = self._find_run_dir()
        if state.status in ACTIVE and self._process is not None and not self._process.is_alive():
            time.sleep(0.2)  # let the last queued messages arrive
            if self._messages is not None and not self._drained():
                return self._poll()
            if state.status in ACTIVE:
                state.status = "failed"
                state.ended_at = time.time()
                state.error = f"The training process ended unexpectedly (exit code {self._process.exitcode})."
                state.message = state.error + " See the log below."
        return state

    def _drained(self) -> bool:
        try:
            return self._messages.empty()
        except (OSError, ValueError):
            return True

    def _find_run_dir(self) -> str:
        """The run folder this child created: the one whose run.json names the child's pid."""
        if self._process is None:
            return ""
        resume = self.state.arguments.get("resume_from")
        if resume:
            folder = Path(resume)
            candidates = [folder if folder.is_dir() else folder.parent]
        else:
            candidates = list_runs(self.state.arguments.get("output_path", self.output_dir))
        for run_dir in candidates:
            if read_run(run_dir).get("pid") == self._process.pid:
                return str(run_dir)
        return ""

    def metrics(self) -> list[dict[str, Any]]:
        with self._lock:
            if not self.state.run_dir:
                return []
            return list(self._follower.follow(Path(self.state.run_dir) / "metrics.jsonl"))

    def log_tail(self, lines: int = 40) -> str:
        path = Path(self.state.log_path) if self.state.log_path else None
        if path is None or not path.is_file():
            return ""
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
        # The trainer colours its console output; the UI shows plain text.
        text = re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r", "\n")
        return "\n".join(text.splitlines()[-lines:])
