"""Extract a user's uploaded zip (audio + metadata) without letting it write outside its folder.

Every entry is validated before anything is written: no absolute paths (``/etc/x``, ``C:\\x``,
``\\\\server\\x``), no ``..`` components (refused even when they would stay inside: no honest
dataset needs them), backslashes are treated as separators (Windows zips use them), no ``:`` in
names (Windows drive-relative paths and NTFS streams), no symlinks, devices, FIFOs or sockets,
no encrypted entries, no duplicates, at most ``max_files`` entries, at most ``max_total_bytes``
declared uncompressed (and no more than the free disk space), and no entry or archive whose
uncompressed size is over ``max_ratio`` times its compressed size (a zip bomb: 4 MB of zip holding
4 GB of zeros). Every limit is checked again while streaming, on the bytes actually produced (a
bomb can lie about its sizes), so extraction stops within one chunk of a limit. Ratios are not
applied below RATIO_FLOOR bytes: a short WAV of silence compresses 1000:1 and harms no one.
Existing files are never overwritten. If anything fails part-way, every file and folder this call
created is removed again.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import zipfile
import zlib
from pathlib import Path

COPY_CHUNK = 1024 * 1024  # streaming granularity: how far past a limit a bomb can get before we stop
MAX_RATIO = 100.0  # speech audio deflates about 1.1:1, text about 4:1; zeros 1000:1
RATIO_FLOOR = 8 * 1024 * 1024  # output below this is never refused for its ratio
_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafeArchiveError(ValueError):
    """The archive (or one named entry in it) is refused; nothing of it is left on disk."""


def _entry_parts(info: zipfile.ZipInfo) -> tuple[str, ...]:
    """Validate one entry's name and return its relative path components (empty = the root)."""
    raw = info.filename
    name = raw.replace("\\", "/")  # a Windows-made zip may use backslashes as separators
    if "\x00" in name:
        raise UnsafeArchiveError(f"entry {raw!r}: NUL byte in name")
    if name.startswith("/"):  # also covers //server/share (UNC) once backslashes are mapped
        raise UnsafeArchiveError(f"entry {raw!r}: absolute path")
    if _DRIVE.match(name):
        raise UnsafeArchiveError(f"entry {raw!r}: Windows drive path")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    for part in parts:
        if part == "..":
            raise UnsafeArchiveError(f"entry {raw!r}: '..' path component (path traversal)")
        if ":" in part:
            raise UnsafeArchiveError(f"entry {raw!r}: ':' in name (drive-relative path or NTFS stream)")
    return parts


def _check_type(info: zipfile.ZipInfo) -> None:
    mode = info.external_attr >> 16  # Unix st_mode lives in the high 16 bits
    kind = stat.S_IFMT(mode)
    if stat.S_ISLNK(mode):
        raise UnsafeArchiveError(f"entry {info.filename!r}: symbolic link")
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        raise UnsafeArchiveError(f"entry {info.filename!r}: special file (device, FIFO or socket)")
    if info.flag_bits & 0x1:
        raise UnsafeArchiveError(f"entry {info.filename!r}: encrypted entries are not supported")


def _check_ratio(name: str, produced: int, compressed: int, max_ratio: float, what: str = "entry") -> None:
    if produced > RATIO_FLOOR and produced > max_ratio * max(compressed, 1):
        raise UnsafeArchiveError(
            f"{what} {name!r}: {produced} bytes from {compressed} compressed, a ratio over the "
            f"limit of {max_ratio:.0f}:1 (a zip bomb?)"
        )


def _check_space(target: Path, needed: int) -> None:
    folder = next((p for p in (target, *target.parents) if p.exists()), None)
    if folder is not None and needed > shutil.disk_usage(folder).free:
        free = shutil.disk_usage(folder).free
        raise UnsafeArchiveError(
            f"archive needs {needed / 1e9:.1f} GB unpacked but {folder} has {free / 1e9:.1f} GB free"
        )


def _plan(zf: zipfile.ZipFile, target: Path, max_total_bytes: int, max_files: int, max_ratio: float):
    """Validate all entries; return (directories, [(info, destination)]) to create, in order."""
    infos = zf.infolist()
    if len(infos) > max_files:
        raise UnsafeArchiveError(f"archive has {len(infos)} entries, more than the limit of {max_files}")
    declared = 0
    files: dict[tuple[str, ...], zipfile.ZipInfo] = {}
    dirs: set[tuple[str, ...]] = set()
    for info in infos:
        _check_type(info)
        parts = _entry_parts(info)
        if not parts:
            continue  # "./" or "/" alone: the target folder itself
        if info.is_dir():
            dirs.add(parts)
            continue
        if parts in files:
            raise UnsafeArchiveError(f"entry {info.filename!r}: duplicate name in archive")
        files[parts] = info
        _check_ratio(info.filename, info.file_size, info.compress_size, max_ratio)
        declared += info.file_size
        if declared > max_total_bytes:
            raise UnsafeArchiveError(
                f"entry {info.filename!r}: declared uncompressed size exceeds the limit of {max_total_bytes} bytes"
            )
    # Every parent of a file is a folder; no name may be both a file and a folder.
    for parts in list(files):
        for k in range(1, len(parts)):
            dirs.add(parts[:k])
    for parts in dirs & set(files):
        raise UnsafeArchiveError(f"entry {files[parts].filename!r}: name is both a file and a folder")
    _check_ratio(str(zf.filename), declared, os.path.getsize(zf.filename), max_ratio, "archive")
    _check_space(target, declared)

    root = target.resolve()
    plan = []
    for parts, info in files.items():
        dest = target.joinpath(*parts)
        # resolve() also catches symlinks already inside target_dir that point elsewhere.
        if not dest.resolve().is_relative_to(root):
            raise UnsafeArchiveError(f"entry {info.filename!r}: would be written outside {target}")
        if dest.exists() or dest.is_symlink():
            raise UnsafeArchiveError(f"entry {info.filename!r}: {dest} already exists; refusing to overwrite")
        plan.append((info, dest))
    for parts in dirs:
        d = target.joinpath(*parts)
        if not d.resolve().is_relative_to(root):
            raise UnsafeArchiveError(f"folder {'/'.join(parts)!r}: would be created outside {target}")
        if d.exists() and not d.is_dir():
            raise UnsafeArchiveError(f"folder {'/'.join(parts)!r}: {d} exists and is not a folder")
    return sorted(dirs, key=len), plan


