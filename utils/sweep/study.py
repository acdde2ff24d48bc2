"""The Optuna study behind a sweep: where it is stored, what it is a study of, and its trials' bookkeeping.

Storage: SQLite in the output folder by default (`<output>/sweeps/<name>.db`: embedded, nothing to start, opened as
it is by `optuna-dashboard sqlite:///...`), or any Optuna storage URL (PostgreSQL, MySQL) or a journal file
(`journal:/shared/disk/study.log`) that several machines reach: every process given the same storage and study name
works on one study. The study records what it is a study *of* (its definition: the dataset by content, the fixed
settings, the space, the rule); a process whose definition differs is refused with the difference named, so two
sweeps never mix trials of different questions in one study.

A trial is owned by the process that runs it, through a lock on `sweep.lock` in its run folder (released by the
system when that process dies, even by kill -9): a trial still RUNNING in the storage whose lock is free lost its
process, and the next process of the study adopts it and resumes its run from its checkpoint.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFINITION = "definition"
TRIAL_LOCK = "sweep.lock"
TRIAL_FILE = "trial.json"  # in a trial's run folder: its study, number and settings (the Runs view groups by it)
# Settings that name a place or a process rather than what is trained: machines sharing a study differ in them.
_NOT_DEFINING = (
    "output_path",
    "train_csv",
    "eval_csv",
    "run_name",
    "devices",
    "quality_baseline_from",
    "resume_from",
    "num_workers",
    "models_dir",
    "custom_model",
    "lexicon_file",
    "whisper_model",
)


def default_storage(output_dir: str | os.PathLike, study_name: str) -> str:
    folder = Path(output_dir).resolve() / "sweeps"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / (study_name + '.db')}"


def open_storage(url: str) -> Any:
    """The Optuna storage of `url`, or a ValueError saying why it does not open."""
    import optuna
    from optuna.storages import RDBStorage
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    try:
        if url.startswith("journal:"):
            path = Path(url.removeprefix("journal:")).expanduser()
            if not path.parent.is_dir():
                raise ValueError(f"its folder {path.parent} does not exist")
            return JournalStorage(JournalFileBackend(str(path)))
        if url.startswith("sqlite:///"):
            folder = Path(url.removeprefix("sqlite:///")).parent
            if not folder.is_dir():
                raise ValueError(f"its folder {folder} does not exist")
            # Several processes write one SQLite file: wait for a lock rather than fail on it.
            return RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 120}})
        return RDBStorage(url)
    except ValueError as exc:
        raise ValueError(f"The sweep's storage {redacted(url)} does not open: {exc}.") from None
    except (optuna.exceptions.OptunaError, ImportError, Exception) as exc:  # noqa: BLE001 - a driver's own error
        raise ValueError(f"The sweep's storage {redacted(url)} does not open: {type(exc).__name__}: {exc}") from None


def redacted(url: str) -> str:
    """A storage URL without its password (it goes into logs, trial.json and the page)."""
    return re.sub(r"(?<=[:/])([^:/@]*):[^@/]*@", r"\1:***@", url)


def definition_of(
    arguments: Mapping[str, Any], dataset_fingerprint: str, space: list[dict[str, Any]], rule: str
) -> dict[str, Any]:
    fixed = {k: v for k, v in arguments.items() if k not in _NOT_DEFINING and k not in {d["name"] for d in space}}
    return {"dataset": dataset_fingerprint, "fixed": fixed, "space": space, "rule": rule}


def differences(stored: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    said = []
    if stored.get("dataset") != ours.get("dataset"):
        said.append("another dataset (its rows or clips differ)")
    if stored.get("rule") != ours.get("rule"):
        said.append(f"rule {stored.get('rule')} vs {ours.get('rule')}")
    if stored.get("space") != ours.get("space"):
        said.append("another search space")
    theirs, mine = stored.get("fixed") or {}, ours.get("fixed") or {}
    for name in sorted(set(theirs) | set(mine)):
        if theirs.get(name) != mine.get(name):
            said.append(f"{name} {theirs.get(name)!r} vs {mine.get(name)!r}")
    return said


def open_study(storage: Any, study_name: str, definition: dict[str, Any], direction: str) -> Any:
    """The study `study_name` in `storage`: created with `definition`, or the same study resumed; another study's
    definition is refused with what differs."""
    import optuna

    from utils.sweep.pruning import make_pruner

    # Seeded by the run's seed and this process: processes sharing the study must not draw the same settings.
    seed = (int(definition["fixed"].get("seed") or 1) * 1_000_003 + os.getpid()) % 2**32
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4)
    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        direction=direction,
        sampler=sampler,
        pruner=make_pruner(),
        load_if_exists=True,
    )
    stored = study.user_attrs.get(DEFINITION)
    if stored is None:
        study.set_user_attr(DEFINITION, definition)
    else:
        found = differences(stored, definition)
        if found:
            raise ValueError(
                f"The study {study_name!r} in this storage is another sweep's ({'; '.join(found)}): give another "
                "study_name, or the same dataset, settings, space and rule to continue it."
            )
    if study.direction.name.lower() != direction:
        raise ValueError(f"The study {study_name!r} is to {study.direction.name.lower()}, this sweep to {direction}.")
    return study


class FileLock:
    """An flock on a file, held by this process (the system lets go when the process dies, kill -9 included; the
    descriptor is not inherited by the workers it starts)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self, *, wait: bool = False) -> bool:
        """Hold the lock; without `wait`, False at once when another process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire(wait=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class TrialLock(FileLock):
    """This process's hold on a trial's run folder."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        super().__init__(Path(run_dir) / TRIAL_LOCK)


def study_lock(storage_url: str, study_name: str) -> Any:
    """A lock that processes of one machine share around counting the study's trials and asking for a new one, so
    that together they do not run past the budget: a file beside a SQLite or journal storage. A server storage
    (PostgreSQL, MySQL) has none: processes on several machines may each start one trial past the budget."""
    for prefix in ("sqlite:///", "journal:"):
        if storage_url.startswith(prefix):
            path = Path(storage_url.removeprefix(prefix)).expanduser()
            return FileLock(path.with_name(f"{path.name}.{study_name}.lock"))
    return contextlib.nullcontext()
