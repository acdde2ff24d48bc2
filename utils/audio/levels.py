"""A clip's levels frame by frame, its SNR estimate and its integrated loudness (the measures are described in
utils.quality.audio_measures, which reports them; prepare uses them too, to even loudness and show denoising)."""

from __future__ import annotations

import functools
import math

import numpy as np

FRAME_S = 0.02
HOP_S = 0.01
NOISE_PERCENTILE = 10
SPEECH_PERCENTILE = 95
POWER_FLOOR = 1e-10  # -100 dBFS


def frame_geometry(sample_rate: int) -> tuple[int, int]:
    return max(1, round(FRAME_S * sample_rate)), max(1, round(HOP_S * sample_rate))


def frame_powers(wav: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mean square of each 20 ms frame, hop 10 ms (one frame for shorter audio)."""
    x = np.asarray(wav, dtype=np.float64)
    frame, hop = frame_geometry(sample_rate)
    if len(x) <= frame:
        return np.array([np.mean(x**2) if len(x) else 0.0])
    sums = np.concatenate(([0.0], np.cumsum(x**2)))
    starts = np.arange(0, len(x) - frame + 1, hop)
    return (sums[starts + frame] - sums[starts]) / frame


def snr_estimate(powers: np.ndarray) -> float | None:
    """Percentile SNR estimate in dB from frame powers (None for a silent clip)."""
    speech = float(np.percentile(powers, SPEECH_PERCENTILE))
    if speech <= 0:
        return None
    noise = max(float(np.percentile(powers, NOISE_PERCENTILE)), POWER_FLOOR)
    return 10 * math.log10(max(speech - noise, noise * 1e-3) / noise)


@functools.lru_cache(maxsize=8)
def _meter(sample_rate: int):
    import pyloudnorm

    return pyloudnorm.Meter(sample_rate)


def integrated_loudness(wav: np.ndarray, sample_rate: int) -> tuple[float | None, str]:
    """BS.1770-4 integrated loudness in LUFS, or (None, why)."""
    x = np.asarray(wav, dtype=np.float64)
    if len(x) < 0.4 * sample_rate:
        return None, "loudness: shorter than 0.4 s (one BS.1770 gating block)"
    value = float(_meter(sample_rate).integrated_loudness(x))
    if not math.isfinite(value):
        return None, "loudness: silent (every block below the -70 LUFS gate)"
    return value, ""