def _compressed_so_far(src, info: zipfile.ZipInfo) -> int:
    """Compressed bytes the decompressor has used: what zipfile read, less what it holds unread. From
    zipfile's private counters; without them, the declared compressed size (the ratio is then an
    average, and the declared sizes were checked before writing)."""
    read = info.compress_size - getattr(src, "_compress_left", 0)
    tail = getattr(getattr(src, "_decompressor", None), "unconsumed_tail", b"")
    return read - len(tail) if isinstance(tail, bytes) else read


def _copy_entry(src, out, info: zipfile.ZipInfo, total: int, max_total_bytes: int, max_ratio: float) -> int:
    """Stream one entry, checking its real size and ratio as it grows; returns the running total."""
    entry_bytes = 0
    while chunk := src.read(COPY_CHUNK):
        entry_bytes += len(chunk)
        total += len(chunk)
        if entry_bytes > info.file_size:
            raise UnsafeArchiveError(f"entry {info.filename!r}: more data than its declared {info.file_size} bytes")
        if total > max_total_bytes:
            raise UnsafeArchiveError(
                f"entry {info.filename!r}: extracted data exceeds the limit of {max_total_bytes} bytes"
            )
        _check_ratio(info.filename, entry_bytes, _compressed_so_far(src, info), max_ratio)
        out.write(chunk)
    return total


def _remove(written: list[Path], created_dirs: list[Path]) -> None:
    """Undo a failed extraction: the files it wrote, then the folders it created (children first)."""
    for f in reversed(written):
        try:
            f.unlink()
        except FileNotFoundError:
            pass
    for d in reversed(created_dirs):
        try:
            d.rmdir()
        except OSError:
            pass  # not empty: something else wrote there meanwhile; leave it


def extract_zip_safely(
    zip_path: str | os.PathLike,
    target_dir: str | os.PathLike,
    *,
    max_total_bytes: int = 4 * 1024**3,
    max_files: int = 200_000,
    max_ratio: float = MAX_RATIO,
) -> list[Path]:
    """Extract ``zip_path`` into ``target_dir`` (created if missing); return the files written.

    Raises :class:`UnsafeArchiveError` naming the offending entry for any refused archive (see
    the module docstring), including an entry that turns out corrupt or larger than declared
    while streaming; in every failure case nothing extracted is left behind and no existing file
    is modified. Folder entries are created. File permissions from the archive are not applied.
    """
    target = Path(target_dir)
    try:
        zf = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile as exc:
        raise UnsafeArchiveError(f"{zip_path}: not a valid zip archive ({exc})") from exc
    created_dirs: list[Path] = []  # parents before children
    written: list[Path] = []
    current = "?"  # the entry being written, for error messages
    with zf:
        dirs, plan = _plan(zf, target, max_total_bytes, max_files, max_ratio)
        try:
            for d in [target] + [target.joinpath(*p) for p in dirs]:
                if not d.exists():
                    missing = [p for p in (d, *d.parents) if not p.exists()]
                    d.mkdir(parents=True)
                    created_dirs.extend(reversed(missing))
            total = 0
            archive_size = os.path.getsize(zip_path)
            for info, dest in plan:
                current = info.filename
                # "xb": exclusive create, so a file that appeared since validation (or a
                # case-insensitive twin on Windows/macOS) is never overwritten.
                with zf.open(info) as src, open(dest, "xb") as out:
                    written.append(dest)
                    total = _copy_entry(src, out, info, total, max_total_bytes, max_ratio)
                    _check_ratio(str(zip_path), total, archive_size, max_ratio, "archive")
        except BaseException as exc:
            _remove(written, created_dirs)
            if isinstance(exc, (zipfile.BadZipFile, zlib.error, EOFError)):
                raise UnsafeArchiveError(f"entry {current!r}: corrupt or inconsistent data ({exc})") from exc
            if isinstance(exc, NotImplementedError):
                raise UnsafeArchiveError(
                    f"entry {current!r}: {exc}; zip it again with ordinary (deflate) compression"
                ) from exc
            if isinstance(exc, FileExistsError):
                raise UnsafeArchiveError(
                    f"entry {current!r}: {exc.filename} already exists; refusing to overwrite"
                ) from exc
            raise
    return [dest for _, dest in plan]
