"""Dataset validation: every row checked before training, every rejected row explained.

`validate_dataset` reads the user's CSV(s) and audio, never writes, and returns a `DatasetReport`
with row-level problems (line numbers as an editor shows them). It streams the files, keeping only
compact arrays per usable row, so a CSV of a million rows validates in bounded memory.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utils.audio.checks import SILENCE_DBFS, probe_audio
from utils.audio.io import AudioError
from utils.constants import MAX_AUDIO_LENGTH, MAX_TEXT_TOKENS, MIN_CLIP_SECONDS, XTTS_SAMPLE_RATE
from utils.data.csv_reader import CsvLayout, CsvRow, Problem, detect_layout, is_windows_drive_path, iter_rows
from utils.text.languages import canonical_language, char_limit, is_known_language, is_valid_language_code

EVAL_FRACTION = 0.15
# Above this many rows, audio is checked from file headers only (existence, format, duration):
# decoding every clip of a large corpus would take hours before training could start.
FULL_AUDIO_CHECK_MAX_ROWS = 20_000
# Problems kept row by row; beyond this only their count by reason is kept (bounded memory).
MAX_LISTED_PROBLEMS = 2_000
HISTOGRAM_EDGES = tuple(range(0, 13))  # 1-second bins, 0-12 s; longer clips land in the last bin

ProgressCallback = Callable[[int, int, str], None]


@dataclass
class _UsableRows:
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
            setattr(self, name, array(column.typecode, np.frombuffer(column, dtype=column.typecode)[mask].tobytes())
                    if len(column) else column)  # fmt: skip


def _path_hash(location: str) -> int:
    return int.from_bytes(hashlib.blake2b(location.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little", signed=True)  # fmt: skip


@dataclass
class DatasetReport:
    """What `validate_dataset` found. `problems` holds at most MAX_LISTED_PROBLEMS rows;
    `problem_counts` counts every problem by reason."""

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
    _train: list[_UsableRows] = field(default_factory=list, repr=False)
    _eval: list[_UsableRows] = field(default_factory=list, repr=False)
    _eval_picks: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # sorted line numbers
    layouts: dict[str, CsvLayout] = field(default_factory=dict, repr=False)

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
    def ok(self) -> bool:
        return not self.file_errors and self.train_count >= 1 and self.eval_count >= 1

    def summary(self) -> str:
        dropped = self.rows_read - self.rows_usable
        lines = [
            f"{self.rows_usable} of {self.rows_read} rows usable ({self.minutes:.1f} min of audio); "
            f"{self.train_count} for training, {self.eval_count} for evaluation.",
        ]
        if dropped:
            top = ", ".join(f"{n} × {reason}" for reason, n in Counter(self.problem_counts).most_common(3))
            lines.append(f"{dropped} rows will not be used: {top}.")
        lines += self.notes
        lines += [f"{p.severity.upper()}: {p.reason}" for p in self.problems if p.file_level or p.line == 0]
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
        }

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


def _contains(sorted_values: np.ndarray, value: int) -> bool:
    i = int(np.searchsorted(sorted_values, value))
    return i < len(sorted_values) and int(sorted_values[i]) == value


def _audio_problem(row: CsvRow, message: str) -> str:
    """Explain a missing file with what the user most likely got wrong."""
    if message != "file not found":
        return f"Audio {message}."
    written = row.audio_file
    if is_windows_drive_path(written.replace("\\", "/")):
        return (f"Audio not found: {written} is a Windows path; on this machine write it relative to the "
                "CSV's folder (e.g. wavs/clip.wav).")  # fmt: skip
    parts = [part for part in written.replace("\\", "/").split("/") if part]
    if len(parts) > 1 and parts[0] == os.path.basename(os.path.dirname(row.csv_file)):
        return (f"Audio not found at {row.audio_location}: the path repeats the CSV's folder name; paths are "
                "relative to the folder the CSV is in.")  # fmt: skip
    return f"Audio not found at {row.audio_location}."


class _TextChecker:
    """Checks a row's text as the model will see it: after the run's front end, against the
    language's character limit and, when a vocab is given, for unknown characters and token count."""

    def __init__(self, language: str, frontend: Any, vocab_path: str | os.PathLike | None) -> None:
        self.language = language
        self.frontend = frontend
        self.limit = char_limit(language, phonemized=bool(getattr(frontend, "phonemized", False)))
        self.tokenizer = None
        if vocab_path is not None and Path(vocab_path).is_file():
            from utils.text.tokenizer import tokenizer_for

            try:
                tokenizer = tokenizer_for(vocab_path, language)
            except Exception as exc:  # noqa: BLE001 - the tokenizers library raises a bare Exception
                raise ValueError(f"{vocab_path} is not a readable XTTS vocab.json ({exc}). Download it again, "
                                 "or delete it to have it fetched.") from exc  # fmt: skip
            lang_token = "[zh-cn]" if language.startswith("zh") else f"[{language.split('-')[0]}]"
            # A language the vocab lacks gets its own tokens before training: nothing to check yet.
            if tokenizer.tokenizer.token_to_id(lang_token) is not None:
                self.tokenizer = tokenizer

    def check(self, raw: str) -> list[tuple[str, str]]:
        text = raw.strip()
        if not text:
            return [("error", "Text is empty.")]
        if self.frontend is not None:
            text = self.frontend.apply(text)
        found = []
        if len(text) > self.limit:
            found.append(("error", f"Text has {len(text)} characters, over the {self.limit}-character limit for "
                          f"'{self.language}': XTTS would cut the speech short. Split the clip and its text."))  # fmt: skip
        if self.tokenizer is not None:
            found += self._check_tokens(text)
        return found

    def _check_tokens(self, text: str) -> list[tuple[str, str]]:
        quiet = logging.getLogger("TTS.tts.layers.xtts.tokenizer")
        level, quiet.level = quiet.level, logging.ERROR  # its length warning is reported above
        try:
            ids = self.tokenizer.encode(text, self.language)
        finally:
            quiet.level = level
        found = []
        if 1 in ids:  # [UNK]: the trainer's dataset drops such a row
            cleaned = self.tokenizer.preprocess_text(text, self.language.split("-")[0])
            unknown = sorted({ch for ch in cleaned if not ch.isspace() and self.tokenizer.tokenizer.token_to_id(ch) is None})
            found.append(("error", f"Text has characters the model's vocabulary lacks ({' '.join(unknown[:12])}): "
                          "the trainer would skip this row. Remove or transliterate them."))  # fmt: skip
        if len(ids) > MAX_TEXT_TOKENS:
            found.append(("error", f"Text is {len(ids)} tokens, over the trainer's {MAX_TEXT_TOKENS}-token limit: "
                          "it would skip this row. Split the clip and its text."))  # fmt: skip
        return found


