"""Check a dataset before training: transcribe each usable row, measure its audio, flag the rows to look at.

    from utils.quality.asr import get_transcriber
    from utils.quality.dataset_check import check_dataset
    from utils.data.prepare import prepare_dataset

    check = check_dataset("data/metadata.csv", language="en", transcriber=get_transcriber("large-v3"))
    for row in check.flagged:  # worst first
        print(row.audio_file, row.cer, row.transcript, row.problems)
    prepare_dataset("data/metadata.csv", "data/prepared", exclude=[check.flagged[0].audio_file],
                    corrections={check.flagged[1].audio_file: "the text it really says"})

A row is flagged when its transcript disagrees with its text (CER over ``threshold``, as in
:mod:`utils.quality.transcript_check`) or when a measure of its audio is an outlier
(:func:`utils.quality.audio_measures.flag_outliers`: clipping, very quiet, noisy, long edge silence, or
far from the rest of the dataset). Flagged rows come worst first: the highest CER first, then the rows
with the most audio problems. Each clip is decoded once, in a pool of worker processes (utils.data.pool) that
also predict its naturalness (DistillMOS, utils.quality.naturalness), while this process transcribes; the
user's files are only read. Without a transcription model the audio is still measured and ``transcript_reason``
says why there is no CER. Naturalness ranks clips that match their text and still sound wrong (distorted,
reverberant, noisy): a clip far below the rest is flagged with a suggestion, and ``min_naturalness`` flags every
clip under it and marks it to be excluded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from utils.audio.io import resample
from utils.constants import MAX_AUDIO_LENGTH
from utils.data.csv_reader import CsvRow
from utils.data.pool import ClipPool, PoolStats, TaskFailed
from utils.data.progress import CountedProgress
from utils.data.transcription import Transcriber, TranscriberUnavailable
from utils.quality.asr import transcribe_text
from utils.quality.audio_measures import ClipMeasures, flag_outliers
from utils.quality.clip_check import WHISPER_RATE, ClipCheck, ClipCheckSettings, check_clip
from utils.quality.intelligibility import cer
from utils.quality.naturalness_flags import flag_naturalness
from utils.quality.transcript_check import DEFAULT_THRESHOLD
from utils.text.languages import whisper_language

if TYPE_CHECKING:
    from utils.data.report import DatasetReport

Progress = Callable[[int, int, str], None]


@dataclass
class RowCheck:
    """One checked row: where it is, its text and transcript, its audio measures, and why it is flagged."""

    csv_file: str
    line: int
    audio_file: str  # as written in the CSV: the key prepare_dataset's exclude and corrections take
    audio: str  # the file it resolves to
    text: str
    transcript: str | None = None
    cer: float | None = None
    measures: ClipMeasures | None = None
    problems: list[str] = field(default_factory=list)
    naturalness: float | None = None  # predicted MOS (DistillMOS), 1 bad .. 5 excellent
    suggest_exclude: bool = False  # under the naturalness threshold: the table ticks its exclude box

    @property
    def flagged(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DatasetCheck:
    flagged: list[RowCheck]  # worst first
    checked: int  # rows decoded and measured
    threshold: float
    transcript_reason: str = ""  # why no row has a transcript (no transcription model)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (audio_file, why it could not be read)
    naturalness_median: float | None = None
    suggestion: str = ""  # clips far below the rest on naturalness, and the threshold that excludes them
    work: PoolStats = field(default_factory=PoolStats)  # the worker processes that decoded and measured
    # check_dataset: the validation whose usable rows were checked (with the run's options: the verdict Start gives)
    report: DatasetReport | None = None

    def summary(self) -> str:
        lines = [
            f"{len(self.flagged)} of {self.checked} rows flagged (transcript CER over {self.threshold:.0%}, "
            "or audio outliers), worst first."
        ]
        if self.transcript_reason:
            lines.append(f"Transcripts not checked: {self.transcript_reason}")
        if self.naturalness_median is not None:
            lines.append(f"Naturalness (predicted MOS, 1-5): median {self.naturalness_median:.2f}.")
        if self.suggestion:
            lines.append(self.suggestion)
        if self.skipped:
            lines.append(
                f"{len(self.skipped)} clip(s) could not be read: {self.skipped[0][0]} ({self.skipped[0][1]})"
                + (" and more" if len(self.skipped) > 1 else "")
                + "."
            )
        return "\n".join(lines)


class _Transcripts:
    """The transcriber until it proves unavailable; then None and the reason."""

    def __init__(self, transcriber: Transcriber | None, language: str | None, why: str | None = None) -> None:
        self.transcriber = transcriber
        self.reason = "" if transcriber is not None else (why or "no transcription model given")
        self.language = whisper_language(language) if language else None

    def __call__(self, wav, rate: int) -> str | None:
        if self.transcriber is None:
            return None
        try:
            return transcribe_text(self.transcriber, resample(wav, rate, WHISPER_RATE), WHISPER_RATE, self.language)
        except TranscriberUnavailable as exc:
            self.transcriber, self.reason = None, str(exc)
        except RuntimeError:  # a decoding failure of this clip only
            pass
        return None


def _row_check(row: CsvRow, clip: ClipCheck, transcripts: _Transcripts, language: str | None, threshold: float):
    record = RowCheck(
        row.csv_file,
        row.line,
        row.audio_file,
        row.audio_location,
        row.text,
        measures=clip.measures,
        naturalness=clip.naturalness,
    )
    if clip.wav16k is not None:
        record.transcript = transcripts(clip.wav16k, WHISPER_RATE)
    if record.transcript is not None:
        record.cer = cer(row.text, record.transcript, language)
        if record.cer > threshold:
            record.problems.append(f"transcript disagrees with the text (CER {record.cer:.0%})")
    return record


MAX_WORKERS = 512  # as Prepare's `workers` option


def _number(name: str, value: object, low: float, high: float | None, meaning: str, *, whole: bool = False) -> None:
    """A ValueError naming the argument, its value and the range it takes, unless `value` is a number in it."""
    kind = "a whole number" if whole else "a number"
    span = f"from {low:g} to {high:g}" if high is not None else f"of {low:g} or more"
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float) if not whole else int)
        and math.isfinite(value)
        and low <= value <= (high if high is not None else math.inf)
    )
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else f"{shown[:60]}... ({len(shown):,} characters)"
        raise ValueError(f"{name} must be {kind} {span} ({meaning}); got {shown}.")


def check_settings(threshold: object, min_naturalness: object, workers: object) -> None:
    """The check's numeric settings, refused by name before anything is read (a string from a script, NaN, out of
    range): the message says the argument, its value and the range it takes."""
    _number("threshold", threshold, 0.0, None, "a CER: 0 = identical, 1 = all wrong")
    if min_naturalness is not None:
        _number(
            "min_naturalness", min_naturalness, 1.0, 5.0, "a predicted MOS, 1 bad .. 5 excellent; None: no threshold"
        )
    if workers is not None:
        _number("workers", workers, 0, MAX_WORKERS, "worker processes; 0 or None: every core", whole=True)


def check_rows(
    rows: Iterable[CsvRow],
    *,
    language: str | None,
    transcriber: Transcriber | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    total: int | None = None,
    progress: Progress | None = None,
    no_transcriber_reason: str | None = None,
    naturalness: bool = True,
    min_naturalness: float | None = None,
    workers: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> DatasetCheck:
    """Check rows (see the module docstring); `total` (else len(rows)) is passed to `progress(done, total, message)`;
    `no_transcriber_reason` says why `transcriber` is None (e.g. from asr.transcriber_or_reason).
    Clips are decoded, measured and scored (`naturalness`: DistillMOS) by `workers` processes (None: every core)
    while this process transcribes; `min_naturalness` flags the clips under it and suggests excluding them."""
    check_settings(threshold, min_naturalness, workers)
    if total is None and hasattr(rows, "__len__"):
        total = len(rows)  # type: ignore[arg-type]
    transcripts = _Transcripts(transcriber, language, no_transcriber_reason)
    settings = ClipCheckSettings(naturalness=naturalness, transcribe=transcriber is not None)
    pool = ClipPool(workers, should_stop=should_stop)
    counter = CountedProgress(progress, total, "checked")
    checked: list[RowCheck] = []
    skipped: list[tuple[str, str]] = []
    for done, (row, clip) in enumerate(pool.map(check_clip, rows, shared=settings, total=total), start=1):
        if isinstance(clip, TaskFailed):  # its worker died, or a measure failed on it
            skipped.append((row.audio_file, clip.reason))
        elif clip.error:  # changed or removed since it was validated
            skipped.append((row.audio_file, clip.error))
        else:
            checked.append(_row_check(row, clip, transcripts, language, threshold))
        counter(done, os.path.basename(row.audio_location))
    for outlier in flag_outliers([r.measures for r in checked]):
        checked[outlier.index].problems.extend(outlier.reasons)
    median, suggestion = flag_naturalness(checked, min_naturalness)
    flagged = sorted(
        (r for r in checked if r.flagged),
        key=lambda r: (-(r.cer or 0.0), -len(r.problems), r.naturalness if r.naturalness is not None else 5.0),
    )
    return DatasetCheck(flagged, len(checked), threshold, transcripts.reason, skipped, median, suggestion, pool.stats)


def check_dataset(
    train_csv: str | os.PathLike,
    eval_csv: str | os.PathLike | None = None,
    language: str = "en",
    *,
    transcriber: Transcriber | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    max_audio_length: int = MAX_AUDIO_LENGTH,
    progress: Progress | None = None,
    no_transcriber_reason: str | None = None,
    audio_roots: Iterable[str | os.PathLike] | None = None,
    naturalness: bool = True,
    min_naturalness: float | None = None,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    text_frontend: Any = None,
    vocab_path: str | os.PathLike | None = None,
) -> DatasetCheck:
    """Validate the dataset (read-only), then check its usable rows, train and eval (see the module docstring).
    `audio_roots`: folders the audio must lie in (the web app's confinement), as `validate_dataset` takes it;
    `cache_dir`: validate_dataset's check cache (an unchanged dataset is not validated again);
    `text_frontend`, `vocab_path`: how the run will see the text, as Validate, Prepare and train_gpt check it
    (utils.data.text_checks.text_check_options): with them the check's verdict (which rows are usable)
    is the run's, and it shares their cache entry. The validation is `DatasetCheck.report`."""
    from utils.data.validation import validate_dataset

    check_settings(threshold, min_naturalness, workers)
    report = validate_dataset(
        train_csv,
        eval_csv,
        language,
        max_audio_length,
        audio_roots=audio_roots,
        cache_dir=cache_dir,
        workers=workers or None,
        should_stop=should_stop,
        text_frontend=text_frontend,
        vocab_path=vocab_path,
    )
    rows = (row for _, row, _ in report.iter_usable_splits())
    check = check_rows(
        rows,
        language=report.language,
        transcriber=transcriber,
        threshold=threshold,
        total=report.rows_usable,
        progress=progress,
        no_transcriber_reason=no_transcriber_reason,
        naturalness=naturalness,
        min_naturalness=min_naturalness,
        workers=workers or None,
        should_stop=should_stop,
    )
    check.report = report
    return check
