"""Reading audio of any format as mono float32 samples and writing 16-bit PCM WAVs. Sources are only read.

A file too long to decode in memory is an AudioError (never an escaping MemoryError); `seconds` reads
only the beginning of a file, for previews of files of any length."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from utils.constants import XTTS_SAMPLE_RATE
from utils.files import atomic_write


class AudioError(Exception):
    """The file is missing or cannot be decoded."""


def read_mono(path: str | os.PathLike, seconds: float | None = None) -> tuple[np.ndarray, int, int]:
    """Mono float32 samples at the file's own rate (the first `seconds` only, when given), and the
    channel count: soundfile first, FFmpeg (through torchaudio) for formats libsndfile lacks."""
    import soundfile as sf

    try:
        try:
            rate = sf.info(str(path)).samplerate
            frames = -1 if seconds is None else max(1, int(seconds * rate))
            data, rate = sf.read(str(path), frames=frames, dtype="float32", always_2d=True)
            return data.mean(axis=1), int(rate), data.shape[1]
        except (sf.LibsndfileError, RuntimeError, TypeError):
            pass
        return _read_with_ffmpeg(path, seconds)
    except MemoryError as exc:
        raise AudioError("is too long to decode in memory; cut it into shorter files") from exc


def _read_with_ffmpeg(path: str | os.PathLike, seconds: float | None) -> tuple[np.ndarray, int, int]:
    try:
        import torchaudio

        if seconds is None:
            wav, rate = torchaudio.load(str(path))
        else:  # torchaudio's loader is torchcodec's: it decodes just the range asked for
            from torchcodec.decoders import AudioDecoder

            part = AudioDecoder(str(path)).get_samples_played_in_range(0.0, seconds)
            wav, rate = part.data, part.sample_rate
        return wav.mean(dim=0).numpy().astype(np.float32), int(rate), wav.shape[0]
    except MemoryError:
        raise
    except Exception as exc:
        raise AudioError(f"cannot be decoded ({type(exc).__name__}: {str(exc)[:120]})") from exc


def resample(wav: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """Resample float32 mono audio with torchaudio's sinc interpolation (no-op at the same rate)."""
    if rate == target_rate:
        return np.ascontiguousarray(wav, dtype=np.float32)
    import torch
    import torchaudio

    tensor = torch.from_numpy(np.ascontiguousarray(wav, dtype=np.float32))
    return torchaudio.functional.resample(tensor, rate, target_rate).numpy()


def load_audio(
    path: str | os.PathLike, target_rate: int | None = XTTS_SAMPLE_RATE, *, seconds: float | None = None
) -> tuple[np.ndarray, int]:
    """Float32 mono samples of any format soundfile or FFmpeg reads, resampled to `target_rate`
    (None keeps the file's rate); only the first `seconds` when given. The file is only read."""
    wav, rate, _ = read_mono(path, seconds)
    if target_rate is None:
        return np.ascontiguousarray(wav, dtype=np.float32), rate
    return resample(wav, rate, target_rate), target_rate


def peak_normalise(wav: np.ndarray, peak: float = 0.99) -> tuple[np.ndarray, float]:
    """Audio over full scale (float files can hold values past +-1.0) scaled down to `peak`, and the gain
    applied (1.0 when nothing was over). Scaling keeps the waveform; clipping would distort it."""
    top = float(np.max(np.abs(wav))) if wav.size else 0.0
    if top <= 1.0:
        return wav, 1.0
    gain = peak / top
    return (wav * gain).astype(np.float32), gain


def write_wav(path: str | os.PathLike, wav: np.ndarray, rate: int, *, overwrite: bool = True) -> Path:
    """Write mono float audio as 16-bit PCM WAV (clipped to [-1, 1]) through a temporary file.

    With overwrite=False an existing file is refused (FileExistsError), so a user's recording is
    never clobbered by accident.
    """
    import soundfile as sf

    path = Path(path)
    wav = np.clip(np.asarray(wav, dtype=np.float32), -1.0, 1.0)
    if wav.ndim != 1:
        raise ValueError(f"expected mono audio, got shape {wav.shape}")
    if not overwrite and (path.exists() or path.is_symlink()):
        raise FileExistsError(f"{path} already exists")
    return atomic_write(path, lambda handle: sf.write(handle, wav, rate, subtype="PCM_16", format="WAV"))
