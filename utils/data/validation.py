"""Dataset validation: every row checked before training, every rejected row explained.

`validate_dataset` reads the user's CSV(s) and audio, never writes, and returns a `DatasetReport`
with row-level problems (line numbers as an editor shows them). It streams the files, keeping only
compact arrays per usable row, so a CSV of a million rows validates in bounded memory. A wrong
option (language, max_audio_length, audio_check, a missing file) is a ValueError before any file is
read; a dataset that is not ready always carries a dataset-level error saying why.

The parts: csv_reader (rows), row_checks (one row's text and audio), duplicates (rows naming the same
audio), report (DatasetReport), and here the pass over the files and the train/eval split.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utils.constants import MAX_AUDIO_LENGTH, MIN_CLIP_SECONDS, XTTS_SAMPLE_RATE
from utils.data import check_cache
from utils.data.clip_probe import ClipProbes, probe_clip
from utils.data.csv_reader import CsvLayout, CsvRow, Problem, detect_layout, iter_rows
from utils.data.csv_text import bounded_lines, raw_lines
from utils.data.duplicates import drop_duplicate_audio, path_hash
from utils.data.pool import ClipPool
from utils.data.progress import CountedProgress
from utils.data.reasons import ReasonCounts
from utils.data.report import HISTOGRAM_EDGES, CheckStats, DatasetReport, UsableRows
from utils.data.row_checks import TextChecker, check_row_audio, check_row_text, probe_limit
from utils.text.languages import canonical_language, is_known_language, is_valid_language_code
from utils.text.visible import with_visible_errors

__all__ = [
    "EVAL_FRACTION",
    "MAX_EVAL_ROWS",
    "FULL_AUDIO_CHECK_MAX_ROWS",
    "HISTOGRAM_EDGES",
    "MAX_LISTED_PROBLEMS",
    "DatasetReport",
    "check_options",
    "validate_dataset",
]

EVAL_FRACTION = 0.15
MAX_EVAL_ROWS = 256  # the most rows held out for evaluation, and the most an eval-loss pass runs over
# Above this many rows, audio is checked from file headers only (existence, format, duration):
# decoding every clip of a large corpus would take hours before training could start.
FULL_AUDIO_CHECK_MAX_ROWS = 20_000
# Problems kept row by row; beyond this only their count by reason is kept (bounded memory).
MAX_LISTED_PROBLEMS = 2_000

ProgressCallback = Callable[[int, int, str], None]


def check_options(language: object, max_audio_length: object, audio_check: object = "auto") -> str:
    """The canonical language code, or a ValueError saying which option to change (nothing is read)."""
    if not isinstance(language, str) or not is_valid_language_code(language):
        raise ValueError(f"Language code {language!r} is not a language code (use ISO 639: 'en', 'es', 'amh', ...).")
    minimum = int(XTTS_SAMPLE_RATE * MIN_CLIP_SECONDS)
    if (
        isinstance(max_audio_length, bool)
        or not isinstance(max_audio_length, (int, float))
        or not math.isfinite(max_audio_length)
        or max_audio_length < minimum
    ):
        raise ValueError(
            f"max_audio_length is {max_audio_length!r} samples; it must be at least {minimum} "
            f"(1 s at {XTTS_SAMPLE_RATE} Hz)."
        )
    if audio_check not in ("auto", "full", "header"):
        raise ValueError(f"audio_check is {audio_check!r}; it must be 'auto', 'full' or 'header'.")
    return canonical_language(language)


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
        raise ValueError(
            "eval_csv is the same file as train_csv: leave eval_csv empty to hold out 15% of the rows, "
            "or give a separate file."
        )
    for path in filter(None, (train, evaluation)):
        try:
            with open(path, "rb") as handle:
                empty = not handle.read(1)
        except OSError as exc:
            raise ValueError(f"{path} cannot be read ({exc.strerror or exc}): check its permissions.") from exc
        if empty:
            raise ValueError(f"{path} is empty: it needs a header line and at least one row.")
    return train, evaluation


def _count_rows(layouts: dict[Path, CsvLayout], index_dir: str | os.PathLike | None) -> int:
    """Non-blank data lines across the files, for progress and for choosing the audio check depth
    (a row with a line break inside counts its lines: this is an estimate, rows are counted exactly
    as they are read)."""
    total = 0
    for path, layout in layouts.items():
        has_header = layout.has_header
        if layout.cr_only:  # the offset index and the binary count split at LF only
            total += sum(1 for _, raw in raw_lines(path) if raw.strip()) - int(has_header)
        elif index_dir is not None:
            from utils.data.csv_index import CsvRowIndex

            with CsvRowIndex.open(path, index_dir, has_header=has_header) as index:
                total += len(index)
        else:
            with open(path, "rb") as handle:
                total += sum(1 for raw in bounded_lines(handle) if raw.strip()) - int(has_header)
    return max(total, 0)


@dataclass
class _ProblemLog:
    """Row problems counted by the kind of their reason (utils.data.reasons), the first MAX_LISTED_PROBLEMS kept
    whole; problems about a whole file or the dataset (line 0 or file_level) are always kept and not counted as
    rows."""

    problems: list[Problem] = field(default_factory=list)
    reasons: ReasonCounts = field(default_factory=ReasonCounts)

    def add(self, problem: Problem, *, drops_row: bool = False) -> None:
        if problem.file_level or problem.line == 0:
            self.problems.append(problem)
            return
        self.reasons.add(problem, drops_row=drops_row or problem.severity == "error")
        if len(self.problems) < MAX_LISTED_PROBLEMS:
            self.problems.append(problem)


@dataclass
class _Pass:
    """One validation's settings and running totals."""

    text_checker: TextChecker
    max_seconds: float
    full: bool
    log: _ProblemLog
    progress: CountedProgress
    total: int
    audio_roots: tuple[Path, ...] = ()
    done: int = 0
    rows_read: int = 0
    probes: ClipProbes = field(default_factory=ClipProbes)
    pool: ClipPool = field(default_factory=lambda: ClipPool(1))
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def limit_s(self) -> float:
        return probe_limit(self.max_seconds)

    def needs_probe(self, row: CsvRow | Problem) -> bool:
        return isinstance(row, CsvRow) and self.probes.needs_opening(row, self.full, self.limit_s, self.audio_roots)


