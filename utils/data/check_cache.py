"""The dataset check's result, kept by the dataset's fingerprint, so a dataset is decoded once.

One JSON file per dataset (its CSV paths) in a cache folder the caller owns (`.dataset-checks/` of the output
folder: the page's, a run's `output_path`). It holds:

- what it describes: the CSVs' resolved paths, so an entry copied or left under another dataset's name is refused;
- the fingerprint: each CSV's bytes (sha256), the check's options, and every clip's size, modification time (ns)
  and a digest of a few small slices of it (`clip_probe.sample_digest`), clip by clip as `ClipProbe`s;
- the report of the check that had that fingerprint.

A later check of the same CSVs whose bytes, options and clip stamps are all the same is served the report without
decoding a clip (`CheckStats.cache_hit`; each clip's slices are read, a few KiB). Any change (a clip's bytes, even
rewritten with its size and time kept, a CSV line, an option) misses; the clips that did not change are still
served from their probes, so only the changed ones are decoded again. A cache file that cannot be read, whose
contents do not parse, or that describes other CSVs is ignored and rewritten. The cache is an optimisation only: a
cache folder that cannot be written leaves the check as it was, without a cache.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from utils.data.clip_probe import ClipProbe, content_stamp, file_stamp
from utils.data.csv_reader import CsvLayout, Problem
from utils.data.report import DatasetReport, UsableRows
from utils.files import write_text_atomic

CACHE_FORMAT = 2  # bumped whenever what is stored, or what a check finds, changes
CACHE_FOLDER = ".dataset-checks"
# A dataset of more rows is not cached: the probe table (~200 bytes a clip, in memory and on disk) would grow
# without bound, where the check itself keeps 20 bytes a row.
CACHE_MAX_ROWS = 200_000
CHUNK = 1 << 20


def cache_folder(output_dir: str | os.PathLike) -> Path:
    """Where the checks of datasets used from an output folder are kept."""
    return Path(output_dir).expanduser() / CACHE_FOLDER


def remove_from_new_output(output_dir: str | os.PathLike) -> None:
    """After a refused run whose call created `output_dir`: its check's cache goes, then the folder if empty, so a
    refusal leaves no output folder behind."""
    output = Path(output_dir).expanduser()
    shutil.rmtree(cache_folder(output), ignore_errors=True)
    with contextlib.suppress(OSError):
        output.rmdir()


def cache_file(cache_dir: str | os.PathLike, csv_paths: list[Path]) -> Path:
    resolved = [str(Path(p).resolve()) for p in csv_paths]
    digest = hashlib.sha256("\0".join(resolved).encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(resolved[0]).stem)[:48] or "dataset"
    return Path(cache_dir) / f"{stem}-{digest}.json"


def csv_identity(csv_paths: list[Path]) -> list[str]:
    """The CSVs an entry describes, as an entry records them: their resolved paths, in order (train, eval)."""
    return [str(Path(p).resolve()) for p in csv_paths]


def csv_digests(csv_paths: list[Path]) -> list[str]:
    """sha256 of each CSV's bytes, read in 1 MiB blocks."""
    digests = []
    for path in csv_paths:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(CHUNK):
                digest.update(block)
        digests.append(digest.hexdigest())
    return digests


@dataclasses.dataclass
class CachedCheck:
    csv: list[str]
    options: dict[str, Any]
    clips: dict[str, ClipProbe]
    report: dict[str, Any] | None = None
    paths: list[str] = dataclasses.field(default_factory=list)  # csv_identity of the CSVs it describes

    def unchanged(self, csv: list[str], options: dict[str, Any]) -> bool:
        """Same CSV bytes, same options, and every clip the check read has its size, time and sampled slices of
        then."""
        if self.report is None or self.csv != csv or self.options != options:
            return False
        return all(content_stamp(location) == probe.stamp for location, probe in self.clips.items())


