"""A clip's duration and level, for the dataset checks. Files are only read."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from utils.audio.io import AudioError, read_mono

# Below this RMS level (dBFS) a clip holds no usable speech.
SILENCE_DBFS = -55.0


@dataclass(frozen=True)
class AudioInfo:
    duration: float  # seconds
    sample_rate: int
    channels: int
    rms_dbfs: float | None = None  # None when only the header was read
    peak: float | None = None


def probe_audio(path: str | os.PathLike, *, full: bool = True) -> AudioInfo:
    """Duration and format from the header, plus level when `full` (the whole file is decoded)."""
    import soundfile as sf

    if not os.path.isfile(path):
        raise AudioError("file not found")
    if not full:
        try:
            info = sf.info(str(path))
            if info.frames > 0 and info.samplerate > 0:
                return AudioInfo(info.frames / info.samplerate, int(info.samplerate), int(info.channels))
        except (sf.LibsndfileError, RuntimeError, TypeError):
            pass  # not a libsndfile format: decode it below
    samples, rate, channels = read_mono(path)
    if samples.size == 0:
        raise AudioError("has no samples")
    if not np.isfinite(samples).all():
        raise AudioError("contains NaN or infinite samples")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    rms_dbfs = 20 * math.log10(rms) if rms > 0 else -math.inf
    return AudioInfo(samples.size / rate, rate, channels, rms_dbfs, float(np.abs(samples).max()))
