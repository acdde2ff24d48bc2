"""A clip's duration and level, for the dataset checks, in bounded memory. Files are only read.

Durations come from file headers. A WAV whose header declares more audio than the file holds (an
interrupted copy or export) is an error: its text would describe speech the audio lacks. The level
(RMS, peak, NaN/inf) is measured block by block, so an hour-long file costs a block of memory, and a
file longer than the caller's limit is not decoded at all.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass

import numpy as np

from utils.audio.io import AudioError, read_mono

# Below this RMS level (dBFS) a clip holds no usable speech.
SILENCE_DBFS = -55.0
# Below this RMS around the mean (dBFS), under 24-bit resolution, the samples are one value (rounding aside).
CONSTANT_DBFS = -150.0
BLOCK_FRAMES = 65536  # frames per block of the level scan: 0.5 MiB of stereo float32
# WAV data sizes that streaming writers leave when they never learn the length: not a claim.
_UNKNOWN_SIZES = (0, 0xFFFFFFFF, 0x7FFFFFFF)


@dataclass(frozen=True)
class AudioInfo:
    duration: float  # seconds
    sample_rate: int
    channels: int
    rms_dbfs: float | None = None  # None when only the header was read
    peak: float | None = None  # of the mono mix; over 1.0 only in float files
    subtype: str = ""  # libsndfile's sample format, e.g. PCM_16, FLOAT
    dc_offset: float | None = None  # the mono mix's mean; None when only the header was read
    ac_rms_dbfs: float | None = None  # RMS around that mean (how much the signal moves); None: header only


def level_around_mean(wav: np.ndarray) -> tuple[float, float]:
    """(mean, RMS around the mean in dBFS) of samples: a clip whose RMS around its mean is under SILENCE_DBFS holds
    no sound, whatever its plain RMS (a constant 0.5 is -6 dBFS of DC and nothing to hear)."""
    x = np.asarray(wav, dtype=np.float64)
    mean = float(x.mean()) if x.size else 0.0
    spread = float(np.sqrt(np.mean(np.square(x - mean)))) if x.size else 0.0
    return mean, (20 * math.log10(spread) if spread > 0 else -math.inf)


def constant_signal(info: AudioInfo) -> str:
    """Why a clip that is not silent by its RMS still holds no sound: its samples (nearly) constant, a DC offset
    with nothing moving around it (a broken input, a sensor's output, a file filled with one value); "" otherwise."""
    if info.ac_rms_dbfs is None or info.ac_rms_dbfs >= SILENCE_DBFS:
        return ""
    if info.rms_dbfs is not None and info.rms_dbfs < SILENCE_DBFS:
        return ""  # silent: said as such
    offset = info.dc_offset or 0.0
    if info.ac_rms_dbfs < CONSTANT_DBFS:
        return f"its samples all stay at {offset:+.2f} (a DC offset)"
    return f"its samples stay near {offset:+.2f} (a DC offset), moving around it at {info.ac_rms_dbfs:.0f} dBFS"


def wav_data_claim(path: str | os.PathLike) -> tuple[int, int] | None:
    """(bytes the WAV `data` chunk declares, bytes the file holds after the chunk's start), or None for
    a file that is not RIFF/WAVE or has no data chunk."""
    with open(path, "rb") as handle:
        head = handle.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        size = os.fstat(handle.fileno()).st_size
        position = 12
        for _ in range(1000):  # chunks before `data`: a handful in real files
            if position + 8 > size:
                return None
            handle.seek(position)
            chunk_id, length = struct.unpack("<4sI", handle.read(8))
            if chunk_id == b"data":
                return length, size - position - 8
            position += 8 + length + (length & 1)
    return None


def _check_wav_length(path: str | os.PathLike, duration: float) -> None:
    claim = wav_data_claim(path)
    if claim is None or claim[0] in _UNKNOWN_SIZES:
        return
    declared, present = claim
    if declared <= present:
        return
    if present == 0:
        raise AudioError("is truncated: its WAV header declares audio but the file holds none. Copy or export it again")
    claimed = duration * declared / present
    raise AudioError(
        f"is truncated: its WAV header declares {claimed:.2f} s but the file holds only {duration:.2f} s "
        "(an interrupted copy or export?), so its text would not match. Copy or export it again"
    )


def _scan_levels(path: str, frames: int, rate: int) -> tuple[float, float, float, float]:
    """(RMS dBFS, peak, mean, RMS around the mean in dBFS) of the mono mix, reading BLOCK_FRAMES at a time (the
    spread around the mean merged block by block, Chan et al., exact for a constant signal)."""
    import soundfile as sf

    squares, peak, read = 0.0, 0.0, 0
    mean, spread = 0.0, 0.0  # running mean and sum of squared deviations from it
    for block in sf.blocks(path, blocksize=BLOCK_FRAMES, dtype="float32", always_2d=True):
        mono = block.mean(axis=1)
        if not np.isfinite(mono).all():
            raise AudioError("contains NaN or infinite samples")
        wide = mono.astype(np.float64)
        squares += float(np.dot(wide, wide))
        peak = max(peak, float(np.abs(mono).max()) if mono.size else 0.0)
        if mono.size:
            block_mean = float(wide.mean())
            block_spread = float(np.dot(wide - block_mean, wide - block_mean))
            total = read + mono.size
            delta = block_mean - mean
            spread += block_spread + delta * delta * read * mono.size / total
            mean += delta * mono.size / total
        read += len(mono)
    if read == 0:
        raise AudioError("has no samples")
    if read < frames - rate // 100:
        raise AudioError(
            f"decodes to {read / rate:.2f} s although its header declares {frames / rate:.2f} s: the "
            "file is damaged. Export it again"
        )
    rms = math.sqrt(squares / read)
    around = math.sqrt(max(spread, 0.0) / read)
    return (
        (20 * math.log10(rms) if rms > 0 else -math.inf),
        peak,
        mean,
        (20 * math.log10(around) if around > 0 else -math.inf),
    )


def probe_audio(path: str | os.PathLike, *, full: bool = True, max_seconds: float | None = None) -> AudioInfo:
    """Duration and format from the header; with `full`, also the level, measured block by block. A file
    over `max_seconds` is not decoded (it is unusable anyway). Raises AudioError for a missing, truncated,
    undecodable or empty file."""
    import soundfile as sf

    if not os.path.isfile(path):
        raise AudioError("file not found")
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, TypeError):
        return _probe_other(path, full, max_seconds)  # not a libsndfile format
    if info.frames <= 0 or info.samplerate <= 0:
        raise AudioError("has no samples")
    duration = info.frames / info.samplerate
    _check_wav_length(path, duration)
    header = AudioInfo(duration, int(info.samplerate), int(info.channels), subtype=info.subtype)
    if not full or (max_seconds is not None and duration > max_seconds):
        return header
    try:
        rms_dbfs, peak, mean, around = _scan_levels(str(path), info.frames, int(info.samplerate))
    except sf.LibsndfileError as exc:
        raise AudioError(f"cannot be decoded ({str(exc)[:120]})") from exc
    return AudioInfo(duration, header.sample_rate, header.channels, rms_dbfs, peak, info.subtype, mean, around)


