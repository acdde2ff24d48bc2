"""Per-clip audio measures (loudness, clipping, SNR, leading/trailing silence) and their outliers.

All measures use 20 ms frames every 10 ms of the mono signal; a frame's level is its RMS in dBFS.

- Loudness: integrated loudness, ITU-R BS.1770-4 (K-weighting, gating), with pyloudnorm, in LUFS.
  None for clips shorter than one 400 ms gating block or silent.
- Clipping ratio: the fraction of samples lying in runs of at least 3 consecutive samples at the
  clip's peak magnitude (within 0.002 %). A hard-clipped waveform sits flat at its ceiling, wherever
  the ceiling is (full scale, or lower when the file was scaled after clipping); real peaks are
  single samples. Clips whose peak is below -20 dBFS are not examined (flat quantisation steps).
- SNR estimate (dB): the noise floor is the 10th percentile of frame power (the pauses between words),
  the speech level the 95th percentile; SNR = 10 log10((speech - noise) / noise). This percentile
  method (as NIST's STNR) needs pauses in the clip: a signal without any reads as noise. Digital
  silence in the pauses gives a floor of -100 dBFS, so the estimate is capped near 100 dB.
- Leading/trailing silence (s): time before the first and after the last frame louder than
  max(loudest frame - 40 dB, noise floor + 6 dB, -60 dBFS), never closer than 6 dB to the loudest
  frame. A clip without any such frame is silent: both equal its duration.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from utils.audio.io import load_audio
from utils.audio.levels import (  # noqa: F401 - frame_powers, snr_estimate and the constants are used from here too
    FRAME_S,
    HOP_S,
    NOISE_PERCENTILE,
    POWER_FLOOR,
    SPEECH_PERCENTILE,
    frame_geometry,
    frame_powers,
    integrated_loudness,
    snr_estimate,
)

CLIP_RUN = 3
CLIP_TOLERANCE = 2e-5  # less than one 16-bit step at half scale: clipped samples are equal
CLIP_MIN_PEAK = 0.1  # -20 dBFS
SILENCE_BELOW_PEAK_DB = 40.0
SILENCE_ABOVE_NOISE_DB = 6.0
SILENCE_ABSOLUTE_DBFS = -60.0


@dataclass(frozen=True)
class ClipMeasures:
    """Measures of one clip; a None value has its reason in ``reason``."""

    file: str | None
    duration: float
    sample_rate: int
    loudness_lufs: float | None
    peak_dbfs: float | None
    clipping_ratio: float
    snr_db: float | None
    leading_silence_s: float
    trailing_silence_s: float
    reason: str = ""


def clipping_ratio(wav: np.ndarray) -> float:
    """Fraction of samples in flat runs (>= 3 samples) at the peak magnitude (see the module docstring)."""
    mag = np.abs(np.asarray(wav, dtype=np.float64))
    if mag.size == 0:
        return 0.0
    peak = float(mag.max())
    if peak < CLIP_MIN_PEAK:
        return 0.0
    at_peak = np.concatenate(([False], mag >= peak * (1 - CLIP_TOLERANCE), [False]))
    edges = np.flatnonzero(np.diff(at_peak.astype(np.int8)))
    runs = edges[1::2] - edges[0::2]
    return float(runs[runs >= CLIP_RUN].sum() / mag.size)


def edge_silences(powers: np.ndarray, n_samples: int, sample_rate: int) -> tuple[float, float]:
    """Leading and trailing silence in seconds (see the module docstring), from :func:`frame_powers`."""
    duration = n_samples / sample_rate
    levels = 10 * np.log10(np.maximum(powers, 1e-20))
    peak = float(levels.max())
    noise = float(np.percentile(levels, NOISE_PERCENTILE))
    threshold = min(max(peak - SILENCE_BELOW_PEAK_DB, noise + SILENCE_ABOVE_NOISE_DB, SILENCE_ABSOLUTE_DBFS), peak - 6)
    loud = np.flatnonzero(levels > threshold)
    if peak <= SILENCE_ABSOLUTE_DBFS or loud.size == 0:
        return duration, duration
    frame, hop = frame_geometry(sample_rate)
    # Frames overlap by half: a sound starting in frame i but not in frame i - 1 starts in frame i's
    # last hop, and one ending in frame j but not in j + 1 ends in frame j's first hop.
    first, last = int(loud[0]), int(loud[-1])
    start = 0 if first == 0 else first * hop + frame - hop
    end = n_samples if last == len(levels) - 1 else last * hop + hop
    return round(min(start, n_samples) / sample_rate, 4), round(max(n_samples - end, 0) / sample_rate, 4)


def measure_wav(wav: np.ndarray, sample_rate: int, file: str | None = None) -> ClipMeasures:
    """All measures of mono float audio in [-1, 1]."""
    x = np.asarray(wav, dtype=np.float32)
    duration = len(x) / sample_rate
    powers = frame_powers(x, sample_rate)
    loudness, why = integrated_loudness(x, sample_rate)
    reasons = [why] if why else []
    peak = float(np.abs(x).max()) if x.size else 0.0
    snr = snr_estimate(powers)
    if snr is None:
        reasons.append("snr: silent clip")
    leading, trailing = edge_silences(powers, len(x), sample_rate)
    return ClipMeasures(
        file=file,
        duration=round(duration, 4),
        sample_rate=sample_rate,
        loudness_lufs=loudness,
        peak_dbfs=20 * math.log10(peak) if peak > 0 else None,
        clipping_ratio=clipping_ratio(x),
        snr_db=snr,
        leading_silence_s=leading,
        trailing_silence_s=trailing,
        reason="; ".join(reasons),
    )


def measure_file(path: str | os.PathLike) -> ClipMeasures:
    """Measures of an audio file at its own sample rate (the file is only read; AudioError when it
    cannot be decoded)."""
    wav, rate = load_audio(path, None)
    return measure_wav(wav, rate, file=str(path))


# --------------------------------------------------------------------------------------------
# Outliers
# --------------------------------------------------------------------------------------------

# Absolute limits, whatever the rest of the dataset looks like.
MAX_CLIPPING_RATIO = 0.001  # 0.1 % of the samples flat at the ceiling
MIN_LOUDNESS_LUFS = -40.0
MIN_SNR_DB = 15.0
MAX_EDGE_SILENCE_S = 1.0
# Robust outliers: |modified z| = 0.6745 |x - median| / MAD above 3.5 (Iglewicz and Hoaglin), once
# at least MIN_CLIPS_FOR_STATS clips have the measure. The MAD is floored so that a very uniform
# dataset does not flag differences nobody hears.
ROBUST_Z = 3.5
MIN_CLIPS_FOR_STATS = 8
MAD_FLOOR = {"loudness_lufs": 1.0, "snr_db": 2.0, "leading_silence_s": 0.05, "trailing_silence_s": 0.05}
# Which side of the median is harmful: +1 high values, -1 low values, 0 both.
HARMFUL_SIDE = {"loudness_lufs": 0, "snr_db": -1, "leading_silence_s": 1, "trailing_silence_s": 1}


@dataclass(frozen=True)
class Outlier:
    """One flagged measure of one clip (``index`` into the list given to :func:`flag_outliers`)."""

    index: int
    file: str | None
    measure: str
    value: float | None
    reasons: list[str] = field(default_factory=list)


def _absolute_reason(name: str, value: float) -> str | None:
    if name == "clipping_ratio" and value > MAX_CLIPPING_RATIO:
        return f"clipped: {value:.2%} of samples flat at the peak (limit {MAX_CLIPPING_RATIO:.1%})"
    if name == "loudness_lufs" and value < MIN_LOUDNESS_LUFS:
        return f"very quiet: {value:.1f} LUFS (limit {MIN_LOUDNESS_LUFS:.0f})"
    if name == "snr_db" and value < MIN_SNR_DB:
        return f"noisy: SNR about {value:.1f} dB (limit {MIN_SNR_DB:.0f})"
    if name in ("leading_silence_s", "trailing_silence_s") and value > MAX_EDGE_SILENCE_S:
        edge = name.split("_")[0]
        return f"{edge} silence {value:.2f} s (limit {MAX_EDGE_SILENCE_S:.1f} s)"
    return None


def _robust_reasons(measures: Sequence[ClipMeasures], name: str) -> dict[int, str]:
    values = [(i, getattr(m, name)) for i, m in enumerate(measures) if getattr(m, name) is not None]
    if len(values) < MIN_CLIPS_FOR_STATS:
        return {}
    arr = np.array([v for _, v in values], dtype=np.float64)
    median = float(np.median(arr))
    mad = max(float(np.median(np.abs(arr - median))), MAD_FLOOR[name])
    side = HARMFUL_SIDE[name]
    out = {}
    for i, v in values:
        z = 0.6745 * (v - median) / mad
        if abs(z) > ROBUST_Z and (side == 0 or np.sign(z) == side):
            out[i] = f"{name} {v:.2f} is far from the dataset's median {median:.2f} (modified z {z:+.1f})"
    return out


def flag_outliers(measures: Sequence[ClipMeasures]) -> list[Outlier]:
    """Clips whose measures break an absolute limit or are robust outliers of the dataset, one entry per
    (clip, measure), in clip order. Silent or too-short clips (loudness None) are flagged too."""
    flagged: dict[tuple[int, str], Outlier] = {}

    def add(i: int, name: str, value, reason: str) -> None:
        key = (i, name)
        if key not in flagged:
            flagged[key] = Outlier(i, measures[i].file, name, value)
        flagged[key].reasons.append(reason)

    for i, m in enumerate(measures):
        if m.loudness_lufs is None:
            add(i, "loudness_lufs", None, m.reason or "loudness not measurable")
        for name in ("clipping_ratio", "loudness_lufs", "snr_db", "leading_silence_s", "trailing_silence_s"):
            value = getattr(m, name)
            reason = None if value is None else _absolute_reason(name, value)
            if reason:
                add(i, name, value, reason)
    for name in MAD_FLOOR:
        for i, reason in _robust_reasons(measures, name).items():
            add(i, name, getattr(measures[i], name), reason)
    return [flagged[k] for k in sorted(flagged)]
