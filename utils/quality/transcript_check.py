"""Dataset transcript check: transcribe each clip and flag rows whose text disagrees with the audio.

    from utils.quality.asr import get_transcriber
    from utils.quality.transcript_check import check_transcripts

    result = check_transcripts(((row.line, row.path, row.text) for row in rows), get_transcriber("large-v3"),
                               language="en", threshold=0.3, progress=print)
    for row in result.flagged:  # worst first
        print(row.row_id, f"{row.cer:.0%}", row.text, "|", row.transcript)

A row is flagged when the CER of the transcript against its text (normalised as in
:mod:`utils.quality.intelligibility`) exceeds ``threshold``. As a guide: a recogniser's own mistakes on
clean speech stay under 0.1 to 0.2 (the tiny model more), while a text that belongs to another clip
scores 0.6 and more. Items are read one at a time from any iterable and only the ``max_flagged`` worst
rows are kept, so memory stays bounded on large datasets; audio files are only read.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from utils.audio.io import AudioError, load_audio
from utils.data.transcription import Transcriber, TranscriberUnavailable
from utils.quality.asr import transcribe_text
from utils.quality.intelligibility import cer
from utils.text.languages import whisper_language

SAMPLE_RATE = 16000
DEFAULT_THRESHOLD = 0.3


@dataclass(frozen=True)
class TranscriptMismatch:
    row_id: Hashable
    audio: str
    text: str
    transcript: str
    cer: float


@dataclass
class TranscriptCheck:
    flagged: list[TranscriptMismatch]  # CER above threshold, worst first (the max_flagged worst)
    n_flagged: int  # all rows above the threshold, also those not kept
    checked: int  # rows transcribed
    skipped: list[tuple[Hashable, str]] = field(default_factory=list)  # (row id, why), the first max_flagged
    n_skipped: int = 0
    threshold: float = DEFAULT_THRESHOLD
    reason: str = ""  # why rows were not checked at all (no transcription model)


def check_transcripts(
    items: Iterable[tuple[Hashable, str | os.PathLike, str]],
    transcriber: Transcriber | None,
    *,
    language: str | None,
    threshold: float = DEFAULT_THRESHOLD,
    max_flagged: int = 1000,
    total: int | None = None,
    progress: Callable[[int, int | None, str], None] | None = None,
) -> TranscriptCheck:
    """Transcribe each ``(row_id, audio_path, text)`` and return the rows whose CER exceeds ``threshold``,
    worst first. ``language`` is the project's code (``en``, ``amh``...) or None to detect it; ``total``
    (else ``len(items)`` when it has one) is passed to ``progress(done, total, message)``. Without a
    transcriber, or when its model cannot be loaded, nothing is flagged and ``reason`` says why."""
    if threshold < 0:
        raise ValueError(f"threshold is a CER (0 = identical, 1 = all wrong), got {threshold}")
    if max_flagged < 1:
        raise ValueError(f"max_flagged must be >= 1, got {max_flagged}")
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    result = TranscriptCheck(flagged=[], n_flagged=0, checked=0, threshold=threshold)
    if transcriber is None:
        result.reason = "no transcription model: the transcript check needs one"
        return result
    lang = whisper_language(language) if language else None
    worst: list[tuple[float, int, TranscriptMismatch]] = []  # min-heap: the best of the kept is popped first
    order = itertools.count()
    for done, (row_id, audio, text) in enumerate(items, start=1):
        try:
            wav, _ = load_audio(audio, SAMPLE_RATE)
            transcript = transcribe_text(transcriber, wav, SAMPLE_RATE, lang)
        except TranscriberUnavailable as exc:
            result.reason = str(exc)
            break
        except (AudioError, RuntimeError) as exc:  # this row only: unreadable audio, a decoding failure
            result.n_skipped += 1
            if len(result.skipped) < max_flagged:
                result.skipped.append((row_id, str(exc)))
        else:
            result.checked += 1
            score = cer(text, transcript, language)
            if score > threshold:
                result.n_flagged += 1
                entry = (score, -next(order), TranscriptMismatch(row_id, str(audio), text, transcript, score))
                if len(worst) < max_flagged:
                    heapq.heappush(worst, entry)
                else:
                    heapq.heappushpop(worst, entry)
        if progress is not None:
            progress(done, total, f"checked {os.path.basename(str(audio))}")
    result.flagged = [e[2] for e in sorted(worst, key=lambda e: (-e[0], -e[1]))]
    return result
