"""Reading a clip's duration and level, for the dataset checks. Files are only read."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

XTTS_SAMPLE_RATE = 22050
MIN_SECONDS = 1.0
# Below this RMS level (dBFS) a clip holds no usable speech.
SILENCE_DBFS = -55.0


class AudioError(Exception):
    """The file is missing or cannot be decoded."""


@dataclass(frozen=True)
class AudioInfo:
    duration: float  # seconds
    sample_rate: int
    channels: int
    rms_dbfs: float | None = None  # None when only the header was read
    peak: float | None = None


def read_mono(path: str | os.PathLike) -> tuple[np.ndarray, int, int]:
    """Mono float32 samples at the file's own rate, and the channel count: soundfile first, FFmpeg
    (through torchaudio) for formats libsndfile lacks."""
    import soundfile as sf

    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
        return data.mean(axis=1), int(rate), data.shape[1]
    except (sf.LibsndfileError, RuntimeError, TypeError):
        pass
    try:
        import torchaudio

        wav, rate = torchaudio.load(str(path))
        return wav.mean(dim=0).numpy().astype(np.float32), int(rate), wav.shape[0]
    except Exception as exc:  # noqa: BLE001 - any decoder failure is "cannot be decoded"
        raise AudioError(f"cannot be decoded ({type(exc).__name__}: {str(exc)[:120]})") from exc


def resample(wav: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """Resample float32 mono audio with torchaudio's sinc interpolation (no-op at the same rate)."""
    if rate == target_rate:
        return np.ascontiguousarray(wav, dtype=np.float32)
    import torch
    import torchaudio

    tensor = torch.from_numpy(np.ascontiguousarray(wav, dtype=np.float32))
    return torchaudio.functional.resample(tensor, rate, target_rate).numpy()


def load_audio(path: str | os.PathLike, target_rate: int | None = XTTS_SAMPLE_RATE) -> tuple[np.ndarray, int]:
    """Float32 mono samples of any format soundfile or FFmpeg reads, resampled to `target_rate`
    (None keeps the file's rate). The file is only read."""
    wav, rate, _ = read_mono(path)
    if target_rate is None:
        return np.ascontiguousarray(wav, dtype=np.float32), rate
    return resample(wav, rate, target_rate), target_rate


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
