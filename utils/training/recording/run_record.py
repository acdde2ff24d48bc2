"""A run folder and its record: `run.json` is the one source of truth for a run's status.

Statuses have one vocabulary (`RunStatus`), used in run.json, in the status records of
metrics.jsonl, in the messages the training process sends the web app, and on the page. Run
folders are created atomically and uniquely (`create_run_dir`), and a reader that finds a run
marked active whose process is gone marks it failed (`read_run`), so the status on disk stays true
after a kill -9 or a power loss. The fields of run.json are declared in `utils.training.recording.records.RunRecord`:
`update_run` refuses a name it does not declare, `read_run` reads the names older runs wrote as today's, and
`load_run` gives the typed record.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import time
from datetime import datetime, timezone
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from utils.files import read_json, write_json_atomic
from utils.training.recording.checkpoint_files import checkpoints
from utils.training.recording.record_schema import Record, to_json_value
from utils.training.recording.records import RunRecord

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
OPTIMIZATIONS_FILE = "optimizations.json"
DATASET_REPORT_FILE = "dataset_report.json"
DROPPED_ROWS_FILE = "dropped_rows.csv"
TRAINER_CONFIG_FILE = "config.json"
_PACKAGES = (
    "torch",
    "torchaudio",
    "torchcodec",
    "transformers",
    "coqui-tts",
    "coqui-tts-trainer",
    "tokenizers",
    "gradio",
    "numpy",
)


class RunStatus(str, Enum):
    """Where a run stands. IDLE and STOPPING exist only in the web app (no run yet; a stop was asked)."""

    IDLE = "idle"
    STARTING = "starting"  # the folder exists; dataset, model and trainer are being prepared
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"
    STOPPED = "stopped"  # a stop was asked: a checkpoint was saved and the run can resume
    INTERRUPTED = "interrupted"  # Ctrl-C: a checkpoint was saved and the run can resume
    FAILED = "failed"  # an error, a NaN loss, a full disk, or a process that died: `error` says which

    @property
    def active(self) -> bool:
        return self in (RunStatus.STARTING, RunStatus.RUNNING, RunStatus.STOPPING)

    @property
    def ended(self) -> bool:
        return self in (RunStatus.FINISHED, RunStatus.STOPPED, RunStatus.INTERRUPTED, RunStatus.FAILED)

    @classmethod
    def parse(cls, value: Any) -> RunStatus:
        try:
            return cls(value)
        except ValueError:
            return cls.FAILED


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def process_identity(pid: int | None = None) -> dict[str, Any]:
    """What identifies a live process later: pid, its start time and the host (a pid alone is reused)."""
    process = psutil.Process(pid)
    return {"pid": process.pid, "pid_started": round(process.create_time(), 2), "host": socket.gethostname()}


def process_alive(record: dict[str, Any]) -> bool | None:
    """Whether the process a record names still runs; None when it cannot be told (another host)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or record.get("host") not in (None, socket.gethostname()):
        return None
    try:
        process = psutil.Process(pid)
        started = record.get("pid_started")
        alive = process.status() != psutil.STATUS_ZOMBIE
        return alive and (started is None or abs(process.create_time() - float(started)) < 1.0)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return None


def read_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The run's record ({} when there is none). A run recorded as active whose process is gone is
    marked failed here, on disk too, so every reader sees the truth."""
    record = read_json(Path(run_dir) / RUN_FILE, {})
    if not isinstance(record, dict):
        return {}
    record = RunRecord.upgrade(record)  # the names older runs wrote, as today's (early_stopping -> early_stop)
    if RunStatus.parse(record.get("status")).active and process_alive(record) is False:
        record.update(newest_checkpoint_on_disk(run_dir, record))
        record.update(status=RunStatus.FAILED.value, finished=now_iso(), error=died_message(record))
        with contextlib.suppress(OSError):
            write_run(run_dir, record)
    return record


def load_run(run_dir: str | os.PathLike) -> RunRecord:
    """The run's record, typed (an empty one when there is none); see `read_run`."""
    return RunRecord.from_json(read_run(run_dir))


def newest_checkpoint_on_disk(run_dir: str | os.PathLike, record: dict[str, Any]) -> dict[str, Any]:
    """The last-checkpoint fields of a run whose process died, when a newer checkpoint is on disk than its
    record says: a background save lands (atomically) before the training thread records it at the next step
    boundary, so a kill in between leaves the file unrecorded; a resume continues from it, so the record says so."""
    found = checkpoints(Path(run_dir))
    if not found or found[-1][0] <= (record.get("last_checkpoint_step") or 0):
        return {}
    steps_done, path = found[-1]
    return {"last_checkpoint": str(path), "last_checkpoint_step": steps_done}


def died_message(record: dict[str, Any]) -> str:
    last = record.get("last_checkpoint")
    keep = f" The last checkpoint is kept: {last}; resume from the run folder." if last else " No checkpoint was saved."
    return (
        f"The training process (pid {record.get('pid')}) ended without recording how: killed, out of memory, "
        f"or the machine stopped.{keep}"
    )


def write_run(run_dir: str | os.PathLike, record: dict[str, Any] | RunRecord) -> None:
    """Replace run.json atomically (the web app reads it while training runs)."""
    write_json_atomic(Path(run_dir) / RUN_FILE, record.to_json() if isinstance(record, Record) else record)


def update_run(run_dir: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Set `fields` of run.json (RunRecord's names; a record or an enum is written as JSON)."""
    RunRecord.check_names(fields)
    record = RunRecord.upgrade(read_json(Path(run_dir) / RUN_FILE, {}))
    record.update({k: to_json_value(v) for k, v in fields.items()})
    write_run(run_dir, record)
    return record


def run_status(run_dir: str | os.PathLike) -> RunStatus:
    return RunStatus.parse(read_run(run_dir).get("status"))


def list_runs(output_dir: str | os.PathLike) -> list[Path]:
    """Run folders (those with a run.json) under `output_dir`, newest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    runs = [p.parent for p in root.glob(f"*/{RUN_FILE}")]
    return sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)


def create_run_dir(output_path: str | os.PathLike, name: str) -> Path:
    """A new, empty run folder `<name>-<date>-<time>` under output_path. mkdir either creates a folder or
    fails, so two runs started at the same moment never share one: the second gets a `-2` suffix."""
    root = Path(output_path)
    root.mkdir(parents=True, exist_ok=True)
    stem = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, 1000):
        folder = root / (stem if n == 1 else f"{stem}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RuntimeError(f"Could not create a new run folder for {name!r} in {root}.")


def changed_arguments(before: dict[str, Any], now: dict[str, Any]) -> dict[str, list[Any]]:
    """{option: [before, now]} for what a resume changed on purpose (resume_from itself excluded)."""
    if not before:
        return {}
    return {k: [before.get(k), v] for k, v in now.items() if k != "resume_from" and before.get(k) != v}


def history_entry(previous: RunRecord) -> dict[str, Any]:
    """What run.json `history` keeps of an earlier session of a resumed run."""
    return {
        "started": previous.started,
        "finished": previous.finished,
        "status": previous.status,
        "steps_done": previous.steps_done,
        "arguments": previous.arguments,
    }
