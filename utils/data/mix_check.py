"""The check of a run's datasets: one CSV as `validate_dataset` checks it, several (utils.data.mix) each on its own,
with its language's text checks, and joined into one `DatasetReport`."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from utils.data.csv_reader import CsvRow, Problem, iter_rows
from utils.data.duplicates import drop_duplicate_audio
from utils.data.mix import DatasetEntry, dataset_entries, draw_counts, is_mix, mix_fingerprint, shares_note
from utils.data.report import CheckStats, DatasetReport
from utils.data.validation import validate_dataset

SAME_CLIP = "Same audio file as a row of an earlier dataset: used once"  # the kind the summary counts
# Keywords of validate_dataset that depend on the dataset's language (utils.data.text_checks).
OptionsFor = Callable[[str], dict[str, Any]]


def validate_datasets(
    train_csv: Any,
    eval_csv: Any,
    language: str,
    max_audio_length: int,
    *,
    options_for: OptionsFor | None = None,
    progress: Any = None,
    **keywords: Any,
) -> DatasetReport:
    """validate_dataset of one CSV, or of each dataset of a list (see the module docstring). `options_for(language)`
    gives the language's text-check keywords (text_frontend, vocab_path)."""
    options_for = options_for or (lambda _language: {})
    if not is_mix(train_csv):
        return validate_dataset(
            train_csv,
            eval_csv or None,
            language,
            max_audio_length,
            progress=progress,
            **options_for(language),
            **keywords,
        )
    entries = dataset_entries(train_csv, eval_csv, language)
    reports = []
    for index, entry in enumerate(entries):
        step = _dataset_progress(progress, index, len(entries), entry)
        reports.append(
            validate_dataset(
                entry.csv,
                entry.eval_csv or None,
                entry.language,
                max_audio_length,
                progress=step,
                **options_for(entry.language),
                **keywords,
            )
        )
    return join_reports(entries, reports)


def _dataset_progress(progress: Any, index: int, count: int, entry: DatasetEntry) -> Any:
    if progress is None:
        return None
    return lambda done, total, text: progress(done, total, f"dataset {index + 1} of {count} ({entry.name}): {text}")


def join_reports(entries: list[DatasetEntry], reports: list[DatasetReport]) -> DatasetReport:
    """One report of several datasets' reports: their rows, problems and counts together, a row naming audio that an
    earlier dataset already has dropped (and said), each dataset's summary in `datasets`."""
    problems: list[Problem] = []
    notes: list[str] = []
    for entry, report in zip(entries, reports):
        problems += report.problems
        notes += [f"{entry.name}: {note}" for note in report.notes]
    usable = [u for report in reports for u in (*report._train, *report._eval)]
    before = [len(u.lines) for u in usable]
    duplicates = drop_duplicate_audio(usable)
    problems += [
        dataclasses.replace(p, reason=p.reason + " (the same clip in two datasets is used once)") for p in duplicates
    ]
    picks = {k: v for report in reports for k, v in report._eval_picks.items()}
    for u in usable:  # a held-out row that another dataset already has is gone from both splits
        if u.csv_file in picks:
            picks[u.csv_file] = picks[u.csv_file][np.isin(picks[u.csv_file], np.frombuffer(u.lines, dtype=np.int64))]
    dropped_as_duplicates = sum(before) - sum(len(u.lines) for u in usable)
    histogram = np.sum([r.histogram["counts"] for r in reports], axis=0).tolist()
    joined = DatasetReport(
        rows_read=sum(r.rows_read for r in reports),
        rows_usable=sum(r.rows_usable for r in reports) - dropped_as_duplicates,
        minutes=sum(r.minutes for r in reports),
        problems=problems,
        histogram={"edges_s": reports[0].histogram["edges_s"], "counts": histogram},
        language=entries[0].language,
        notes=notes,
        problem_counts=dict(sum((Counter(r.problem_counts) for r in reports), Counter())),
        audio_check=reports[0].audio_check,
        max_audio_length=reports[0].max_audio_length,
        _train=[u for r in reports for u in r._train],
        _eval=[u for r in reports for u in r._eval],
        _eval_picks=picks,
        layouts={k: v for r in reports for k, v in r.layouts.items()},
        drop_counts=dict(sum((Counter(r.drop_counts) for r in reports), Counter())),
        check=_joined_stats([r.check for r in reports]),
        _heads={k: v for r in reports for k, v in r._heads.items()},
        file_datasets={u.csv_file: i for i, r in enumerate(reports) for u in (*r._train, *r._eval)},
        file_languages={u.csv_file: e.language for e, r in zip(entries, reports) for u in (*r._train, *r._eval)},
    )
    if duplicates:
        joined.problem_counts[SAME_CLIP] = joined.problem_counts.get(SAME_CLIP, 0) + len(duplicates)
        joined.drop_counts[SAME_CLIP] = joined.drop_counts.get(SAME_CLIP, 0) + len(duplicates)
        joined.notes.append(f"{len(duplicates)} rows name a clip an earlier dataset already has: each is used once.")
    train_rows = [_train_rows(joined, r) for r in reports]
    joined.epoch_draws = draw_counts(train_rows, entries)
    joined.datasets = [
        {
            "csv": entry.csv,
            "name": entry.name,
            "language": entry.language,
            "rate": entry.rate(),
            "rows_usable": report.rows_usable,
            "rows_train": rows,
            "minutes": round(report.minutes, 2),
            "rows_per_epoch": drawn,
            "speakers": _speakers(joined, report),
        }
        for entry, report, rows, drawn in zip(entries, reports, train_rows, joined.epoch_draws)
    ]
    joined.notes.insert(0, shares_note(entries, joined.epoch_draws))
    joined._fingerprint = mix_fingerprint((e, r.fingerprint()) for e, r in zip(entries, reports))
    return joined


def _train_rows(joined: DatasetReport, report: DatasetReport) -> int:
    return sum(len(u.lines) for u in report._train) - sum(
        len(joined._eval_picks.get(u.csv_file, ())) for u in report._train
    )


def _speakers(joined: DatasetReport, report: DatasetReport) -> list[str]:
    files = {u.csv_file for u in (*report._train, *report._eval)}
    names: list[str] = []
    for usable in joined._train + joined._eval:
        if usable.csv_file not in files:
            continue
        for row in iter_rows(usable.csv_file, usable.layout):
            if isinstance(row, CsvRow) and (row.speaker_name or "speaker") not in names:
                names.append(row.speaker_name or "speaker")
    return names


def _joined_stats(stats: list[CheckStats]) -> CheckStats:
    return CheckStats(
        cache_hit=all(s.cache_hit for s in stats),
        decoded=sum(s.decoded for s in stats),
        served=sum(s.served for s in stats),
        workers=max(s.workers for s in stats),
        pids=sorted({p for s in stats for p in s.pids}),
        deaths=[d for s in stats for d in s.deaths],
        seconds=sum(s.seconds for s in stats),
    )