def load(path: Path, paths: list[str] | None = None) -> CachedCheck | None:
    """The cached check in `path`, or None (none, another format, a file that does not parse, or, given `paths`,
    an entry that describes other CSVs: one copied or left under this dataset's name)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != CACHE_FORMAT:
            return None
        entry_paths = [str(p) for p in data["paths"]]
        if paths is not None and entry_paths != paths:
            return None
        clips = {str(k): ClipProbe.from_json(v) for k, v in data["clips"].items()}
        return CachedCheck(list(data["csv"]), dict(data["options"]), clips, data.get("report"), entry_paths)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def save(path: Path, entry: CachedCheck) -> bool:
    """Write the entry atomically; False (and nothing written) when the folder cannot be written."""
    data = {
        "format": CACHE_FORMAT,
        "paths": entry.paths,
        "csv": entry.csv,
        "options": entry.options,
        "clips": {location: probe.to_json() for location, probe in entry.clips.items()},
        "report": entry.report,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(data, separators=(",", ":")))
    except (OSError, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------------------------------
# The report as JSON
# ---------------------------------------------------------------------------------------------------------------


def _column(values: array) -> dict[str, str]:
    return {"type": values.typecode, "b64": base64.b64encode(values.tobytes()).decode("ascii")}


def _array(data: dict[str, str]) -> array:
    values = array(data["type"])
    values.frombytes(base64.b64decode(data["b64"]))
    return values


def _layout(data: dict[str, Any]) -> CsvLayout:
    return CsvLayout(
        **{
            **data,
            "columns": tuple(data["columns"]),
            "problems": [Problem(**p) for p in data["problems"]],
        }
    )


def encode_report(report: DatasetReport) -> dict[str, Any]:
    def rows(usable: UsableRows) -> dict[str, Any]:
        return {
            "csv_file": usable.csv_file,
            "lines": _column(usable.lines),
            "durations": _column(usable.durations),
            "hashes": _column(usable.hashes),
        }

    picks = report._eval_picks
    return {
        "rows_read": report.rows_read,
        "rows_usable": report.rows_usable,
        "minutes": report.minutes,
        "problems": [dataclasses.asdict(p) for p in report.problems],
        "histogram": report.histogram,
        "language": report.language,
        "notes": report.notes,
        "problem_counts": report.problem_counts,
        "audio_check": report.audio_check,
        "max_audio_length": report.max_audio_length,
        "train": [rows(u) for u in report._train],
        "eval": [rows(u) for u in report._eval],
        "eval_picks": {k: _column(array("q", np.asarray(v, np.int64).tobytes())) for k, v in picks.items()},
        "layouts": {k: dataclasses.asdict(v) for k, v in report.layouts.items()},
        "drop_counts": report.drop_counts,
        "fingerprint": report._fingerprint,
    }


def decode_report(data: dict[str, Any]) -> DatasetReport:
    """The report encode_report wrote (ValueError, KeyError or TypeError when it is not one)."""
    layouts = {k: _layout(v) for k, v in data["layouts"].items()}

    def rows(item: dict[str, Any]) -> UsableRows:
        usable = UsableRows(item["csv_file"], layouts.get(item["csv_file"]))
        usable.lines, usable.durations, usable.hashes = (_array(item[k]) for k in ("lines", "durations", "hashes"))
        if not len(usable.lines) == len(usable.durations) == len(usable.hashes):
            raise ValueError("usable rows of different lengths")
        return usable

    return DatasetReport(
        rows_read=int(data["rows_read"]),
        rows_usable=int(data["rows_usable"]),
        minutes=float(data["minutes"]),
        problems=[Problem(**p) for p in data["problems"]],
        histogram=dict(data["histogram"]),
        language=str(data["language"]),
        notes=list(data["notes"]),
        problem_counts=dict(data["problem_counts"]),
        audio_check=str(data["audio_check"]),
        max_audio_length=int(data["max_audio_length"]),
        _train=[rows(item) for item in data["train"]],
        _eval=[rows(item) for item in data["eval"]],
        _eval_picks={k: np.frombuffer(_array(v), dtype=np.int64).copy() for k, v in data["eval_picks"].items()},
        layouts=layouts,
        drop_counts=dict(data["drop_counts"]),
        _fingerprint=data.get("fingerprint") or "",
    )


def cached_report(entry: CachedCheck | None, csv: list[str], options: dict[str, Any]) -> DatasetReport | None:
    """The cached report when nothing it depends on changed; None otherwise (or when it does not decode)."""
    if entry is None or entry.report is None or not entry.unchanged(csv, options):
        return None
    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
        return decode_report(entry.report)
    return None


def options_key(
    language: str,
    max_audio_length: object,
    audio_check: str,
    seed: int,
    text_frontend: Any,
    vocab_path: str | os.PathLike | None,
    audio_roots: Sequence[str | os.PathLike] | None,
) -> dict[str, Any]:
    """Everything besides the files that a check's verdict depends on, as JSON values."""
    frontend = text_frontend.to_dict() if hasattr(text_frontend, "to_dict") else repr(text_frontend)
    vocab = [str(Path(vocab_path).resolve()), *file_stamp(str(vocab_path))] if vocab_path else None
    return {
        "language": language,
        "max_audio_length": float(max_audio_length),  # type: ignore[arg-type]
        "audio_check": audio_check,
        "seed": int(seed),
        "text_frontend": frontend,
        "vocab": vocab,
        "audio_roots": sorted(str(Path(root).resolve()) for root in audio_roots or ()),
    }


class DatasetCache:
    """The check cache of one dataset, when the caller gave a cache folder."""

    def __init__(self, cache_dir: str | os.PathLike | None, csv_paths: list[Path], options: dict[str, Any]) -> None:
        self.path = cache_file(cache_dir, csv_paths) if cache_dir is not None else None
        self.options = options
        self.paths = csv_identity(csv_paths)
        self.entry = load(self.path, self.paths) if self.path is not None else None
        self.csv = csv_digests(csv_paths) if self.path is not None else []

    def report(self) -> DatasetReport | None:
        return cached_report(self.entry, self.csv, self.options)

    def known(self) -> dict[str, ClipProbe]:
        return dict(self.entry.clips) if self.entry is not None else {}

    def store(self, report: DatasetReport, used: dict[str, ClipProbe]) -> None:
        if self.path is None:
            return
        report.fingerprint()  # from the heads just read: a later run served from the cache has it at once
        entry = CachedCheck(self.csv, self.options, used, encode_report(report), self.paths)
        save(self.path, entry)


def prepared_probes(csv_paths: list[Path]) -> dict[str, ClipProbe]:
    """The probes a prepared dataset recorded for its clips (utils.data.prepared_record), by audio location."""
    from utils.data.prepared_record import recorded_probes

    found: dict[str, ClipProbe] = {}
    for path in csv_paths:
        found.update(recorded_probes(path))
    return found
