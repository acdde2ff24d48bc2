"""Loudness evened out: each clip brought to one integrated loudness (ITU-R BS.1770-4, pyloudnorm), never over a
true-peak ceiling.

A dataset recorded at random levels teaches the model to speak at random levels. Each clip gets one gain (the
waveform is kept: no compression, no limiting): target minus its integrated loudness, at most MAX_GAIN_DB, lowered
where the clip's true peak would pass the ceiling, so nothing clips (such a clip stays quieter than the target,
and says so).
The true peak is the peak of the clip oversampled 4x (BS.1770-4 Annex 2), which sees the peaks between samples
that a plain sample peak misses. A clip too short or too quiet for a loudness (under one 400 ms gating block,
or every block under the -70 LUFS gate) keeps its level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utils.audio.levels import integrated_loudness

TARGET_LUFS = -23.0  # EBU R128's programme loudness
TRUE_PEAK_CEILING_DBTP = -1.0  # EBU R128's maximum true peak
# The most a clip is raised: a clip further below the target is mostly noise or silence (or all that is left of it
# once denoised), which a larger gain would only make loud.
MAX_GAIN_DB = 30.0
OVERSAMPLING = 4


@dataclass(frozen=True)
class LevelChange:
    """What evening one clip's loudness did; `gain_db` 0 and `reason` set when the level was kept."""

    before_lufs: float | None
    gain_db: float
    after_lufs: float | None
    true_peak_dbtp: float | None  # after the gain
    held_by_peak: bool = False  # the gain was lowered to keep the true peak under the ceiling
    held_by_gain: bool = False  # the clip needed more than MAX_GAIN_DB: raised by that much only
    reason: str = ""


def true_peak_dbtp(wav: np.ndarray) -> float | None:
    """The true peak in dBTP (4x oversampled), None for digital silence."""
    from scipy.signal import resample_poly

    x = np.asarray(wav, dtype=np.float64)
    if not x.size:
        return None
    peak = max(float(np.abs(x).max()), float(np.abs(resample_poly(x, OVERSAMPLING, 1)).max()))
    return 20 * math.log10(peak) if peak > 0 else None


def even_loudness(
    wav: np.ndarray, sample_rate: int, target_lufs: float = TARGET_LUFS, ceiling_dbtp: float = TRUE_PEAK_CEILING_DBTP
) -> tuple[np.ndarray, LevelChange]:
    """The clip at `target_lufs` (or as close as the true-peak ceiling allows), and what was done."""
    before, why = integrated_loudness(wav, sample_rate)
    peak = true_peak_dbtp(wav)
    if before is None or peak is None:
        return wav, LevelChange(before, 0.0, before, peak, reason=why or "silent")
    gain = target_lufs - before
    held_by_gain = gain > MAX_GAIN_DB
    gain = min(gain, MAX_GAIN_DB)
    held_by_peak = peak + gain > ceiling_dbtp
    if held_by_peak:
        gain = ceiling_dbtp - peak
    out = (np.asarray(wav, dtype=np.float64) * 10 ** (gain / 20)).astype(np.float32)
    after, _ = integrated_loudness(out, sample_rate)
    return out, LevelChange(before, gain, after, peak + gain, held_by_peak, held_by_gain and not held_by_peak)
