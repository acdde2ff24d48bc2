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
with the most audio problems. Each clip is decoded once; the user's files are only read. Without a
transcription model the audio is still measured and ``transcript_reason`` says why there is no CER.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from utils.audio.io import AudioError, load_audio, resample
from utils.constants import MAX_AUDIO_LENGTH
from utils.data.csv_reader import CsvRow
from utils.data.transcription import Transcriber, TranscriberUnavailable
from utils.quality.asr import transcribe_text
from utils.quality.audio_measures import ClipMeasures, flag_outliers, measure_wav
from utils.quality.intelligibility import cer
from utils.quality.transcript_check import DEFAULT_THRESHOLD
from utils.text.languages import whisper_language

WHISPER_RATE = 16000

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

    def summary(self) -> str:
        lines = [
            f"{len(self.flagged)} of {self.checked} rows flagged (transcript CER over {self.threshold:.0%}, "
            "or audio outliers), worst first."
        ]
        if self.transcript_reason:
            lines.append(f"Transcripts not checked: {self.transcript_reason}")
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


def _check_row(row: CsvRow, transcripts: _Transcripts, language: str | None, threshold: float) -> RowCheck:
    wav, rate = load_audio(row.audio_location, None)
    record = RowCheck(
        row.csv_file,
        row.line,
        row.audio_file,
        row.audio_location,
        row.text,
        measures=measure_wav(wav, rate, file=row.audio_file),
    )
    record.transcript = transcripts(wav, rate)
    if record.transcript is not None:
        record.cer = cer(row.text, record.transcript, language)
        if record.cer > threshold:
            record.problems.append(f"transcript disagrees with the text (CER {record.cer:.0%})")
    return record


def check_rows(
    rows: Iterable[CsvRow],
    *,
    language: str | None,
    transcriber: Transcriber | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    total: int | None = None,
    progress: Progress | None = None,
    no_transcriber_reason: str | None = None,
) -> DatasetCheck:
    """Check rows (see the module docstring); `total` (else len(rows)) is passed to `progress(done, total, message)`;
    `no_transcriber_reason` says why `transcriber` is None (e.g. from asr.transcriber_or_reason)."""
    if threshold < 0:
        raise ValueError(f"threshold is a CER (0 = identical, 1 = all wrong); got {threshold}.")
    if total is None and hasattr(rows, "__len__"):
        total = len(rows)  # type: ignore[arg-type]
    transcripts = _Transcripts(transcriber, language, no_transcriber_reason)
    checked: list[RowCheck] = []
    skipped: list[tuple[str, str]] = []
    for done, row in enumerate(rows, start=1):
        try:
            checked.append(_check_row(row, transcripts, language, threshold))
        except AudioError as exc:  # changed or removed since it was validated
            skipped.append((row.audio_file, str(exc)))
        if progress is not None:
            progress(done, total or done, f"checked {os.path.basename(row.audio_location)}")
    for outlier in flag_outliers([r.measures for r in checked]):
        checked[outlier.index].problems.extend(outlier.reasons)
    flagged = sorted((r for r in checked if r.flagged), key=lambda r: (-(r.cer or 0.0), -len(r.problems)))
    return DatasetCheck(flagged, len(checked), threshold, transcripts.reason, skipped)


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
) -> DatasetCheck:
    """Validate the dataset (read-only), then check its usable rows, train and eval (see the module docstring).
    `audio_roots`: folders the audio must lie in (the web app's confinement), as `validate_dataset` takes it."""
    from utils.data.validation import validate_dataset

    report = validate_dataset(train_csv, eval_csv, language, max_audio_length, audio_roots=audio_roots)
    rows = (row for _, row, _ in report.iter_usable_splits())
    return check_rows(
        rows,
        language=report.language,
        transcriber=transcriber,
        threshold=threshold,
        total=report.rows_usable,
        progress=progress,
        no_transcriber_reason=no_transcriber_reason,
    )
