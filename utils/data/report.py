"""`DatasetReport`: what validating a dataset found, and the usable rows it keeps as compact arrays."""

from __future__ import annotations

import hashlib
import os
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from utils.constants import MAX_AUDIO_LENGTH
from utils.data.csv_reader import CsvLayout, CsvRow, Problem, iter_rows
from utils.text.visible import visible

HISTOGRAM_EDGES = tuple(range(13))  # 1-second bins, 0-12 s; longer clips land in the last bin


@dataclass
class CheckStats:
    """How a check was done (not what it found): served from the cache, or how many clips it decoded, where."""

    cache_hit: bool = False  # the whole report came from the check cache: no clip was opened
    decoded: int = 0  # clip files opened and probed by this check
    served: int = 0  # clips answered by their cached probe (unchanged size and modification time)
    workers: int = 0  # worker processes started (0: in this process)
    pids: list[int] = field(default_factory=list)  # the processes that probed clips
    deaths: list[str] = field(default_factory=list)  # worker processes that died, and how
    seconds: float = 0.0

    def describe(self) -> str:
        if self.cache_hit:
            return f"Served from the check cache ({self.served} clips unchanged, none decoded) in {self.seconds:.1f} s."
        where = f" on {self.workers} worker processes" if self.workers else ""
        text = f"{self.decoded} clips read{where}, {self.served} unchanged from the check cache, {self.seconds:.1f} s."
        if self.deaths:
            text += f" {len(self.deaths)} worker process(es) died ({self.deaths[0]}): their clips are listed."
        return text


@dataclass
class UsableRows:
    """Line numbers, durations and audio-path hashes of one CSV's usable rows, as compact arrays
    (20 bytes a row), in line order."""

    csv_file: str
    layout: CsvLayout | None = None  # detected once; re-reading the rows needs no second detection
    lines: array = field(default_factory=lambda: array("q"))
    durations: array = field(default_factory=lambda: array("f"))
    hashes: array = field(default_factory=lambda: array("q"))

    def keep(self, mask: np.ndarray) -> None:
        for name in ("lines", "durations", "hashes"):
            column = getattr(self, name)
            setattr(
                self,
                name,
                array(column.typecode, np.frombuffer(column, dtype=column.typecode)[mask].tobytes())
                if len(column)
                else column,
            )