def _check_file(path: Path, layout: CsvLayout, run: _Pass) -> UsableRows:
    """Check every row of one CSV; the usable ones are kept as compact arrays. Clips are probed by the pool's
    workers (those without a probe that serves), rows are judged here in order."""
    usable = UsableRows(str(path), layout)
    rows = 0
    settings = (run.full, run.limit_s)
    rows_in = iter_rows(path, layout)
    for row, result in run.pool.map(probe_clip, rows_in, shared=settings, needs_work=run.needs_probe, total=run.total):
        rows += 1
        run.done += 1
        run.progress(min(run.done, run.total))
        if isinstance(row, Problem):
            run.log.add(row)
            continue
        found, readable = check_row_text(row, run.text_checker, run.audio_roots)
        duration = None
        if readable:
            probe = run.probes.of_row(row, result, run.full, run.limit_s)
            duration, found = check_row_audio(row, probe.info, run.max_seconds, found)
            if duration is not None and probe.head_sha256:
                run.heads[row.audio_location] = (probe.size, probe.head_sha256)
        for severity, reason in found:
            run.log.add(Problem(row.line, row.audio_file, severity, reason, str(path)))
        if duration is not None:
            usable.lines.append(row.line)
            usable.durations.append(duration)
            usable.hashes.append(path_hash(row.audio_location))
    run.rows_read += rows
    if rows == 0:
        what = "a header line but no data rows" if layout.has_header else "no data rows"
        run.log.add(
            Problem(
                0,
                "",
                "error",
                f"{path.name} has {what}: add one row per clip (audio_file|text|speaker_name).",
                str(path),
                file_level=True,
            )
        )
    return usable


def eval_rows_held_out(usable_rows: int) -> int:
    """How many of the train CSV's usable rows are held out when no eval CSV is given: EVAL_FRACTION of them,
    at least one, at most MAX_EVAL_ROWS (an eval split grows with the dataset no further: every eval-loss pass
    runs over all of it)."""
    return min(MAX_EVAL_ROWS, max(1, round(usable_rows * EVAL_FRACTION)))