def _check_row(row: CsvRow, text_checker: _TextChecker, max_seconds: float, full: bool) -> tuple[float | None, list[tuple[str, str]]]:
    """(duration or None if unusable, [(severity, reason)])."""
    found = text_checker.check(row.text)
    try:
        info = probe_audio(row.audio_location, full=full)
    except AudioError as exc:
        found.append(("error", _audio_problem(row, str(exc))))
        return None, found
    duration = info.duration
    if duration < MIN_CLIP_SECONDS:
        found.append(("error", f"Clip is {duration:.2f} s, shorter than {MIN_CLIP_SECONDS:.0f} s."))
    if duration * XTTS_SAMPLE_RATE > max_seconds * XTTS_SAMPLE_RATE + 0.5:
        found.append(("error", f"Clip is {duration:.2f} s, longer than the {max_seconds:.2f} s limit "
                      "(max_audio_length): the trainer would silently skip it. Cut it into shorter clips."))  # fmt: skip
    if info.rms_dbfs is not None and info.rms_dbfs < SILENCE_DBFS:
        level = "digital silence" if math.isinf(info.rms_dbfs) else f"{info.rms_dbfs:.0f} dBFS"
        found.append(("error", f"Clip is silent ({level})."))
    if info.sample_rate < 16000:
        found.append(("warning", f"Sample rate is {info.sample_rate} Hz; it will be upsampled to 22050 Hz, "
                      "which cannot restore the missing high frequencies."))  # fmt: skip
    if info.peak is not None and info.peak >= 0.999:
        found.append(("warning", "Clip reaches full scale: it may be clipped (distorted)."))
    usable = not any(severity == "error" for severity, _ in found)
    return (duration if usable else None), found


def _count_rows(layouts: dict[Path, CsvLayout], index_dir: str | os.PathLike | None) -> int:
    """Data lines across the files, for progress and for choosing the audio check depth."""
    total = 0
    for path, layout in layouts.items():
        has_header = layout.has_header
        if index_dir is not None:
            from utils.data.csv_index import CsvRowIndex

            with CsvRowIndex.open(path, index_dir, has_header=has_header) as index:
                total += len(index)
            continue
        with open(path, "rb") as handle:
            total += sum(1 for raw in handle if raw.strip()) - int(has_header)
    return total