def _probe_other(path: str | os.PathLike, full: bool, max_seconds: float | None) -> AudioInfo:
    """Formats only FFmpeg reads (m4a, aac, wma, webm): the header's duration first, so a long file is
    never decoded; a short one is decoded whole (a clip's worth of memory)."""
    meta = _ffmpeg_metadata(path)
    seconds = getattr(meta, "duration_seconds_from_header", None)
    if seconds and (not full or (max_seconds is not None and seconds > max_seconds)):
        return AudioInfo(float(seconds), int(meta.sample_rate or 0), int(meta.num_channels or 0))
    if not seconds and max_seconds is not None:
        samples, rate, channels = read_mono(path, seconds=max_seconds + 1.0)  # enough to tell "too long"
        if samples.size / rate > max_seconds:
            return AudioInfo(samples.size / rate, rate, channels)
    samples, rate, channels = read_mono(path)
    if samples.size == 0:
        raise AudioError("has no samples")
    if not np.isfinite(samples).all():
        raise AudioError("contains NaN or infinite samples")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    rms_dbfs = 20 * math.log10(rms) if rms > 0 else -math.inf
    mean, around = level_around_mean(samples)
    return AudioInfo(samples.size / rate, rate, channels, rms_dbfs, float(np.abs(samples).max()), "", mean, around)


def _ffmpeg_metadata(path: str | os.PathLike):
    """torchcodec's stream metadata (FFmpeg reads the header), or None."""
    try:
        from torchcodec.decoders import AudioDecoder

        return AudioDecoder(str(path)).metadata
    except Exception:  # noqa: BLE001 - no torchcodec or an unreadable file: decoding says which
        return None