def _hold_out(train: UsableRows | None, seed: int) -> tuple[dict[str, np.ndarray], str]:
    """The held-out rows of the train CSV (eval_rows_held_out), drawn with `seed`, as sorted line numbers."""
    if train is None or len(train.lines) < 2:
        return {}, ""
    lines = np.frombuffer(train.lines, dtype=np.int64)
    k = eval_rows_held_out(len(lines))
    picks = np.sort(np.random.default_rng(seed).choice(lines, size=k, replace=False))
    note = (
        f"No eval CSV: {k} of {len(lines)} usable rows ({EVAL_FRACTION:.0%}, at most {MAX_EVAL_ROWS}) "
        "held out for evaluation."
    )
    return {train.csv_file: picks}, note


def _readiness_errors(log: _ProblemLog, usable: dict[str, UsableRows], paths: list[Path], rows_read: int) -> list[str]:
    """Why a dataset with no file-level error still cannot train, so that 'not ready' always says why."""
    if any(p.severity == "error" and (p.file_level or p.line == 0) for p in log.problems):
        return []
    counts = [len(usable[str(p)].lines) if str(p) in usable else 0 for p in paths]
    if sum(counts) == 0:
        return [f"None of the {rows_read} rows is usable: each one's reason is listed by line."]
    found = []
    if counts[0] == 0:
        found.append(f"No usable row in the train CSV {paths[0].name}: training needs at least one.")
    if len(paths) > 1 and counts[1] == 0:
        found.append(
            f"No usable row in the eval CSV {paths[1].name}: evaluation needs at least one (or leave "
            "eval_csv empty to hold out 15% of the train rows)."
        )
    if len(paths) == 1 and counts[0] == 1:
        found.append("Only one usable row: at least two are needed (one to train, one to evaluate).")
    return found


def _build_report(
    run: _Pass,
    usable: dict[str, UsableRows],
    layouts: dict[Path, CsvLayout],
    notes: list[str],
    language: str,
    audio_check: str,
    max_audio_length: int,
    seed: int,
) -> DatasetReport:
    paths = list(layouts)
    for reason in _readiness_errors(run.log, usable, paths, run.rows_read):
        run.log.add(Problem(0, "", "error", reason))
    histogram = [0] * len(HISTOGRAM_EDGES)
    seconds = 0.0
    for rows in usable.values():
        for duration in rows.durations:
            seconds += duration
            histogram[min(int(duration), len(HISTOGRAM_EDGES) - 1)] += 1
    train = usable.get(str(paths[0]))
    eval_picks, note = _hold_out(train, seed) if len(paths) == 1 else ({}, "")
    notes += [note] if note else []
    for rows in usable.values() if len(paths) > 1 else ():
        if rows is not train and len(rows.lines) > MAX_EVAL_ROWS:
            notes.append(
                f"{Path(rows.csv_file).name}: {len(rows.lines)} usable eval rows; each eval-loss pass runs over "
                f"{MAX_EVAL_ROWS} of them, evenly spread."
            )
    file_order = {str(p): i for i, p in enumerate(paths)}
    run.log.problems.sort(key=lambda p: (file_order.get(p.csv_file, -1), p.line))
    problem_counts, drop_counts = run.log.reasons.labels()
    return DatasetReport(
        rows_read=run.rows_read,
        rows_usable=sum(histogram),
        minutes=seconds / 60,
        problems=run.log.problems,
        histogram={"edges_s": list(HISTOGRAM_EDGES), "counts": histogram},
        language=language,
        notes=notes,
        problem_counts=problem_counts,
        audio_check=audio_check,
        max_audio_length=max_audio_length,
        _train=[train] if train is not None else [],
        _eval=[usable[str(p)] for p in paths[1:] if str(p) in usable],
        _eval_picks=eval_picks,
        layouts={str(p): layout for p, layout in layouts.items()},
        drop_counts=drop_counts,
    )


HEADER_ONLY_NOTE = (
    "audio checked from file headers only (existence, format, duration); silence and decoding are "
    "checked when training reads each clip."
)


def new_language_note(lang: str) -> str:
    return (
        f"'{lang}' is not one of the 17 languages of the XTTS v2 base model: a new language token [{lang}] and "
        "vocabulary will be added."
    )


