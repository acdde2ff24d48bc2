"""The frozen spec of one run: `spec.json` in the run folder, the one thing a training process is given.

The run folder is the protocol between the processes of a run. Whoever starts training (the web app, the
several-device launcher) creates the folder and writes `spec.json` with the arguments as given; the worker
(`python -m utils.training.process.worker RUN_DIR`, also each torchrun rank) reads it back, checked. Before any model
is built the worker settles batch_size="auto" and writes the spec again, resolved (`resolved: true`); from
then on it is what the run trains with. A run called in-process (a notebook's `train_gpt`) writes the
resolved spec when its folder is created, so every run folder holds the spec it ran.

The other files of the protocol, all in the run folder: `stop` (a stop request, checked at each step
boundary), `worker.json` (the worker process and its log, for a follower that re-attaches),
`result.json` (how the worker ended: its result or its error), `memory.jsonl` (the worker's memory, each
second). run.json and metrics.jsonl are the run's own record (utils.training.recording.run_record).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from utils.files import read_json, refuse_link_out, write_json_atomic
from utils.options.arguments import TrainArguments
from utils.training.recording.run_record import RunStatus, process_alive, read_run

SPEC_FILE = "spec.json"
STOP_FILE = "stop"
WORKER_FILE = "worker.json"
RESULT_FILE = "result.json"
MEMORY_FILE = "memory.jsonl"
SPEC_VERSION = 1


@dataclass(frozen=True)
class RunSpec:
    """What a worker needs to run: the arguments (TrainArguments as a dict), the run folder, the web app's
    confinement of the dataset's audio (`audio_roots`) and, for a several-device run, each local rank's device."""

    arguments: dict[str, Any]
    run_dir: str
    audio_roots: tuple[str, ...] | None = None
    devices: tuple[str, ...] = ()  # the physical device of each local rank (torchrun's LOCAL_RANK)
    resolved: bool = False  # batch_size is a number: "auto" was settled before any model was built
    batch_size_auto: str = ""  # how "auto" was settled (run.json records it too)
    probe_batch: bool = False  # the planned "auto" batch is confirmed by one real step once the model is built
    micro_batch_size: int = 0  # clips per forward/backward after out-of-memory errors (0: batch_size; oom.py)
    version: int = field(default=SPEC_VERSION)

    @classmethod
    def create(
        cls, args: TrainArguments, run_dir: str | os.PathLike, audio_roots: Sequence[Any] | None = None, **extra: Any
    ) -> RunSpec:
        roots = tuple(str(Path(r).resolve()) for r in audio_roots) if audio_roots else None
        return cls(arguments=args.to_dict(), run_dir=str(Path(run_dir).resolve()), audio_roots=roots, **extra)

    def train_arguments(self) -> TrainArguments:
        """The arguments, checked again (TrainArguments refuses what a hand-edited spec might hold)."""
        return TrainArguments(**self.arguments)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["audio_roots"] = list(self.audio_roots) if self.audio_roots is not None else None
        data["devices"] = list(self.devices)
        return data

    def with_changes(self, **changes: Any) -> RunSpec:
        return RunSpec(**{**self.to_dict(), **changes, "audio_roots": self.audio_roots, "devices": self.devices})

    def write(self) -> Path:
        """spec.json in the run folder, atomically; never through a link out of the folder."""
        folder = Path(self.run_dir)
        refuse_link_out(folder / SPEC_FILE, folder)
        return write_json_atomic(folder / SPEC_FILE, self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, folder: str | os.PathLike) -> RunSpec:
        """A spec read from `folder`, checked: its fields and their types, and that it names this folder."""
        where = Path(folder) / SPEC_FILE
        if not isinstance(data, dict):
            raise ValueError(f"{where} is missing or not a JSON object: this folder holds no run spec.")
        if data.get("version") != SPEC_VERSION:
            raise ValueError(f"{where} has spec version {data.get('version')!r}; this program reads {SPEC_VERSION}.")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown or not isinstance(data.get("arguments"), dict) or not isinstance(data.get("run_dir"), str):
            raise ValueError(f"{where} is not a run spec (unknown fields {unknown} or no arguments/run_dir).")
        arguments = data["arguments"]
        unknown_args = sorted(set(arguments) - set(TrainArguments.__dataclass_fields__))
        if unknown_args:
            raise ValueError(f"{where}: unknown argument(s) {', '.join(unknown_args)}.")
        if Path(data["run_dir"]).resolve() != Path(folder).resolve():
            raise ValueError(f"{where} names another run folder ({data['run_dir']}): it was copied; not run.")
        roots = data.get("audio_roots")
        if roots is not None and not (isinstance(roots, list) and all(isinstance(r, str) for r in roots)):
            raise ValueError(f"{where}: audio_roots must be a list of folders.")
        devices = data.get("devices") or []
        if not (isinstance(devices, list) and all(isinstance(d, str) for d in devices)):
            raise ValueError(f"{where}: devices must be a list of device names.")
        spec = cls(
            arguments=arguments,
            run_dir=str(Path(folder).resolve()),
            audio_roots=tuple(roots) if roots is not None else None,
            devices=tuple(devices),
            resolved=bool(data.get("resolved", False)),
            batch_size_auto=str(data.get("batch_size_auto") or ""),
            probe_batch=bool(data.get("probe_batch", False)),
            micro_batch_size=int(data.get("micro_batch_size") or 0),
        )
        if spec.resolved and not isinstance(arguments.get("batch_size"), int):
            raise ValueError(f"{where} is marked resolved but its batch_size is {arguments.get('batch_size')!r}.")
        return spec


def read_spec(run_dir: str | os.PathLike) -> RunSpec:
    """The spec in `run_dir`, checked (ValueError naming what is wrong)."""
    folder = Path(run_dir)
    refuse_link_out(folder / SPEC_FILE, folder)
    return RunSpec.from_dict(read_json(folder / SPEC_FILE), folder)


def refuse_active_run(run_dir: str | os.PathLike) -> None:
    """A folder whose run is active (its process alive) gets no new spec: it would change a running run."""
    record = read_run(run_dir)
    if RunStatus.parse(record.get("status")).active and record:
        raise ValueError(f"The run in {run_dir} is {record.get('status')} (pid {record.get('pid')}); stop it first.")


# The files through which a run's processes talk, and what each holds (for a message naming it).
CONTROL_FILES = {
    SPEC_FILE: "arguments",
    STOP_FILE: "stop request",
    WORKER_FILE: "process record",
    RESULT_FILE: "result",
    MEMORY_FILE: "memory record",
}


def check_control_files(run_dir: str | os.PathLike) -> None:
    """Refuse (ValueError, nothing changed) a run folder where a name the processes talk through is taken by a
    folder or another non-file: a `stop` folder would stop every resumed session at its first step, a `result.json`
    folder would fail the run at its very end. Links are refused where the folder is written (refuse_links_in)."""
    folder = Path(run_dir)
    for name, what in CONTROL_FILES.items():
        path = folder / name
        if path.is_symlink() or not path.exists() or path.is_file():
            continue
        kind = "a folder" if path.is_dir() else "something that is not a file"
        raise ValueError(
            f"The run folder {folder.name} holds {kind} named {name!r}, where its training process keeps its {what} "
            "file: move or remove it, then try again. Nothing was changed."
        )


def stop_requested(run_dir: str | os.PathLike) -> bool:
    return (Path(run_dir) / STOP_FILE).exists()


def request_stop(run_dir: str | os.PathLike) -> None:
    """Ask the run's processes to stop at the next step boundary (each saves nothing; rank 0 saves a checkpoint)."""
    path = Path(run_dir) / STOP_FILE
    refuse_link_out(path, path.parent)
    path.touch()


def clear_stop(run_dir: str | os.PathLike) -> None:
    """Before a (resumed) run starts in a folder: an old stop request must not end it at its first step."""
    (Path(run_dir) / STOP_FILE).unlink(missing_ok=True)


def worker_alive(run_dir: str | os.PathLike) -> bool:
    """Whether the worker process worker.json names still runs."""
    record = read_json(Path(run_dir) / WORKER_FILE)
    return isinstance(record, dict) and process_alive(record) is True
