"""Runs `train_gpt` in a spawned child process, one run at a time, and follows it.

The GPU work must not share the web server's process, so training lives in a child that runs the
notebook's own `train_gpt`. The child reports through a queue (status records, which name its run
folder, its memory every second, its result or error); the run's `run.json` is the truth about its
status and `metrics.jsonl` holds its steps, which this side only reads. Stop sets an Event the child
checks at each step boundary; the child then saves a checkpoint and returns normally.
"""

from __future__ import annotations

import collections
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

from utils.files import JsonlFollower
from utils.training.records import MemoryRecord, page_fields
from utils.training.run_record import METRICS_FILE, RUN_FILE, RunStatus, read_run, update_run

MEMORY_HISTORY = 900  # samples kept for the memory plot (15 min at one per second)
MEMORY_BACKLOG = 60  # unread memory samples the child queues at most
# The fields of a metrics record the UI uses (declared in utils.training.records); the rest (per-step memory)
# stays in the file.
_FOLLOWED_FIELDS = page_fields()


def _report_memory(messages: Any, stop_event: Any, done: threading.Event, ranks: list[dict[str, Any]]) -> None:
    """Every second: the child's memory to the parent, with each rank's (GPU) memory at its last step in a
    multi-GPU run; a parent that is gone stops the run (with a checkpoint)."""
    from utils.device.memory import get_memory_stats

    parent = os.getppid()
    while not done.wait(1.0):
        if os.getppid() != parent:
            stop_event.set()
            return
        sample = MemoryRecord(time=time.time(), ranks=list(ranks) or None, **get_memory_stats()).to_json()
        try:
            # Nobody polling (no page open): skip samples rather than fill the pipe, which
            # would keep this process from exiting until someone reads it.
            if messages.qsize() < MEMORY_BACKLOG:
                messages.put(sample)
        except NotImplementedError:  # qsize() on macOS
            messages.put(sample)
        except (OSError, ValueError):
            return


