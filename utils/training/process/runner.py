"""Starts the training worker (`python -m utils.training.process.worker RUN_DIR`) as a subprocess, one run at a time,
and follows its run folder.

The GPU work must not share the web server's process. The runner creates the run folder, writes the run's spec
there (utils.training.recording.spec: the arguments as the form gave them; the worker settles and rewrites them before
any model is built) and starts the worker, its output going to the run's log. Everything else is read from the
folder: run.json is the truth about the status, metrics.jsonl holds the steps (and the status records whose
messages the page shows), memory.jsonl the worker's memory each second, result.json how the worker ended. Stop
writes the folder's stop file, which the worker checks at each step boundary; it then saves a checkpoint and
ends as stopped. Because the folder is the protocol, a runner created anew (the web server restarted, or the page
rebuilt) re-attaches to a worker still training (worker.json names its process). A worker whose web server is
gone stops at the next step boundary with a checkpoint (utils.training.process.worker.FOLLOWER_ENV), as the child
always did: nobody could watch or stop it otherwise; the restarted app shows it stopped and resumes it.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.files import JsonlFollower, read_json, write_json_atomic
from utils.options.arguments import TrainArguments
from utils.text.languages import canonical_language
from utils.training.process.worker import FOLLOWER_ENV
from utils.training.recording.records import page_fields
from utils.training.recording.run_record import (
    METRICS_FILE,
    RUN_FILE,
    RunStatus,
    create_run_dir,
    process_alive,
    process_identity,
    read_run,
    update_run,
)
from utils.training.recording.spec import (
    MEMORY_FILE,
    RESULT_FILE,
    SPEC_FILE,
    STOP_FILE,
    WORKER_FILE,
    RunSpec,
    check_control_files,
    clear_stop,
    refuse_active_run,
    request_stop,
)

MEMORY_HISTORY = 900  # samples kept for the memory plot (15 min at one per second)
_REPO_ROOT = Path(__file__).resolve().parents[3]
# The fields of a metrics record the UI uses (declared in utils.training.recording.records); the rest (per-step memory)
# stays in the file.
_FOLLOWED_FIELDS = page_fields()


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
    """Starts, stops and follows one training worker at a time, through its run folder. About 250 lines: control,
    re-attaching after a restart and following the folder share one lock and one state."""

    def __init__(self, output_dir: str | os.PathLike, *, reattach: bool = True) -> None:
        """`reattach`: follow a worker of the output folder that still trains (the web app after a restart); a
        sweep's runners follow only the trials they start or adopt."""
        self.output_dir = Path(output_dir).resolve()
        self.state = RunState()
        # Every open page's timer and the API poll from their own threads; start/stop too.
        self._lock = threading.RLock()
        self._process: subprocess.Popen | None = None  # a worker this runner started (reaped by poll)
        self._worker: dict[str, Any] | None = None  # the followed worker's identity (worker.json)
        self._created_dir = False  # this runner created the folder: removed if the run never began
        self._follower = JsonlFollower(keep=lambda r: {k: r[k] for k in _FOLLOWED_FIELDS if k in r})
        self._events = JsonlFollower()  # the status records of this session, for the page's messages
        self._memory = JsonlFollower()
        if reattach:
            self.reattach()

    # --- control ------------------------------------------------------------------------------------
    def is_active(self) -> bool:
        return self.poll().active

    def start(self, kwargs: dict[str, Any]) -> tuple[bool, str]:
        """Launch a run; (False, reason) if one is already running or its folder cannot take a new one."""
        with self._lock:
            if self.poll().active:
                return False, f"A training run is already {self.state.status.value}; stop it or wait for it to end."
            logs = self.output_dir / ".logs"
            logs.mkdir(parents=True, exist_ok=True)
            log_path = logs / f"train-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.log"
            kwargs = {**kwargs, "output_path": str(kwargs.get("output_path") or self.output_dir)}
            try:
                run_dir, created = self._prepare_folder(kwargs)
            except ValueError as exc:
                return False, str(exc)
            with open(log_path, "ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "utils.training.process.worker", str(run_dir)],
                    env=_worker_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C meant for the server reaches the worker as a stop (atexit)
                )
            worker = {**process_identity(process.pid), "log_path": str(log_path), "started": time.time()}
            write_json_atomic(run_dir / WORKER_FILE, worker)
            self._process, self._worker, self._created_dir = process, worker, created
            self.state = RunState(
                status=RunStatus.STARTING,
                log_path=str(log_path),
                arguments=kwargs,
                message="Starting: checking the dataset and loading the model...",
                run_dir=str(run_dir),
                started_at=worker["started"],
            )
            self._follow_folder(run_dir, skip_history=True)
            return True, "Training started."

    def _prepare_folder(self, kwargs: dict[str, Any]) -> tuple[Path, bool]:
        """The run folder with the spec as given (a resume's own folder, else a new one) and whether it is new.
        Arguments the worker will refuse still get a folder: the worker says why, in the log and result.json,
        and the folder is removed then."""
        options = {k: v for k, v in kwargs.items() if k != "audio_roots"}
        roots = kwargs.get("audio_roots")
        try:
            args: TrainArguments | None = TrainArguments(**options)
        except (ValueError, TypeError):
            args = None
        if args is not None and args.resume_from:
            resumed = Path(args.resume_from).expanduser()
            run_dir = (resumed.parent if resumed.is_file() else resumed).resolve()
            if not (run_dir / RUN_FILE).is_file():
                raise ValueError(f"resume_from: {run_dir} is not a run folder (it has no {RUN_FILE}).")
            refuse_active_run(run_dir)
            check_control_files(run_dir)  # before its stale files are cleared
            created = False
        else:
            name = "refused"
            if args is not None:
                name = args.run_name or f"{canonical_language(args.language)}-{args.version}"
            run_dir, created = create_run_dir(self.output_dir, name).resolve(), True
        for stale in (RESULT_FILE, MEMORY_FILE, WORKER_FILE):  # an earlier session's, in a resumed folder
            (run_dir / stale).unlink(missing_ok=True)
        clear_stop(run_dir)
        arguments = args.to_dict() if args is not None else options
        RunSpec(arguments=arguments, run_dir=str(run_dir), audio_roots=_roots(roots)).write()
        return run_dir, created

    def stop(self) -> str:
        with self._lock:
            if not self.poll().active or not self.state.run_dir:
                return "No training run is active."
            request_stop(self.state.run_dir)
            self.state.status = RunStatus.STOPPING
            self.state.message = "Stopping at the end of the current step; a checkpoint will be saved..."
            return self.state.message

    def shutdown(self, timeout: float = 120.0) -> None:
        """At app exit: ask a running worker to stop (it saves a checkpoint) and wait for it."""
        if not self._worker_running():
            return
        if self.state.run_dir:
            request_stop(self.state.run_dir)
        deadline = time.time() + timeout
        while self._worker_running() and time.time() < deadline:
            time.sleep(0.5)
        if self._worker_running() and self._process is not None:
            self._process.terminate()

    def reattach(self) -> bool:
        """Follow the newest run in the output folder whose worker still trains (after the web server restarted)."""
        with self._lock:
            if self.state.active:
                return False
            folders = [p.parent for p in self.output_dir.glob(f"*/{WORKER_FILE}")] if self.output_dir.is_dir() else []
            for run_dir in sorted(folders, key=lambda p: p.stat().st_mtime, reverse=True):
                worker = read_json(run_dir / WORKER_FILE)
                if not isinstance(worker, dict) or process_alive(worker) is not True:
                    continue
                if (run_dir / RESULT_FILE).exists():
                    continue
                status = RunStatus.parse(read_run(run_dir).get("status")) if (run_dir / RUN_FILE).is_file() else None
                spec = read_json(run_dir / SPEC_FILE, {}) or {}
                self._process, self._worker, self._created_dir = None, worker, False
                self.state = RunState(
                    status=status if status is not None and status.active else RunStatus.STARTING,
                    log_path=str(worker.get("log_path") or ""),
                    arguments=dict(spec.get("arguments") or {}),
                    message="Training... (followed again after the web app restarted)",
                    run_dir=str(run_dir),
                    started_at=float(worker.get("started") or time.time()),
                )
                if (run_dir / STOP_FILE).exists():
                    self.state.status = RunStatus.STOPPING
                self._follow_folder(run_dir, skip_history=False)
                return True
            return False

    # --- following ----------------------------------------------------------------------------------
    def poll(self) -> RunState:
        """Read what the worker wrote since the last call, and notice when it ended. Cheap; call it on every refresh."""
        with self._lock:
            if self.state.active:
                running = self._worker_running()
                self._read_folder()
                if not running:
                    self._after_exit()
            return self.state

    def snapshot(self) -> RunState:
        """A copy of the state just polled, for a page to read while other pages poll: what it shows (status,
        buttons, plots) then tells of one moment."""
        with self._lock:
            state = self.poll()
            return dataclasses.replace(
                state,
                arguments=dict(state.arguments),
                result=dict(state.result),
                memory=dict(state.memory),
                memory_history=collections.deque(state.memory_history, maxlen=MEMORY_HISTORY),
            )

    def _worker_running(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self._worker is not None and process_alive(self._worker) is True

    def _follow_folder(self, run_dir: Path, *, skip_history: bool) -> None:
        self._follower = JsonlFollower(keep=self._follower.keep)
        self._events = JsonlFollower(run_dir / METRICS_FILE)
        self._memory = JsonlFollower(run_dir / MEMORY_FILE)
        self._events.skip_existing()  # earlier sessions' status records (a resume) are history, not news
        if skip_history:
            self._memory.skip_existing()

    def _read_folder(self) -> None:
        state = self.state
        for sample in self._memory.follow():
            state.memory = sample
            state.memory_history.append(sample)
        self._memory.records.clear()  # the follower keeps its offset; the history is the deque
        for record in self._events.follow():
            # A resume's rewrite of metrics.jsonl makes the follower read it again: this session's records only.
            if record.get("type") == "status" and float(record.get("time") or 0) >= state.started_at - 1:
                self._apply({"type": "event", "record": record})
        self._events.records.clear()

    def _apply(self, message: dict[str, Any]) -> None:
        state, kind = self.state, message.get("type")
        if kind == "memory":
            state.memory = message
            state.memory_history.append(message)
        elif kind == "event":
            record = message["record"]
            state.run_dir = record.get("run_dir") or state.run_dir
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
            # The run stopped itself (early stopping, out of memory at one clip): say why, not "Stopped."
            why = (state.result.get("early_stop") or {}).get("message") or state.result.get("stop_reason")
            state.message = why or ended_message(state.status, state.result.get("stop_checkpoint") or "")
        elif kind == "error":
            state.status, state.error, state.traceback = RunStatus.FAILED, message["error"], message["traceback"]
            state.ended_at = time.time()
            state.message = f"Training failed: {message['error']}"

    def _after_exit(self) -> None:
        """The worker is gone while the run looked active: its result.json says how it ended, else it died."""
        state = self.state
        run_dir = Path(state.run_dir) if state.run_dir else None
        outcome = read_json(run_dir / RESULT_FILE) if run_dir is not None else None
        if isinstance(outcome, dict) and outcome.get("type") in ("result", "error"):
            self._apply(outcome)
        else:
            code = self._process.returncode if self._process is not None else None
            state.status, state.ended_at = RunStatus.FAILED, time.time()
            state.error = "The training process ended unexpectedly" + (
                f" (exit code {code})." if code is not None else "."
            )
            state.message = state.error + " See the log below."
            if run_dir is not None and (run_dir / RUN_FILE).is_file():
                record = read_run(run_dir)  # marks a run whose process is gone as failed, on disk too
                if RunStatus.parse(record.get("status")).active:
                    update_run(run_dir, status=RunStatus.FAILED, error=state.error)
        if run_dir is not None and self._created_dir and not (run_dir / RUN_FILE).is_file():
            # Refused before the run began (bad arguments or dataset): no run to list; the log keeps why.
            shutil.rmtree(run_dir, ignore_errors=True)
            state.run_dir = ""
        self._worker = None

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


def _roots(roots: Any) -> tuple[str, ...] | None:
    return tuple(str(Path(r).resolve()) for r in roots) if roots else None


def _worker_env() -> dict[str, str]:
    """The worker runs in the server's folder (relative paths mean the same) and finds this program's modules; it
    stops with a checkpoint once this process is gone."""
    env = dict(os.environ)
    env[FOLLOWER_ENV] = json.dumps(process_identity())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    return env