@dataclass
class DatasetReport:
    """What `validate_dataset` found. `problems` holds at most MAX_LISTED_PROBLEMS rows;
    `problem_counts` counts every problem by the kind of its reason (utils.data.reasons: "Clip is 0.21–0.93 s,
    shorter than 1 s"), `drop_counts` those that drop a row."""

    rows_read: int
    rows_usable: int
    minutes: float
    problems: list[Problem]
    histogram: dict[str, list]
    language: str
    notes: list[str] = field(default_factory=list)
    problem_counts: dict[str, int] = field(default_factory=dict)
    audio_check: str = "full"
    max_audio_length: int = MAX_AUDIO_LENGTH
    _train: list[UsableRows] = field(default_factory=list, repr=False)
    _eval: list[UsableRows] = field(default_factory=list, repr=False)
    _eval_picks: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # sorted line numbers
    layouts: dict[str, CsvLayout] = field(default_factory=dict, repr=False)
    drop_counts: dict[str, int] = field(default_factory=dict)  # why rows are not used, by reason
    check: CheckStats = field(default_factory=CheckStats, repr=False, compare=False)
    _fingerprint: str = field(default="", repr=False)
    # audio location -> (size, sha256 of its first 64 KiB), as the check read it: the fingerprint needs no reread
    _heads: dict[str, tuple[int, str]] = field(default_factory=dict, repr=False, compare=False)
    # Several datasets (utils.data.mix_check): each CSV's dataset index and language, each dataset's summary, and
    # the rows each gives to an epoch (utils.data.mix.draw_counts). Empty for one dataset.
    file_datasets: dict[str, int] = field(default_factory=dict, repr=False)
    file_languages: dict[str, str] = field(default_factory=dict, repr=False)
    datasets: list[dict[str, object]] = field(default_factory=list)
    epoch_draws: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.notes = [visible(note) for note in self.notes]  # they name files: shown for what they are

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def file_errors(self) -> list[Problem]:
        """Errors about a whole file or the dataset (its layout, its language), not one row."""
        return [p for p in self.errors if p.file_level or p.line == 0]

    @property
    def train_count(self) -> int:
        return sum(len(u.lines) for u in self._train) - sum(len(p) for p in self._eval_picks.values())

    @property
    def eval_count(self) -> int:
        return sum(len(u.lines) for u in self._eval) + sum(len(p) for p in self._eval_picks.values())

    @property
    def epoch_rows(self) -> int:
        """Rows an epoch trains on: the training rows, or what several datasets' weights draw of them."""
        return sum(self.epoch_draws) if self.epoch_draws else self.train_count

    def language_of(self, csv_file: str) -> str:
        return self.file_languages.get(csv_file, self.language)

    def dataset_of(self, csv_file: str) -> int:
        return self.file_datasets.get(csv_file, 0)

    @property
    def ok(self) -> bool:
        return not self.file_errors and self.train_count >= 1 and self.eval_count >= 1

    def summary(self) -> str:
        """Why the dataset is not ready (if it is not) first, then the counts, the notes and the warnings."""
        dataset_level = [p for p in self.problems if p.file_level or p.line == 0]
        lines = [f"ERROR: {p.reason}" for p in dataset_level if p.severity == "error"]
        lines.append(
            f"{self.rows_usable} of {self.rows_read} rows usable ({self.minutes:.1f} min of audio); "
            f"{self.train_count} for training, {self.eval_count} for evaluation."
        )
        dropped = self.rows_read - self.rows_usable
        if dropped:
            lines.append(f"{dropped} rows will not be used: {_top(Counter(self.drop_counts))}.")
        warnings = Counter(self.problem_counts) - Counter(self.drop_counts)
        if warnings:
            lines.append(f"Warnings (the rows are used): {_top(warnings)}.")
        lines += self.notes
        lines += [f"WARNING: {p.reason}" for p in dataset_level if p.severity != "error"]
        return "\n".join(lines)

    def problems_table(self) -> list[dict[str, object]]:
        return [p.to_dict() for p in self.problems]

    def to_dict(self) -> dict[str, object]:
        return {
            "rows_read": self.rows_read,
            "rows_usable": self.rows_usable,
            "rows_train": self.train_count,
            "rows_eval": self.eval_count,
            "minutes": round(self.minutes, 3),
            "language": self.language,
            "audio_check": self.audio_check,
            "notes": self.notes,
            "histogram": self.histogram,
            "problem_counts": self.problem_counts,
            "problems": self.problems_table(),
            **({"datasets": self.datasets, "rows_per_epoch": self.epoch_rows} if self.datasets else {}),
        }

    def fingerprint(self) -> str:
        """A digest of what training reads, by content, not by path: each usable row's split, text and
        speaker, and its audio (size and first 64 KiB, which hold the header and the start of the samples).
        The same dataset moved to another folder has the same fingerprint; other rows or clips do not.
        The clips' heads come from the check when it read them (or its cache), else from the files."""
        if self._fingerprint:
            return self._fingerprint
        digest = hashlib.sha256()
        for split, row, _ in self.iter_usable_splits():
            known = self._heads.get(row.audio_location)
            if known is not None:
                size, head = known[0], bytes.fromhex(known[1])
            else:
                try:
                    size = os.path.getsize(row.audio_location)
                    with open(row.audio_location, "rb") as handle:
                        head = hashlib.sha256(handle.read(65536)).digest()
                except OSError:
                    size, head = -1, hashlib.sha256(b"").digest()
            digest.update(f"{split}\0{row.text}\0{row.speaker_name}\0{size}\0".encode())
            digest.update(head)
        self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def iter_usable(self, split: str) -> Iterator[tuple[CsvRow, float]]:
        """Re-read the CSV(s) and yield (row, duration) for the usable rows of `split` ("train"/"eval")."""
        if split not in ("train", "eval"):
            raise ValueError("split must be 'train' or 'eval'")
        for row_split, row, duration in self.iter_usable_splits():
            if row_split == split:
                yield row, duration

    def iter_usable_splits(self) -> Iterator[tuple[str, CsvRow, float]]:
        """(split, row, duration) of every usable row, reading each CSV once."""
        for usable in self._train + self._eval:
            is_train_file = any(usable is u for u in self._train)
            picks = self._eval_picks.get(usable.csv_file, np.zeros(0, dtype=np.int64))
            lines, durations = usable.lines, usable.durations
            at = 0  # rows arrive in line order, as the usable lines were recorded: walk both together
            for row in iter_rows(usable.csv_file, usable.layout):
                if not isinstance(row, CsvRow):
                    continue
                while at < len(lines) and lines[at] < row.line:
                    at += 1
                if at == len(lines):
                    break
                if lines[at] != row.line:
                    continue
                in_eval = (not is_train_file) or _contains(picks, row.line)
                yield ("eval" if in_eval else "train"), row, float(durations[at])


def _top(counts: Counter, shown: int = 3) -> str:
    """The most common kinds of reason, each whole ("2 × Clip is 0.36–0.54 s, shorter than 1 s"), and how many
    rows the others hold; "; " between them, as a reason may hold a comma."""
    top = counts.most_common(shown)
    text = "; ".join(f"{n} × {reason}" for reason, n in top)
    rest = sum(counts.values()) - sum(n for _, n in top)
    return text + (f"; {rest} × other reasons (see the rows)" if rest else "")


def _contains(sorted_values: np.ndarray, value: int) -> bool:
    i = int(np.searchsorted(sorted_values, value))
    return i < len(sorted_values) and int(sorted_values[i]) == value
