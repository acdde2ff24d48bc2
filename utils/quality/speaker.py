"""Speaker similarity: cosine between Resemblyzer speaker embeddings (d-vectors).

Resemblyzer ships its encoder weights (a 3-layer LSTM, 17 MB) inside the package; it is loaded once
per process, on the CPU (a clip takes tens of milliseconds there, and the GPU stays free for
training). An utterance embedding is L2-normalised and non-negative, so the cosine of two lies in
[0, 1]; a speaker's reference embedding is the normalised mean of the embeddings of several of their
real clips, as in Resemblyzer's ``embed_speaker``. As a guide on espeak-ng voices: the same voice on
different sentences scores about 0.85, a male and a female voice about 0.55.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import numpy as np

from utils.audio.io import AudioError, load_audio, resample

ENCODER_SAMPLE_RATE = 16000
# After Resemblyzer's voice-activity trimming, less than this much audio gives no reliable embedding.
MIN_SPEECH_S = 0.3

_ENCODER = None
_LOCK = threading.Lock()


class SpeakerEncoderUnavailable(RuntimeError):
    """Resemblyzer (or its webrtcvad module) is not installed or its weights cannot be loaded."""


def get_voice_encoder():
    """The process's Resemblyzer ``VoiceEncoder`` on the CPU, loaded on the first call."""
    global _ENCODER
    with _LOCK:
        if _ENCODER is None:
            try:
                from resemblyzer import VoiceEncoder
            except ImportError as exc:
                raise SpeakerEncoderUnavailable(
                    f"speaker similarity needs resemblyzer and webrtcvad ({exc}); install the pinned versions "
                    "from requirements.txt"
                ) from exc
            try:
                _ENCODER = VoiceEncoder("cpu", verbose=False)
            except Exception as exc:  # a broken install, whatever it raises, is "unavailable" with its reason
                raise SpeakerEncoderUnavailable(f"could not load Resemblyzer's encoder: {exc}") from exc
        return _ENCODER


def embed_wav(wav: np.ndarray, sample_rate: int) -> np.ndarray:
    """Utterance embedding (256 floats, unit length) of mono float audio. Raises ValueError when the
    clip holds too little speech after Resemblyzer's silence trimming."""
    from resemblyzer import preprocess_wav

    encoder = get_voice_encoder()
    audio = resample(np.asarray(wav, dtype=np.float32), sample_rate, ENCODER_SAMPLE_RATE)
    if not np.any(audio):  # Resemblyzer's volume normalisation divides by the level
        raise ValueError("the clip is silent: no speaker embedding")
    # Without source_sr Resemblyzer does not resample (we did); it normalises volume and trims silences.
    speech = preprocess_wav(audio)
    if len(speech) < MIN_SPEECH_S * ENCODER_SAMPLE_RATE:
        raise ValueError(f"less than {MIN_SPEECH_S} s of speech found: no speaker embedding")
    return np.asarray(encoder.embed_utterance(speech), dtype=np.float32)


def embed_file(path: str | os.PathLike) -> np.ndarray:
    """Utterance embedding of an audio file (only read). Raises utils.audio.io.AudioError when
    it cannot be decoded, ValueError when it holds too little speech."""
    wav, rate = load_audio(path, ENCODER_SAMPLE_RATE)
    return embed_wav(wav, rate)


def speaker_embedding(clips: Iterable[str | os.PathLike | np.ndarray], sample_rate: int | None = None) -> np.ndarray:
    """Reference embedding of one speaker: the unit-length mean of the utterance embeddings of
    ``clips`` (file paths, or arrays at ``sample_rate``). Clips that cannot be decoded or hold too little
    speech are left out; ValueError when none is usable (the message gives each clip's reason)."""
    embeddings, problems = [], []
    for clip in clips:
        try:
            if isinstance(clip, np.ndarray):
                if sample_rate is None:
                    raise ValueError("pass sample_rate with audio arrays")
                embeddings.append(embed_wav(clip, sample_rate))
            else:
                embeddings.append(embed_file(clip))
        except (ValueError, AudioError) as exc:
            problems.append(f"{'array' if isinstance(clip, np.ndarray) else clip}: {exc}")
    if not embeddings:
        detail = "; ".join(problems) if problems else "none given"
        raise ValueError(f"no usable reference clip of the speaker ({detail})")
    mean = np.mean(embeddings, axis=0)
    return (mean / np.linalg.norm(mean)).astype(np.float32)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two embeddings."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    if norm == 0:
        raise ValueError("cosine of a zero vector is undefined")
    return float(a @ b / norm)
