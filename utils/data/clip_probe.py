"""What the dataset check learns from one clip's file, and the clips already probed, by size, modification time and
a sample of the content.

`probe_clip` runs in a worker process (utils.data.pool): the file's size and modification time, a digest of a few
small slices spread over the file (`sample_digest`), a digest of its first 64 KiB (the content fingerprint of a
resume reads it: DatasetReport.fingerprint), and `probe_audio`'s header and levels, or the reason it cannot be read.
A `ClipProbes` table serves a later check of an unchanged file (same size, modification time in nanoseconds and
sampled slices) without decoding it; any change probes it again. The slices catch a file rewritten in place with
its size and time kept (a clip overwritten with silence, its time restored by a copy or a sync tool) for the cost
of SAMPLE_SLICES small reads, not a read of the whole file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import astuple, dataclass
from pathlib import Path

from utils.audio.checks import AudioInfo, probe_audio
from utils.audio.io import AudioError
from utils.data.csv_reader import CsvRow
from utils.data.pool import TaskFailed
from utils.data.row_checks import outside_roots

HEAD_BYTES = 65536  # as DatasetReport.fingerprint reads each clip
SAMPLE_SLICES = 5  # slices of the file read by sample_digest: its start, its end and evenly between
SLICE_BYTES = 4096


@dataclass(frozen=True)
class ClipProbe:
    """One clip file as probed: `error` is probe_audio's reason when it cannot be used ("" when it can)."""

    size: int  # -1: the file does not exist
    mtime_ns: int
    duration: float = 0.0
    sample_rate: int = 0
    channels: int = 0
    rms_dbfs: float | None = None  # None: levels not measured (header only, or too long to decode)
    peak: float | None = None
    subtype: str = ""
    error: str = ""
    head_sha256: str = ""  # of the first HEAD_BYTES bytes
    dc_offset: float | None = None  # the mono mix's mean (None: levels not measured)
    ac_rms_dbfs: float | None = None  # its RMS around that mean
    sample_digest: str = ""  # of SAMPLE_SLICES slices of the file (sample_digest); "" when it cannot be read

    @property
    def stamp(self) -> tuple[int, int, str]:
        """What content_stamp gives for the file while it is as probed."""
        return (self.size, self.mtime_ns, self.sample_digest) if self.size >= 0 else (-1, 0, "")

    @property
    def info(self) -> AudioInfo | AudioError:
        if self.error:
            return AudioError(self.error)
        return AudioInfo(
            self.duration,
            self.sample_rate,
            self.channels,
            self.rms_dbfs,
            self.peak,
            self.subtype,
            self.dc_offset,
            self.ac_rms_dbfs,
        )

    def serves(self, full: bool, limit_s: float) -> bool:
        """Whether this probe answers a check at this depth: errors and header reads always answer a header
        check; a full check needs the levels, except for a clip over the limit (never decoded)."""
        measured = self.rms_dbfs is not None and self.ac_rms_dbfs is not None
        return bool(self.error) or not full or measured or self.duration > limit_s

    def to_json(self) -> list:
        return list(astuple(self))

    @classmethod
    def from_json(cls, value: list) -> ClipProbe:
        probe = cls(*value)
        if not isinstance(probe.size, int) or not isinstance(probe.mtime_ns, int):
            raise ValueError("not a clip probe")
        return probe


def file_stamp(location: str) -> tuple[int, int]:
    """(size, modification time in ns) of a file; (-1, 0) when it does not exist or cannot be read."""
    try:
        stat = os.stat(location)
    except OSError:
        return -1, 0
    return stat.st_size, stat.st_mtime_ns


