"""Files that must never be half-written, and JSONL logs that another process follows.

Every write that matters (checkpoints, run records, prepared data, exports) goes through
`atomic_write`: a temporary file in the same folder, flushed and fsynced, then renamed over the
target. A crash or a full disk leaves the previous file (or none), never a truncated one, and the
temporary file is removed. No write follows a symbolic link out of the folder that holds it
(`check_write_target`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

PathLike = str | os.PathLike


def _fsync_folder(folder: Path) -> None:
    # The rename itself is durable only once the folder's entry is on disk (POSIX).
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class LinkOutRefused(ValueError):
    """A write would follow a symbolic link out of the folder that holds it (the product writes only inside the
    folders it owns)."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def link_out(path: PathLike, owner: PathLike) -> str:
    """Where `path` leads when it is a symbolic link out of `owner` (the folder that holds it); "" otherwise."""
    path = Path(path)
    if not path.is_symlink():
        return ""
    target = path.resolve()
    return "" if _inside(target, Path(owner).resolve()) else str(target)


def refuse_link_out(path: PathLike, owner: PathLike | None = None) -> None:
    """Raise LinkOutRefused when `path` is a symbolic link that leads out of `owner` (default: its folder)."""
    path = Path(path)
    owner = Path(owner) if owner is not None else path.absolute().parent
    target = link_out(path, owner)
    if target:
        raise LinkOutRefused(
            f"{path} is a symbolic link to {target}, outside {owner}: nothing is written through it. Remove the "
            "link (or write to another folder)."
        )


def check_write_target(path: PathLike) -> None:
    """A file about to be written: neither it nor its folder is a link out of the folder that holds it (a crafted
    `wavs/` link would otherwise send the product's writes elsewhere). The folders a writer owns deeper down are
    checked by the writer (`refuse_links_in`)."""
    path = Path(path).absolute()
    refuse_link_out(path)
    refuse_link_out(path.parent)


def refuse_links_in(folder: PathLike, names: list[str] | None = None) -> None:
    """Before writing into a folder the product owns: none of its entries (or of `names`) is a link out of it."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    entries = [folder / name for name in names] if names is not None else list(folder.iterdir())
    for entry in entries:
        refuse_link_out(entry, folder)


# What torch.save raises when the disk fills mid-write: its zip writer checks positions, not errno.
_TORCH_WRITE_FAILED = ("unexpected pos", "file write failed", "PytorchStreamWriter failed writing")


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error (or one it was raised from) says the disk or the quota is full: ENOSPC/EDQUOT, or torch's
    `[enforce fail at inline_container.cc] unexpected pos ...` from a checkpoint write that ran out of space."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(current, RuntimeError) and any(marker in str(current) for marker in _TORCH_WRITE_FAILED):
            return True
        current = current.__cause__ or current.__context__
    return False


@contextlib.contextmanager
def atomic_output(path: PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside `path`; on a clean exit it replaces `path`, on an error it is removed."""
    target = Path(path)
    check_write_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _fsync_folder(target.parent)


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call `write(binary_handle)` into a temporary file, then rename it over `path`."""
    with atomic_output(path) as handle:
        write(handle)
    return Path(path)


def write_bytes_atomic(path: PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda handle: handle.write(data))


def write_text_atomic(path: PathLike, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: PathLike, data: Any, *, indent: int | None = 2) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n")


def save_torch_atomic(obj: Any, path: PathLike) -> Path:
    """torch.save through a temporary file: a full disk never leaves a truncated checkpoint."""
    import torch

    return atomic_write(path, lambda handle: torch.save(obj, handle))


def copy_file_atomic(source: PathLike, target: PathLike) -> Path:
    import shutil

    with open(source, "rb") as src:
        return atomic_write(target, lambda handle: shutil.copyfileobj(src, handle, 1024 * 1024))


def read_json(path: PathLike, default: Any = None) -> Any:
    """A JSON file's content, or `default` when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


# --- JSONL: one record per line, appended and flushed, read while it grows ----------------------------


def append_jsonl(path: PathLike, record: dict[str, Any]) -> None:
    """Append one record as a single line (one write call, so a reader never sees half a record)."""
    line = json.dumps(record, allow_nan=False, ensure_ascii=False) + "\n"
    check_write_target(path)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)


def rewrite_jsonl(path: PathLike, drop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Remove the records `drop` selects from a JSONL file (atomically: the kept lines are written as they were);
    returns the removed records. Followers notice the new file and read it again from its start."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    kept: list[bytes] = []
    dropped: list[dict[str, Any]] = []
    for raw in lines:
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        if isinstance(record, dict) and drop(record):
            dropped.append(record)
        elif raw.endswith(b"\n"):  # a line a kill cut short is no record
            kept.append(raw)
    if len(kept) != len(lines):
        write_bytes_atomic(path, b"".join(kept))
    return dropped


class JsonlFollower:
    """Reads a growing JSONL file incrementally: only new complete lines at each call. A file replaced (another
    inode) or cut shorter is read again from its start."""

    def __init__(self, path: PathLike | None = None, keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        self.path = Path(path) if path is not None else None
        self.keep = keep
        self.offset = 0
        self.inode: int | None = None
        self.records: list[dict[str, Any]] = []

    def skip_existing(self) -> None:
        """Follow only what is appended from now on (the file as it is now is taken as read)."""
        if self.path is not None and self.path.is_file():
            status = self.path.stat()
            self.inode, self.offset = status.st_ino, status.st_size

    def follow(self, path: PathLike | None = None) -> list[dict[str, Any]]:
        """All complete records so far (a line being written right now is read next time)."""
        if path is not None and Path(path) != self.path:
            self.path, self.offset, self.records = Path(path), 0, []
        if self.path is None or not self.path.is_file():
            return self.records
        status = self.path.stat()
        if status.st_ino != self.inode or status.st_size < self.offset:
            self.inode, self.offset, self.records = status.st_ino, 0, []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break
                self.offset += len(raw)
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    self.records.append(self.keep(record) if self.keep else record)
        return self.records


def read_jsonl(path: PathLike) -> list[dict[str, Any]]:
    """All complete records of a JSONL file (a line being written right now is skipped)."""
    return list(JsonlFollower(path).follow())