def _check_paths(train_csv: object, eval_csv: object) -> tuple[Path, Path | None]:
    if not train_csv or not str(train_csv).strip():
        raise ValueError("train_csv is empty: give the path of your metadata CSV (audio_file|text|speaker_name).")
    train = Path(str(train_csv)).expanduser()
    if not train.is_file():
        raise ValueError(f"train_csv not found: {train}. Check the path (relative paths start from {Path.cwd()}).")
    evaluation = None
    if eval_csv and str(eval_csv).strip():
        evaluation = Path(str(eval_csv)).expanduser()
        if not evaluation.is_file():
            raise ValueError(f"eval_csv not found: {evaluation}. Leave it empty to hold out 15% of the train rows.")
    if evaluation is not None and evaluation.resolve() == train.resolve():
        raise ValueError("eval_csv is the same file as train_csv: leave eval_csv empty to hold out 15% of the rows, "
                         "or give a separate file.")  # fmt: skip
    for path in filter(None, (train, evaluation)):
        if path.stat().st_size == 0:
            raise ValueError(f"{path} is empty: it needs a header line and at least one row.")
    return train, evaluation


def validate_dataset(
    train_csv: str | os.PathLike,
    eval_csv: str | os.PathLike | None = None,
    language: str = "en",
    max_audio_length: int = MAX_AUDIO_LENGTH,
    *,
    audio_check: str = "auto",
    seed: int = 1,
    text_frontend: Any = None,
    vocab_path: str | os.PathLike | None = None,
    index_dir: str | os.PathLike | None = None,
    progress: ProgressCallback | None = None,
) -> DatasetReport:
    """Check a dataset row by row; read-only. See the module docstring.

    audio_check: "full" decodes every clip (decodes, silence, level), "header" reads durations from
    file headers only, "auto" is full up to FULL_AUDIO_CHECK_MAX_ROWS rows.
    text_frontend: the run's TextFrontEnd; text is checked as the model will see it.
    vocab_path: the model's vocab.json; rows with characters it lacks or over the token limit are errors.
    index_dir: where to cache each CSV's row-offset index (never beside the CSV); with it, the row
    count for progress comes from the cached index instead of a counting pass over the file.
    """
    train_path, eval_path = _check_paths(train_csv, eval_csv)
    if max_audio_length < XTTS_SAMPLE_RATE * MIN_CLIP_SECONDS:
        raise ValueError(f"max_audio_length is {max_audio_length} samples; it must be at least "
                         f"{int(XTTS_SAMPLE_RATE * MIN_CLIP_SECONDS)} (1 s at 22050 Hz).")  # fmt: skip
    lang = canonical_language(language)
    paths = [p for p in (train_path, eval_path) if p is not None]
    layouts = {path: detect_layout(path) for path in paths}
    total = _count_rows(layouts, index_dir)
    if audio_check == "auto":
        audio_check = "full" if total <= FULL_AUDIO_CHECK_MAX_ROWS else "header"
    if audio_check not in ("full", "header"):
        raise ValueError("audio_check must be 'auto', 'full' or 'header'.")
    full = audio_check == "full"
    max_seconds = max_audio_length / XTTS_SAMPLE_RATE
    text_checker = _TextChecker(lang, text_frontend, vocab_path)

    problems: list[Problem] = []
    counts: Counter[str] = Counter()
    notes: list[str] = []
    if not full:
        notes.append(f"{total} rows: audio checked from file headers only (existence, format, duration); "
                     "silence and decoding are checked when training reads each clip.")  # fmt: skip

    def report_problem(problem: Problem) -> None:
        counts[_reason_key(problem.reason)] += 1
        if len(problems) < MAX_LISTED_PROBLEMS:
            problems.append(problem)

    if not is_valid_language_code(lang):
        report_problem(Problem(0, "", "error", f"Language code {language!r} is not a language code "
                               "(use ISO 639: 'en', 'es', 'amh', ...)."))  # fmt: skip
    elif not is_known_language(lang):
        report_problem(Problem(0, "", "warning", f"'{lang}' is not one of the 17 languages of the XTTS v2 "
                               f"base model: a new language token [{lang}] and vocabulary will be added."))  # fmt: skip

    rows_read = 0
    usable_count, usable_seconds = 0, 0.0
    histogram = [0] * len(HISTOGRAM_EDGES)
    usable_by_file: dict[str, _UsableRows] = {}
    done = 0
    for path, layout in layouts.items():
        for note in layout.notes:
            notes.append(f"{path.name}: {note}")
        for problem in layout.problems:
            report_problem(Problem(problem.line, problem.audio_file, problem.severity, problem.reason, str(path),
                                   file_level=True))  # fmt: skip
        if any(p.severity == "error" for p in layout.problems):
            continue
        usable = usable_by_file.setdefault(str(path), _UsableRows(str(path), layout))
        for row in iter_rows(path, layout):
            done += 1
            if progress and done % 200 == 0:
                progress(done, total, f"Checking {path.name}")
            if isinstance(row, Problem):
                rows_read += 1
                report_problem(row)
                continue
            if row.line == 0:
                continue
            rows_read += 1
            duration, found = _check_row(row, text_checker, max_seconds, full)
            for severity, reason in found:
                report_problem(Problem(row.line, row.audio_file, severity, reason, str(path)))
            if duration is None:
                continue
            usable.lines.append(row.line)
            usable.durations.append(duration)
            usable.hashes.append(_path_hash(row.audio_location))
    if progress:
        progress(total, total, "Checked")
    for duplicate in _drop_duplicate_audio(list(usable_by_file.values())):
        report_problem(duplicate)
    for usable in usable_by_file.values():
        for duration in usable.durations:
            usable_count += 1
            usable_seconds += duration
            histogram[min(int(duration), len(HISTOGRAM_EDGES) - 1)] += 1

    train_usable = [usable_by_file[str(train_path)]] if str(train_path) in usable_by_file else []
    eval_usable = [usable_by_file[str(eval_path)]] if eval_path and str(eval_path) in usable_by_file else []
    eval_picks: dict[str, np.ndarray] = {}
    if eval_path is None and train_usable:
        lines = np.frombuffer(train_usable[0].lines, dtype=np.int64)
        if len(lines) >= 2:
            k = max(1, round(len(lines) * EVAL_FRACTION))
            eval_picks[str(train_path)] = np.sort(np.random.default_rng(seed).choice(lines, size=k, replace=False))
            notes.append(f"No eval CSV: {k} of {len(lines)} usable rows ({EVAL_FRACTION:.0%}) held out for evaluation.")
    rows_usable = usable_count
    file_order = {str(p): i for i, p in enumerate(paths)}
    problems.sort(key=lambda p: (file_order.get(p.csv_file, -1), p.line))
    report = DatasetReport(
        rows_read=rows_read,
        rows_usable=rows_usable,
        minutes=usable_seconds / 60,
        problems=problems,
        histogram={"edges_s": list(HISTOGRAM_EDGES), "counts": histogram},
        language=lang,
        notes=notes,
        problem_counts=dict(counts),
        audio_check=audio_check,
        max_audio_length=max_audio_length,
        _train=train_usable,
        _eval=eval_usable,
        _eval_picks=eval_picks,
        layouts={str(path): layout for path, layout in layouts.items()},
    )
    if rows_usable and report.eval_count == 0 and eval_path is None:
        report_problem(Problem(0, "", "error", "Only one usable row: at least two are needed (one to train, "
                               "one to evaluate)."))  # fmt: skip
        report.problems = problems
    return report


