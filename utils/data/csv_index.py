"""Bounded-memory random access to very large metadata CSVs (one row per line).

A TTS metadata CSV (``audio_file|text|speaker_name``) can have millions of rows. Loading it with
pandas costs many times its size in memory; instead we record the byte offset where each row
starts (8 bytes per row) and read single rows with ``seek`` on an open file handle.

Format assumptions (documented limits, not bugs):

* One row per physical line. Quoted fields that contain newlines are NOT supported: such a field
  would be split into two "rows". TTS metadata files never need them.
* Line endings are LF or CRLF (a bare CR, old Mac style, is not a line ending here).
* A UTF-8 BOM at the start of the file is skipped; rows are decoded as UTF-8.
* Empty lines (nothing, or only ``\\r``, before the ``\\n``) are not rows. A line of spaces is a row.
* With ``has_header=True`` the first non-empty line is the header and is not a row.

The index is cached as ``.npy`` (memory-mapped on reload, so reopening costs almost no memory)
together with a JSON sidecar describing the source file; any change to the source's path, size,
mtime or first/last 64 KiB makes the cache stale and it is rebuilt. Cache files are written only
into the caller's ``cache_dir``, never next to the source: the user's files are read-only to us.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from utils.files import atomic_write, write_text_atomic

CHUNK_SIZE = 8 * 1024 * 1024  # read granularity: bounds memory whatever the file size
FINGERPRINT_BYTES = 64 * 1024  # how much of the head and tail goes into the change-detection hash
CACHE_FORMAT = 1  # bump when the on-disk index layout or meaning changes
_BOM = b"\xef\xbb\xbf"
_LF = 0x0A
_CR = 0x0D

ProgressFn = Callable[[int, int], None]


def build_offset_index(
    csv_path: str | os.PathLike,
    *,
    has_header: bool = True,
    progress: ProgressFn | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> np.ndarray:
    """Return an int64 array with the byte offset where each data row of ``csv_path`` starts.

    The file is read in binary chunks of ``chunk_size`` bytes, so memory use is the chunk plus
    8 bytes per row, whatever the file size. Empty lines are skipped; a leading UTF-8 BOM is not
    part of row 0; with ``has_header`` the first non-empty line is dropped. ``progress(bytes_done,
    bytes_total)`` is called after every chunk.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    parts: list[np.ndarray] = []
    header_pending = has_header
    with open(csv_path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        line_start = len(_BOM) if f.read(len(_BOM)) == _BOM else 0
        f.seek(line_start)
        base = line_start  # file offset of the current chunk's first byte
        prev_last = -1  # last byte of the previous chunk (a 1-byte line may start there)
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                break
            buf = np.frombuffer(chunk, dtype=np.uint8)
            newlines = np.flatnonzero(buf == _LF)
            if newlines.size:
                ends = newlines.astype(np.int64) + base  # offset of each line's "\n"
                kept = _row_starts(buf, ends, base, line_start, prev_last)
                if header_pending and kept.size:
                    kept = kept[1:]
                    header_pending = False
                parts.append(kept)
                line_start = int(ends[-1]) + 1
            base += len(chunk)
            prev_last = chunk[-1]
            if progress is not None:
                progress(base, total)
        # A last line without a trailing newline is still a row (unless it is just "\r").
        tail_len = base - line_start
        if tail_len > 1 or (tail_len == 1 and prev_last != _CR):
            if header_pending:
                header_pending = False
            else:
                parts.append(np.array([line_start], dtype=np.int64))
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts).astype(np.int64, copy=False)


def _row_starts(buf: np.ndarray, ends: np.ndarray, base: int, line_start: int, prev_last: int) -> np.ndarray:
    """Start offsets of the non-empty lines ending at `ends` (file offsets of their "\\n") in one chunk."""
    starts = np.empty_like(ends)
    starts[0] = line_start
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts
    keep = lengths > 1
    single = lengths == 1
    if single.any():
        # A 1-byte line is blank when that byte is the CR of a CRLF.
        rel = starts[single] - base  # -1 when the byte is the previous chunk's last
        first = np.where(rel >= 0, buf[np.maximum(rel, 0)], prev_last)
        keep[single] = first != _CR
    return starts[keep]


def _sanitise(name: str) -> str:
    # Cache names must be valid on every OS whatever the user named the CSV.
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:64] or "csv"


