"""Score generated speech: intelligibility, speaker similarity and duration, per clip and overall.

    from utils.quality.asr import get_transcriber
    from utils.quality.scoring import score_folder

    report = score_folder("output/run/eval_audio", {"0001.wav": "Hello there."}, ["data/wavs/real_01.wav"],
                          "en", transcriber=get_transcriber("large-v3"))
    report.cer, report.similarity, report.combined, [c.cer for c in report.clips]

Per clip: the transcript (faster-whisper), its CER and WER against the text (see
:mod:`utils.quality.intelligibility`), the cosine between the clip's speaker embedding and the
reference embedding of the real clips (:mod:`utils.quality.speaker`), the clip's duration and its
ratio to the duration of the real clip of the same text when one is given. Overall: corpus CER and WER
(all edits over all reference characters/words), mean similarity, geometric mean of the duration
ratios (so 2x and 0.5x average to 1x) and :func:`~utils.quality.selection.combined_score`.

Nothing here needs every model: without a transcriber (or resemblyzer, or reference clips) the
affected values are None and ``reason`` says why; generated files are only read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from utils.audio.checks import probe_audio
from utils.audio.io import AudioError, load_audio
from utils.data.transcription import Transcriber, TranscriberUnavailable
from utils.quality import intelligibility, speaker
from utils.quality.asr import transcribe_text
from utils.quality.selection import combined_score
from utils.text.languages import whisper_language

SAMPLE_RATE = 16000  # both Whisper and Resemblyzer take 16 kHz
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")

Progress = Callable[[int, int, str], None]


class ClipToScore(NamedTuple):
    """A generated clip, the text it should say, and optionally the real clip of that text."""

    file: str | os.PathLike
    text: str
    real_clip: str | os.PathLike | None = None


@dataclass
class ClipScore:
    file: str
    text: str
    transcript: str | None = None
    cer: float | None = None
    wer: float | None = None
    similarity: float | None = None
    duration: float | None = None
    duration_ratio: float | None = None
    reason: str = ""  # why values are None, "; "-separated


@dataclass
class QualityReport:
    clips: list[ClipScore]
    cer: float | None = None
    wer: float | None = None
    similarity: float | None = None
    duration_ratio: float | None = None
    combined: float | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def metrics(self) -> dict[str, float | None]:
        """The numbers :meth:`~utils.quality.selection.BestRule.value_of` reads."""
        return {
            "cer": self.cer,
            "wer": self.wer,
            "similarity": self.similarity,
            "duration_ratio": self.duration_ratio,
            "combined": self.combined,
        }

    def to_dict(self) -> dict:
        return {**self.metrics(), "reason": self.reason, "clips": [asdict(c) for c in self.clips]}


class _Scorer:
    """Holds what is shared across clips: the transcriber (dropped after it proves unavailable) and the
    reference embedding (or the reason there is none)."""

    def __init__(
        self,
        transcriber: Transcriber | None,
        language: str | None,
        reference_clips: Sequence[str | os.PathLike] | None,
        no_transcriber_reason: str | None = None,
    ) -> None:
        self.transcriber = transcriber
        self.asr_reason = None if transcriber is not None else (no_transcriber_reason or "no transcription model given")
        self.language = language  # the project's code: the error rates fold Amharic homophones with it
        self.asr_language = whisper_language(language) if language else None
        self.reference, self.similarity_reason = None, None
        if not reference_clips:
            self.similarity_reason = "no reference clips of the speaker given"
            return
        try:
            self.reference = speaker.speaker_embedding(reference_clips)
        except (speaker.SpeakerEncoderUnavailable, ValueError) as exc:
            self.similarity_reason = str(exc)

    def transcribe(self, wav: np.ndarray, record: ClipScore, reasons: list[str]) -> None:
        if self.transcriber is not None:
            try:
                record.transcript = transcribe_text(self.transcriber, wav, SAMPLE_RATE, self.asr_language)
            except TranscriberUnavailable as exc:
                self.transcriber, self.asr_reason = None, str(exc)
            except RuntimeError as exc:  # a decoding failure on this clip only
                reasons.append(f"cer: transcription failed ({exc})")
                return
        if record.transcript is None:
            reasons.append(f"cer: {self.asr_reason}")
            return
        record.cer = intelligibility.cer(record.text, record.transcript, self.language)
        record.wer = intelligibility.wer(record.text, record.transcript, self.language)

    def embed(self, wav: np.ndarray, record: ClipScore, reasons: list[str]) -> None:
        if self.reference is None:
            reasons.append(f"similarity: {self.similarity_reason}")
            return
        try:
            record.similarity = speaker.cosine(speaker.embed_wav(wav, SAMPLE_RATE), self.reference)
        except ValueError as exc:
            reasons.append(f"similarity: {exc}")

    def score(self, item: ClipToScore) -> ClipScore:
        record = ClipScore(file=str(item.file), text=item.text)
        reasons: list[str] = []
        try:
            wav, _ = load_audio(item.file, SAMPLE_RATE)
        except AudioError as exc:
            record.reason = f"{item.file}: {exc}"
            return record
        record.duration = round(len(wav) / SAMPLE_RATE, 4)
        self.transcribe(wav, record, reasons)
        self.embed(wav, record, reasons)
        if item.real_clip is None:
            reasons.append("duration_ratio: no real clip of this text given")
        else:
            try:
                real = probe_audio(item.real_clip, full=False).duration
                record.duration_ratio = record.duration / real if real > 0 else None
            except AudioError as exc:
                reasons.append(f"duration_ratio: real clip {item.real_clip}: {exc}")
        record.reason = "; ".join(reasons)
        return record


def aggregate(clips: list[ClipScore], language: str | None) -> QualityReport:
    """The overall scores of scored clips (see the module docstring), with the first reason of each missing one."""
    report = QualityReport(clips=clips)
    heard = [c for c in clips if c.transcript is not None]
    if heard:
        texts, transcripts = [c.text for c in heard], [c.transcript for c in heard]
        report.cer = intelligibility.corpus_cer(texts, transcripts, language)
        report.wer = intelligibility.corpus_wer(texts, transcripts, language)
    similarities = [c.similarity for c in clips if c.similarity is not None]
    if similarities:
        report.similarity = float(np.mean(similarities))
    ratios = [c.duration_ratio for c in clips if c.duration_ratio]
    if ratios:
        report.duration_ratio = float(math.exp(np.mean(np.log(ratios))))
    report.combined = combined_score(report.cer, report.similarity)
    # The first reason given for each missing measure (they are usually the same for every clip).
    for name in ("cer", "similarity", "duration_ratio"):
        if getattr(report, name) is None:
            why = next((p for c in clips for p in c.reason.split("; ") if p.startswith(name + ":")), None)
            report.reasons.append(why or f"{name}: no clip could be measured")
    return report


def score_clips(
    items: Iterable[ClipToScore | tuple],
    *,
    language: str | None,
    reference_clips: Sequence[str | os.PathLike] | None = None,
    transcriber: Transcriber | None = None,
    progress: Progress | None = None,
    no_transcriber_reason: str | None = None,
) -> QualityReport:
    """Score generated clips (see the module docstring). ``items`` are :class:`ClipToScore` or tuples
    ``(file, text[, real_clip])``; ``language`` is the project's code (``en``, ``amh``...) or None to
    detect; ``reference_clips`` are real clips of the speaker; ``progress(done, total, message)``;
    ``no_transcriber_reason``: why ``transcriber`` is None (e.g. from asr.transcriber_or_reason), for the records."""
    todo = [ClipToScore(*item) for item in items]
    scorer = _Scorer(transcriber, language, reference_clips, no_transcriber_reason)
    clips = []
    for done, item in enumerate(todo, start=1):
        clips.append(scorer.score(item))
        if progress is not None:
            progress(done, len(todo), f"scored {Path(item.file).name}")
    return aggregate(clips, language)


def _text_for(path: Path, texts: Mapping[str, str]) -> str | None:
    return texts.get(path.name, texts.get(path.stem))


def score_folder(
    folder: str | os.PathLike,
    texts: Mapping[str, str],
    reference_clips: Sequence[str | os.PathLike] | None,
    language: str | None,
    *,
    transcriber: Transcriber | None = None,
    real_clips: Mapping[str, str | os.PathLike] | None = None,
    progress: Progress | None = None,
) -> QualityReport:
    """Score every audio file in ``folder`` (not its subfolders) against ``texts``, keyed by file name
    (``0001.wav``) or stem (``0001``); ``real_clips`` maps the same keys to real clips of the same
    text. ValueError when a file has no text or a text no file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder: give the folder holding the generated clips")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES)
    no_text = [p.name for p in files if _text_for(p, texts) is None]
    if no_text:
        raise ValueError(
            f"no text for {len(no_text)} file(s) in {folder}: {', '.join(no_text[:5])}; "
            "add them to texts (keyed by file name or stem) or move them out"
        )
    keys = {p.name for p in files} | {p.stem for p in files}
    orphans = [k for k in texts if k not in keys]
    if orphans:
        raise ValueError(f"no audio file in {folder} for text key(s) {', '.join(map(repr, orphans[:5]))}")
    real_clips = real_clips or {}
    items = [ClipToScore(p, _text_for(p, texts), real_clips.get(p.name, real_clips.get(p.stem))) for p in files]
    return score_clips(
        items, language=language, reference_clips=reference_clips, transcriber=transcriber, progress=progress
    )