def _drop_duplicate_audio(files: list[_UsableRows]) -> list[Problem]:
    """Keep the first row of each audio file (across train and eval); a warning for each other row.

    Works on the 8-byte path hashes, sorted, so a million rows need no dictionary of paths."""
    if not files or not any(len(u.hashes) for u in files):
        return []
    keys = np.concatenate([np.frombuffer(u.hashes, dtype=np.int64) for u in files])
    owner = np.concatenate([np.full(len(u.hashes), i) for i, u in enumerate(files)])
    position = np.concatenate([np.arange(len(u.hashes)) for u in files])
    order = np.argsort(keys, kind="stable")  # stable: the first file's and line's row comes first
    repeats = np.flatnonzero(keys[order][1:] == keys[order][:-1]) + 1
    if not len(repeats):
        return []
    group_start = np.maximum.accumulate(np.where(np.r_[True, keys[order][1:] != keys[order][:-1]],
                                                 np.arange(len(order)), 0))  # fmt: skip
    masks = [np.ones(len(u.hashes), dtype=bool) for u in files]
    wanted: dict[int, dict[int, str]] = {}
    for r in repeats:
        this, first = order[r], order[group_start[r]]
        masks[owner[this]][position[this]] = False
        first_file = files[owner[first]]
        where = f"line {first_file.lines[position[first]]}"
        if owner[first] != owner[this]:
            where += f" of {Path(first_file.csv_file).name}"
        wanted.setdefault(int(owner[this]), {})[int(files[owner[this]].lines[position[this]])] = where
    problems = []
    for index, lines in wanted.items():
        for row in iter_rows(files[index].csv_file, files[index].layout):  # once per file with duplicates
            if isinstance(row, CsvRow) and row.line in lines:
                problems.append(Problem(row.line, row.audio_file, "warning", f"Same audio file as {lines[row.line]}: "
                                        "only the first is used.", files[index].csv_file))  # fmt: skip
    for usable, mask in zip(files, masks):
        usable.keep(mask)
    return problems


def _reason_key(reason: str) -> str:
    """Group similar reasons for the summary ("Clip is 0.42 s, shorter..." -> "Clip is shorter...")."""
    words = [w for w in reason.split() if not any(ch.isdigit() for ch in w) and "/" not in w]
    return " ".join(words[:6]).rstrip(".,:")