def _child_main(kwargs: dict[str, Any], stop_event: Any, messages: Any, log_path: str) -> None:
    """Entry point of the training process."""
    log = open(log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - the child's stdout for its life
    # Everything the child prints (the trainer's console, warnings, C-level output) goes to the log.
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    done = threading.Event()
    try:
        from utils.gpt_train import train_gpt

        ranks: list[dict[str, Any]] = []  # a multi-GPU run: each rank's memory at its last step
        threading.Thread(target=_report_memory, args=(messages, stop_event, done, ranks), daemon=True).start()

        def forward(record: dict[str, Any]) -> None:
            if record.get("ranks"):
                ranks[:] = record["ranks"]
            if record.get("type") == "status":
                messages.put({"type": "event", "record": record})

        result = train_gpt(**kwargs, stop_event=stop_event, progress_callback=forward)
        record = read_run(result.run_dir)
        messages.put(
            {
                "type": "result",
                "status": result.status,
                "result": {
                    **result._asdict(),
                    "stop_checkpoint": record.get("stop_checkpoint"),
                    "early_stop": record.get("early_stop"),
                },
            }
        )
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the UI
        messages.put({"type": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        traceback.print_exc()
    finally:
        done.set()
        log.flush()


@dataclass
class RunState:
    """What the UI shows about the current (or last) run; changed only under the runner's lock."""

    status: RunStatus = RunStatus.IDLE
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

    @property
    def active(self) -> bool:
        return self.status.active


def ended_message(status: RunStatus, checkpoint: str = "") -> str:
    return {
        RunStatus.FINISHED: "Training finished. The voice is ready in the Test and Export tabs.",
        RunStatus.STOPPED: f"Stopped. Checkpoint saved: `{checkpoint}`. Resume it from Advanced > Resume run.",
        RunStatus.INTERRUPTED: f"Interrupted. Checkpoint saved: `{checkpoint}`. Resume it from Advanced > Resume run.",
    }.get(status, status.value.capitalize())


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
        self._follower = JsonlFollower(keep=lambda r: {k: r[k] for k in _FOLLOWED_FIELDS if k in r})
        self._context = mp.get_context("spawn")

    # --- control ------------------------------------------------------------------------------------
    def is_active(self) -> bool:
        return self.poll().active

    def start(self, kwargs: dict[str, Any]) -> tuple[bool, str]:
        """Launch a run; (False, reason) if one is already running."""
        with self._lock:
            if self.poll().active:
                return False, f"A training run is already {self.state.status.value}; stop it or wait for it to end."
            logs = self.output_dir / ".logs"
            logs.mkdir(parents=True, exist_ok=True)
            log_path = logs / f"train-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.log"
            kwargs = {**kwargs, "output_path": str(kwargs.get("output_path") or self.output_dir)}
            self._stop_event = self._context.Event()
            self._messages = self._context.Queue()
            self._process = self._context.Process(
                target=_child_main,
                args=(kwargs, self._stop_event, self._messages, str(log_path)),
                daemon=False,
                name="xtts-training",
            )
            self.state = RunState(
                status=RunStatus.STARTING,
                log_path=str(log_path),
                arguments=kwargs,
                message="Starting: checking the dataset and loading the model...",
                run_dir=str(kwargs["resume_from"]) if kwargs.get("resume_from") else "",
                started_at=time.time(),
            )
            self._follower = JsonlFollower(keep=self._follower.keep)
            self._process.start()
            return True, "Training started."

    def stop(self) -> str:
        with self._lock:
            if not self.poll().active or self._stop_event is None:
                return "No training run is active."
            self._stop_event.set()
            self.state.status = RunStatus.STOPPING
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
            self._drain()
            if self.state.active and self._process is not None and not self._process.is_alive():
                self._after_exit()
            return self.state

    def _drain(self) -> None:
        while self._messages is not None:
            try:
                message = self._messages.get_nowait()
            except (queue.Empty, OSError, ValueError):
                return
            self._apply(message)

    def _apply(self, message: dict[str, Any]) -> None:
        state, kind = self.state, message.get("type")
        if kind == "memory":
            state.memory = message
            state.memory_history.append(message)
        elif kind == "event":
            record = message["record"]
            state.run_dir = record.get("run_dir") or state.run_dir  # the child says where it writes
            status = RunStatus.parse(record.get("status"))
            if status == RunStatus.RUNNING and state.status == RunStatus.STARTING:
                state.status, state.message = RunStatus.RUNNING, "Training..."
            elif record.get("message") and not status.ended:
                state.message = record["message"]
        elif kind == "result":
            state.result = message["result"]
            state.run_dir = state.result.get("run_dir", state.run_dir)
            state.status = RunStatus.parse(message["status"])
            state.ended_at = time.time()
            early = state.result.get("early_stop") or {}  # the run stopped itself: say why, not "Stopped."
            stopped_at = state.result.get("stop_checkpoint") or ""
            state.message = early.get("message") or ended_message(state.status, stopped_at)
        elif kind == "error":
            state.status, state.error, state.traceback = RunStatus.FAILED, message["error"], message["traceback"]
            state.ended_at = time.time()
            state.message = f"Training failed: {message['error']}"

    def _after_exit(self) -> None:
        """The child is gone while the run looked active: take its last words, else record that it died."""
        time.sleep(0.2)  # let the last queued messages arrive
        self._drain()
        if not self.state.active:
            return
        state = self.state
        state.status, state.ended_at = RunStatus.FAILED, time.time()
        state.error = f"The training process ended unexpectedly (exit code {self._process.exitcode})."
        state.message = state.error + " See the log below."
        if state.run_dir and (Path(state.run_dir) / RUN_FILE).is_file():
            record = read_run(state.run_dir)  # marks a run whose process is gone as failed, on disk too
            if RunStatus.parse(record.get("status")).active:
                update_run(state.run_dir, status=RunStatus.FAILED, error=state.error)

    def metrics(self) -> list[dict[str, Any]]:
        with self._lock:
            if not self.state.run_dir:
                return []
            return list(self._follower.follow(Path(self.state.run_dir) / METRICS_FILE))

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
