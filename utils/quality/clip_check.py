"""The dataset check's work on one clip, in a worker process (utils.data.pool): decode it, measure its audio
(utils.quality.audio_measures), predict its naturalness (utils.quality.naturalness, DistillMOS), and hand the
16 kHz samples back when a transcriber in the calling process will read them. Nothing raises for a bad clip:
its reason comes back instead."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utils.audio.io import AudioError, load_audio, resample
from utils.data.csv_reader import CsvRow
from utils.quality.audio_measures import ClipMeasures, measure_wav

WHISPER_RATE = 16000


@dataclass(frozen=True)
class ClipCheckSettings:
    naturalness: bool = True  # predict each clip's MOS
    transcribe: bool = False  # return the 16 kHz samples for the transcriber


@dataclass(frozen=True)
class ClipCheck:
    measures: ClipMeasures | None = None
    naturalness: float | None = None
    naturalness_reason: str = ""  # why there is no score (silent, too short, the model unavailable)
    wav16k: np.ndarray | None = None
    error: str = ""  # why the clip could not be read


def check_clip(row: CsvRow, settings: ClipCheckSettings) -> ClipCheck:
    """Decode, measure and score one row's clip (see the module docstring)."""
    try:
        wav, rate = load_audio(row.audio_location, None)
    except AudioError as exc:
        return ClipCheck(error=str(exc))
    measures = measure_wav(wav, rate, file=row.audio_file)
    score, why = None, ""
    if settings.naturalness:
        from utils.quality.naturalness import NaturalnessUnavailable, naturalness_of_wav

        try:
            score = naturalness_of_wav(wav, rate)
        except (ValueError, NaturalnessUnavailable) as exc:
            why = str(exc)
    wav16k = resample(wav, rate, WHISPER_RATE) if settings.transcribe else None
    return ClipCheck(measures, score, why, wav16k)