@with_visible_errors
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
    audio_roots: Sequence[str | os.PathLike] | None = None,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> DatasetReport:
    """Check a dataset row by row; read-only. See the module docstring.

    audio_check: "full" decodes every clip (decodes, silence, level), "header" reads durations from
    file headers only, "auto" is full up to FULL_AUDIO_CHECK_MAX_ROWS rows.
    text_frontend: the run's TextFrontEnd; text is checked as the model will see it.
    vocab_path: the model's vocab.json; rows with characters it lacks or over the token limit are errors.
    index_dir: where to cache each CSV's row-offset index (never beside the CSV); with it, the row
    count for progress comes from the cached index instead of a counting pass over the file.
    audio_roots: folders the audio must lie in (the web app's confinement); a row naming audio elsewhere is
    an error and its file is never opened. None: anywhere (a notebook's own files).
    cache_dir: where the check's result is kept by the dataset's fingerprint (utils.data.check_cache): an
    unchanged dataset is served from it without opening a clip, a changed one decodes only its changed clips.
    None: no cache (clips a prepared dataset recorded are still served).
    workers: processes probing the clips (None: every core; small datasets are checked in this process).
    should_stop: asked between clips; when it turns true the check ends with utils.data.pool.PoolStopped.
    The report's `check` says how the check was done (cache hit, clips decoded, worker processes).
    """
    started = time.monotonic()
    lang = check_options(language, max_audio_length, audio_check)
    train_path, eval_path = _check_paths(train_csv, eval_csv)
    layouts = {path: detect_layout(path) for path in (train_path, eval_path) if path is not None}
    options = check_cache.options_key(lang, max_audio_length, audio_check, seed, text_frontend, vocab_path, audio_roots)
    cached = check_cache.DatasetCache(cache_dir, list(layouts), options)
    if (report := cached.report()) is not None:
        report.check = CheckStats(cache_hit=True, served=len(cached.entry.clips), seconds=time.monotonic() - started)
        if progress:
            progress(report.rows_read, report.rows_read, "Served from the check cache: no clip changed")
        return report
    total = _count_rows(layouts, index_dir)
    if total > check_cache.CACHE_MAX_ROWS:
        cached.path = None
    if audio_check == "auto":
        audio_check = "full" if total <= FULL_AUDIO_CHECK_MAX_ROWS else "header"
    run = _Pass(
        TextChecker(lang, text_frontend, vocab_path),
        max_audio_length / XTTS_SAMPLE_RATE,
        audio_check == "full",
        _ProblemLog(),
        CountedProgress(progress, total, "checked", "rows"),
        total,
        tuple(Path(root).resolve() for root in audio_roots or ()),
        probes=ClipProbes(
            {**check_cache.prepared_probes(list(layouts)), **cached.known()}, collect=cached.path is not None
        ),
        pool=ClipPool(workers, should_stop=should_stop),
    )
    report = _check_files(run, layouts, lang, audio_check, int(max_audio_length), seed)
    cached.store(report, run.probes.used)
    report.check.seconds = time.monotonic() - started
    return report


def _check_files(
    run: _Pass, layouts: dict[Path, CsvLayout], lang: str, audio_check: str, max_audio_length: int, seed: int
) -> DatasetReport:
    """Every row of every CSV checked, the duplicates dropped, and the report."""
    notes = [] if run.full else [f"{run.total} rows: {HEADER_ONLY_NOTE}"]
    if not is_known_language(lang):
        run.log.add(Problem(0, "", "warning", new_language_note(lang)))
    usable: dict[str, UsableRows] = {}
    for path, layout in layouts.items():
        notes += [f"{path.name}: {note}" for note in layout.notes]
        for problem in layout.problems:
            run.log.add(dataclasses.replace(problem, csv_file=str(path), file_level=True))
        if not any(p.severity == "error" for p in layout.problems):
            usable[str(path)] = _check_file(path, layout, run)
    run.progress(run.total)
    for duplicate in drop_duplicate_audio(list(usable.values())):
        run.log.add(duplicate, drops_row=True)
    report = _build_report(run, usable, layouts, notes, lang, audio_check, max_audio_length, seed)
    report._heads = run.heads
    stats = run.pool.stats
    report.check = CheckStats(
        decoded=run.probes.decoded,
        served=run.probes.served_count,
        workers=stats.workers,
        pids=sorted(stats.pids),
        deaths=list(stats.deaths),
    )
    return report