def cache_paths(csv_path: str | os.PathLike, cache_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Return ``(index .npy path, sidecar .json path)`` for ``csv_path`` inside ``cache_dir``."""
    source = Path(csv_path).resolve()
    digest = hashlib.sha256(os.fsencode(source)).hexdigest()[:12]
    stem = f"{_sanitise(source.name)}-{digest}.rowidx"
    cache = Path(cache_dir)
    return cache / f"{stem}.npy", cache / f"{stem}.json"


def source_fingerprint(csv_path: str | os.PathLike) -> dict:
    """Describe the source file well enough to tell whether a cached index is still valid."""
    source = Path(csv_path).resolve()
    with open(source, "rb") as f:
        st = os.fstat(f.fileno())
        h = hashlib.sha256()
        h.update(f.read(FINGERPRINT_BYTES))
        # Appends and edits near the end are the common change; hash the tail too.
        f.seek(max(0, st.st_size - FINGERPRINT_BYTES))
        h.update(f.read(FINGERPRINT_BYTES))
    return {
        "source": str(source),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "head_tail_sha256": h.hexdigest(),
    }


class CsvRowIndex:
    """Random and streaming access to the rows of a large CSV through a byte-offset index.

    Create with :meth:`open`. Rows are returned without their line ending. Reads are serialised
    by a lock, so one instance may be shared between threads. The index describes the file as it
    was when opened; reopen after the file changes.
    """

    def __init__(
        self, csv_path: str | os.PathLike, offsets: np.ndarray, *, built_now: bool, cache_path: Path | None = None
    ) -> None:
        self.path = Path(csv_path).resolve()
        self.offsets = offsets
        #: True when this open built the index, False when it came from the cache.
        self.built_now = built_now
        self.cache_path = cache_path
        self._file = open(self.path, "rb")  # noqa: SIM115 - held open for seeks until close()
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        csv_path: str | os.PathLike,
        cache_dir: str | os.PathLike,
        *,
        has_header: bool = True,
        progress: ProgressFn | None = None,
        chunk_size: int = CHUNK_SIZE,
    ) -> CsvRowIndex:
        """Open ``csv_path`` using the index cached in ``cache_dir``, building it if stale/missing.

        ``cache_dir`` is created if needed and must not be the CSV's own folder (we never write
        next to the user's file). The cache is valid only while the source's absolute path,
        size, mtime_ns and first/last 64 KiB are unchanged, and ``has_header`` is the same.
        """
        source = Path(csv_path).resolve()
        if not source.is_file():
            raise FileNotFoundError(source)
        cache = Path(cache_dir).resolve()
        if cache == source.parent:
            raise ValueError(f"cache_dir {cache} is the CSV's own folder; use a separate cache folder")
        cache.mkdir(parents=True, exist_ok=True)
        npy_path, json_path = cache_paths(source, cache)

        cached = cls._load_cache(source, npy_path, json_path, has_header)
        if cached is not None:
            return cls(source, cached, built_now=False, cache_path=npy_path)

        # The file may be written to while we index it; only a build that saw one stable
        # version of the file may be cached or returned.
        for _ in range(3):
            before = source_fingerprint(source)
            offsets = build_offset_index(source, has_header=has_header, progress=progress, chunk_size=chunk_size)
            if source_fingerprint(source) == before:
                break
        else:
            raise RuntimeError(f"{source} kept changing while it was being indexed")

        meta = dict(
            before, format=CACHE_FORMAT, has_header=has_header, rows=int(offsets.size), index_file=npy_path.name
        )
        # Index first, sidecar last: the sidecar is the commit marker of a complete cache.
        atomic_write(npy_path, functools.partial(np.save, arr=offsets, allow_pickle=False))
        write_text_atomic(json_path, json.dumps(meta, indent=1))
        # Reopen memory-mapped so that the built array's memory is given back.
        del offsets
        mapped = np.load(npy_path, mmap_mode="r", allow_pickle=False)
        return cls(source, mapped, built_now=True, cache_path=npy_path)

    @staticmethod
    def _load_cache(source: Path, npy_path: Path, json_path: Path, has_header: bool) -> np.ndarray | None:
        try:
            meta = json.loads(json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        expected = dict(
            source_fingerprint(source), format=CACHE_FORMAT, has_header=has_header, index_file=npy_path.name
        )
        if any(meta.get(k) != v for k, v in expected.items()):
            return None
        try:
            offsets = np.load(npy_path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            return None
        if offsets.dtype != np.int64 or offsets.shape != (meta.get("rows"),):
            return None
        return offsets

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def _check_index(self, i: int) -> int:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {i} out of range (0..{n - 1})")
        return i

    def row_bytes(self, i: int) -> bytes:
        """Raw bytes of row ``i`` (negative counts from the end), without ``\\n``/``\\r\\n``."""
        i = self._check_index(i)
        start = int(self.offsets[i])
        # Bound the read by the next row's start so a corrupt huge line can't be slurped whole.
        limit = int(self.offsets[i + 1]) - start if i + 1 < len(self) else -1
        with self._lock:
            self._file.seek(start)
            line = self._file.readline(limit)
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        return line

    def row_text(self, i: int) -> str:
        """Row ``i`` decoded as UTF-8 (strict: a mis-encoded row raises UnicodeDecodeError)."""
        return self.row_bytes(i).decode("utf-8")

    def iter_rows(self, start: int = 0, stop: int | None = None) -> Iterator[str]:
        """Yield decoded rows ``start..stop-1`` in order, one at a time (slice semantics)."""
        for i in range(*slice(start, stop).indices(len(self))):
            # Seeks into the buffered reader's current buffer are cheap, so this streams.
            yield self.row_text(i)

    def close(self) -> None:
        """Close the CSV handle and drop the (possibly memory-mapped) index."""
        self._file.close()
        self.offsets = np.zeros(0, dtype=np.int64)

    def __enter__(self) -> CsvRowIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
