"""Speech as the bytes of each of OpenAI's response formats, chunk by chunk as it is generated.

- wav: a header, then 16-bit PCM as it comes. The header's sizes are 0xFFFFFFFF ("unknown, read to the end"), as
  OpenAI's streamed wav has them: soundfile, Python's `wave` and ffmpeg read it whole.
- pcm: raw 16-bit signed little-endian mono samples at the model's rate (24 kHz for XTTS), as OpenAI's pcm.
- mp3 (constant bitrate) and opus (in Ogg): libsndfile's encoders (soundfile), whose bytes are sent as they are
  written. At its end the MP3 encoder rewrites its first frame's tag (the length, for a variable bitrate); the tag of
  a constant bitrate is not needed to decode, so that rewrite is dropped (already sent) and every decoder reads the
  stream whole (a variable bitrate would be misread by libsndfile: it is not used).
- flac: sent whole once the speech ends: its header holds the length and a checksum, which libsndfile needs to read
  it back (a FLAC stream of unknown length fails there).
- aac: no encoder is installed; asked for, it is refused with the formats this server has (as is mp3 or opus where
  the installed libsndfile lacks it).
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

OPENAI_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
MP3_COMPRESSION = 0.5  # libsndfile's 0 (best) - 1 (smallest): ~80 kbit/s at 24 kHz mono, constant


def pcm16(samples: np.ndarray) -> bytes:
    """Float samples (-1..1) as 16-bit signed little-endian PCM."""
    clipped = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    return np.round(clipped * 32767.0).astype("<i2").tobytes()


class Encoder:
    """One response's encoder: `header()` first, `add(samples)` per generated chunk, `finish()` at the end; each
    returns the bytes to send now (maybe none)."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate

    def header(self) -> bytes:
        return b""

    def add(self, samples: np.ndarray) -> bytes:
        raise NotImplementedError

    def finish(self) -> bytes:
        return b""


class PcmEncoder(Encoder):
    def add(self, samples: np.ndarray) -> bytes:
        return pcm16(samples)


def streamed_wav_header(sample_rate: int) -> bytes:
    """A 16-bit mono WAV header whose RIFF and data sizes are unknown (0xFFFFFFFF: read to the end)."""
    unknown = 0xFFFFFFFF
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", unknown)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + (struct.pack("<I", unknown))
    )


class WavEncoder(PcmEncoder):
    def header(self) -> bytes:
        return streamed_wav_header(self.sample_rate)


class _AppendOnly(io.RawIOBase):
    """A file for libsndfile that hands on what is appended; a write over bytes already handed on is dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0  # bytes written at the end so far
        self.position = 0
        self.pending = bytearray()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def write(self, data: bytes) -> int:  # type: ignore[override]
        data = bytes(data)
        count = len(data)
        if self.position > self.size:  # a hole (never seen from these encoders): zeros
            self.pending += bytes(self.position - self.size)
            self.size = self.position
        fresh = data[self.size - self.position :] if self.position < self.size else data
        if self.position + count > self.size:
            self.pending += fresh
            self.size = self.position + count
        self.position += count
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = base + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        data, self.pending = bytes(self.pending), bytearray()
        return data


class SoundfileEncoder(Encoder):
    """libsndfile's encoder of a format, its bytes handed on as written (streamed) or all at the end."""

    def __init__(self, sample_rate: int, format: str, subtype: str, streamed: bool, **options: object) -> None:
        import soundfile as sf

        super().__init__(sample_rate)
        self.streamed = streamed
        self.sink: _AppendOnly | io.BytesIO = _AppendOnly() if streamed else io.BytesIO()
        self.file = sf.SoundFile(
            self.sink, "w", samplerate=sample_rate, channels=1, format=format, subtype=subtype, **options
        )

    def _taken(self) -> bytes:
        return self.sink.take() if isinstance(self.sink, _AppendOnly) else b""

    def add(self, samples: np.ndarray) -> bytes:
        data = np.asarray(samples, dtype=np.float32).reshape(-1)
        if data.size:
            self.file.write(np.clip(data, -1.0, 1.0))
        return self._taken()

    def finish(self) -> bytes:
        self.file.close()
        return self._taken() if self.streamed else self.sink.getvalue()


@dataclass(frozen=True)
class Format:
    name: str
    media_type: str
    streamed: bool  # bytes leave as the speech is generated (else once it ends)
    make: Callable[[int], Encoder]


def _soundfile_format(format: str, subtype: str, streamed: bool, **options: object) -> Callable[[int], Encoder]:
    return lambda rate: SoundfileEncoder(rate, format, subtype, streamed, **options)


_CANDIDATES = (
    Format("wav", "audio/wav", True, WavEncoder),
    Format("pcm", "audio/pcm", True, PcmEncoder),
    Format(
        "mp3",
        "audio/mpeg",
        True,
        _soundfile_format("MP3", "MPEG_LAYER_III", True, bitrate_mode="CONSTANT", compression_level=MP3_COMPRESSION),
    ),
    Format("opus", "audio/ogg", True, _soundfile_format("OGG", "OPUS", True)),
    Format("flac", "audio/flac", False, _soundfile_format("FLAC", "PCM_16", False)),
)


def _works(form: Format) -> bool:
    """Whether this machine's libraries encode the format (a tenth of a second of silence, at 24 kHz)."""
    try:
        encoder = form.make(24000)
        encoder.header()
        encoder.add(np.zeros(2400, dtype=np.float32))
        encoder.finish()
        return True
    except Exception:  # noqa: BLE001 - a libsndfile without the codec: the format is not offered
        return False


@functools.lru_cache(maxsize=1)
def available_formats() -> dict[str, Format]:
    """The response formats this server encodes, by name (OpenAI's names)."""
    return {form.name: form for form in _CANDIDATES if _works(form)}
