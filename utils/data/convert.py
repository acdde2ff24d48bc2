"""One clip converted for a prepared dataset, in a worker process (utils.data.pool): decoded, identified by its
samples, optionally denoised, resampled to 22.05 kHz, its loudness evened (or, kept, its over-full-scale float
peaks scaled down), and written atomically as 16-bit PCM under the prepared folder's wavs/.

Nothing here raises for a bad clip: a clip that cannot be decoded, denoised or measured comes back with the
reason (`Converted.error`), and Prepare lists it as a rejected row. The source file is only read.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from utils.audio.checks import SILENCE_DBFS, AudioInfo, constant_signal, level_around_mean
from utils.audio.io import AudioError, peak_normalise, read_mono, resample, write_wav
from utils.audio.levels import frame_powers, snr_estimate
from utils.audio.loudness import LevelChange, even_loudness
from utils.constants import XTTS_SAMPLE_RATE
from utils.data.clip_probe import ClipProbe, probe_file


def audio_digest(wav: np.ndarray, rate: int) -> str:
    """16 hex digits identifying decoded audio: the same samples at the same rate give the same digest."""
    digest = hashlib.blake2b(int(rate).to_bytes(4, "little"), digest_size=8)
    digest.update(np.ascontiguousarray(wav, dtype=np.float32).tobytes())
    return digest.hexdigest()


def clip_name(source: str, digest: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(source).stem)[:60] or "clip"
    return f"wavs/{stem}_{digest}.wav"


@dataclass(frozen=True)
class ConvertSettings:
    """What every clip of one Prepare gets (sent once to each worker)."""

    out: str  # the prepared folder
    even_loudness: bool
    loudness_target: float
    ceiling_dbtp: float
    denoise: bool
    existing: frozenset[str] = frozenset()  # digests of clips already in the folder: not converted again


@dataclass(frozen=True)
class ConvertTask:
    location: str  # the source file
    excluded: bool = False  # only its digest is wanted (to drop it from an earlier Prepare's rows)


@dataclass(frozen=True)
class Converted:
    digest: str = ""
    name: str = ""  # wavs/... written; "" when nothing was written
    error: str = ""  # why the clip cannot be used ("" when it can)
    already_there: bool = False  # its digest was in ConvertSettings.existing
    level: LevelChange | None = None  # loudness evened; None when levels were kept
    scaled_peak: float | None = None  # levels kept: the float peak over full scale that was scaled to 0.99
    snr_before: float | None = None  # denoised: SNR estimates (dB) before and after
    snr_after: float | None = None
    probe: ClipProbe | None = field(default=None, compare=False)  # the written file, for the prepared record
    write_failed: bool = False  # the folder could not be written: Prepare stops


def _snr(wav: np.ndarray) -> float | None:
    return snr_estimate(frame_powers(wav, XTTS_SAMPLE_RATE))


def _processed(wav: np.ndarray, rate: int, settings: ConvertSettings) -> tuple[np.ndarray, dict]:
    """The clip at 22.05 kHz as the prepared copy has it, and what was done to it."""
    done: dict = {}
    out = resample(wav, rate, XTTS_SAMPLE_RATE)
    if settings.denoise:
        from utils.audio.denoise import DF_RATE, denoise_48k

        done["snr_before"] = _snr(out)
        out = resample(denoise_48k(resample(wav, rate, DF_RATE)), DF_RATE, XTTS_SAMPLE_RATE)
        done["snr_after"] = _snr(out)
    level = None
    if settings.even_loudness:
        out, level = even_loudness(out, XTTS_SAMPLE_RATE, settings.loudness_target, settings.ceiling_dbtp)
        done["level"] = level
    if level is None or level.reason:  # levels kept, or no loudness to even (a very short clip)
        out, gain = peak_normalise(out)  # float audio over full scale is scaled down, never clipped
        done["scaled_peak"] = 0.99 / gain if gain < 1.0 else None
    return out, done


def _no_sound(wav: np.ndarray, rate: int) -> str:
    """Why a clip holds no sound (silent, or a constant signal: a DC offset with nothing around it), as the full
    dataset check says it; "" when it holds some."""
    mean, around = level_around_mean(wav)
    if around >= SILENCE_DBFS:
        return ""
    rms = float(np.sqrt(np.mean(np.square(wav, dtype=np.float64)))) if wav.size else 0.0
    level = 20 * np.log10(rms) if rms > 0 else -np.inf
    constant = constant_signal(AudioInfo(wav.size / rate, rate, 1, level, None, "", mean, around))
    return f"holds no sound: {constant}" if constant else "is silent"


def convert_clip(task: ConvertTask, settings: ConvertSettings) -> Converted:
    """Convert one clip (see the module docstring)."""
    try:
        wav, rate, _ = read_mono(task.location)
    except AudioError as exc:
        return Converted(error=f"cannot be read again: {exc}")
    if not task.excluded and not np.isfinite(wav).all():  # a header-only check cannot see it
        return Converted(error="samples are not numbers, NaN or infinite")
    if not task.excluded and (silent := _no_sound(wav, rate)):  # nor this: evening its loudness would raise it
        return Converted(error=silent)
    digest = audio_digest(wav, rate)
    if task.excluded or digest in settings.existing:
        return Converted(digest, already_there=digest in settings.existing)
    try:
        out, done = _processed(wav, rate, settings)
    except Exception as exc:  # noqa: BLE001 - a denoiser or measure failing on this clip rejects this clip only
        return Converted(digest, error=f"could not be processed ({type(exc).__name__}: {str(exc)[:160]})")
    if not np.isfinite(out).all():
        return Converted(digest, error="processing gave samples that are not numbers")
    name = clip_name(task.location, digest)
    path = Path(settings.out) / name
    try:
        write_wav(path, out, XTTS_SAMPLE_RATE)
    except OSError as exc:  # the prepared folder's disk, not the clip: Prepare stops with this
        return Converted(digest, error=f"{path} could not be written ({exc.strerror or exc})", write_failed=True)
    probe = probe_file(os.fspath(path), True, float("inf"))
    return Converted(digest, name, probe=probe, **done)


def convert_item(item: tuple, settings: ConvertSettings) -> Converted:
    """The pool's task: item is (row, split, excluded, corrected text) as Prepare takes the rows."""
    row, _split, excluded, _text = item
    return convert_clip(ConvertTask(row.audio_location, excluded), settings)