def sample_digest(location: str, size: int | None = None) -> str:
    """A digest of SAMPLE_SLICES slices of SLICE_BYTES spread over the file (its start, its end and evenly between;
    a small file whole), with its size: a cheap look at the content, "" when the file cannot be read."""
    try:
        with open(location, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size if size is None else size
            digest = hashlib.blake2b(str(size).encode(), digest_size=16)
            if size <= SAMPLE_SLICES * SLICE_BYTES:
                digest.update(handle.read(SAMPLE_SLICES * SLICE_BYTES))
            else:
                last = size - SLICE_BYTES
                for i in range(SAMPLE_SLICES):
                    handle.seek(last * i // (SAMPLE_SLICES - 1))
                    digest.update(handle.read(SLICE_BYTES))
    except OSError:
        return ""
    return digest.hexdigest()


def content_stamp(location: str) -> tuple[int, int, str]:
    """(size, modification time in ns, sample_digest) of a file; (-1, 0, "") when it does not exist."""
    size, mtime_ns = file_stamp(location)
    if size < 0:
        return -1, 0, ""
    return size, mtime_ns, sample_digest(location, size)


def head_digest(location: str) -> str:
    with open(location, "rb") as handle:
        return hashlib.sha256(handle.read(HEAD_BYTES)).hexdigest()


def probe_file(location: str, full: bool, limit_s: float) -> ClipProbe:
    """Probe one file (see the module docstring); never raises for a bad file. The head's digest is taken by a
    full check only: a header check (a large dataset) reads no more of each file than its header."""
    size, mtime_ns, sampled = content_stamp(location)
    if size < 0:
        return ClipProbe(size, mtime_ns, error="file not found")
    try:
        head = head_digest(location) if full else ""
    except OSError as exc:
        return ClipProbe(size, mtime_ns, error=f"cannot be read ({exc.strerror or exc})", sample_digest=sampled)
    try:
        info = probe_audio(location, full=full, max_seconds=limit_s)
    except AudioError as exc:
        return ClipProbe(size, mtime_ns, error=str(exc), head_sha256=head, sample_digest=sampled)
    return ClipProbe(
        size,
        mtime_ns,
        info.duration,
        info.sample_rate,
        info.channels,
        info.rms_dbfs,
        info.peak,
        info.subtype,
        "",
        head,
        info.dc_offset,
        info.ac_rms_dbfs,
        sampled,
    )


def probe_clip(row: CsvRow, settings: tuple[bool, float]) -> ClipProbe:
    """A worker's task: the probe of a row's audio at the check's depth (settings: full, limit in seconds)."""
    full, limit_s = settings
    return probe_file(row.audio_location, full, limit_s)


class ClipProbes:
    """Probes by audio location; `served` gives one only while the file's size, modification time and sampled
    slices are those it was probed at. `used` collects the probes a check relied on (what its cache keeps)."""

    def __init__(self, known: dict[str, ClipProbe] | None = None, *, collect: bool = False) -> None:
        self.known = dict(known or {})
        self.collect = collect  # keep `used` (for a cache): a probe a row, memory that grows with the dataset
        self.used: dict[str, ClipProbe] = {}
        self.decoded = 0  # files probed by this check (not served)
        self.served_count = 0
        self._waiting: dict[str, ClipProbe] = {}  # served when its row was taken, until its row is judged

    def served(self, location: str, full: bool, limit_s: float) -> ClipProbe | None:
        """The probe that answers for this file now, or None when it must be opened. A missing file needs no
        opening: its probe says so."""
        stamp = file_stamp(location)
        if stamp[0] < 0:
            return ClipProbe(-1, 0, error="file not found")
        probe = self.known.get(location)
        if probe is None or (probe.size, probe.mtime_ns) != stamp or not probe.sample_digest:
            return None
        if sample_digest(location, stamp[0]) != probe.sample_digest:  # rewritten in place, its size and time kept
            return None
        return probe if probe.serves(full, limit_s) else None

    def add(self, location: str, probe: ClipProbe, *, probed: bool) -> None:
        self.decoded += int(probed)
        self.served_count += int(not probed)
        if self.collect:
            self.used[location] = probe
            if probe.size >= 0:
                self.known[location] = probe

    def needs_opening(self, row: CsvRow, full: bool, limit_s: float, roots: tuple[Path, ...]) -> bool:
        """Whether a row's clip must be opened (by a worker): it may be (inside `roots`) and no probe serves."""
        if outside_roots(row.audio_location, roots):
            return False
        probe = self.served(row.audio_location, full, limit_s)
        if probe is None:
            return True
        self._waiting[row.audio_location] = probe
        return False

    def of_row(self, row: CsvRow, result: ClipProbe | TaskFailed | None, full: bool, limit_s: float) -> ClipProbe:
        """The probe of a row's clip, noted: a worker's (`result`), or the one that served it (None)."""
        location = row.audio_location
        if isinstance(result, ClipProbe):
            self.add(location, result, probed=True)
            return result
        if isinstance(result, TaskFailed):  # never kept: the next check tries again
            probe = ClipProbe(-1, 0, error=f"could not be checked: {result.reason}")
            self.add(location, probe, probed=True)
            return probe
        probe = self._waiting.pop(location, None) or self.served(location, full, limit_s)
        if probe is None:  # changed between the two looks: read it here
            probe = probe_file(location, full, limit_s)
            self.add(location, probe, probed=True)
        else:
            self.add(location, probe, probed=False)
        return probe
