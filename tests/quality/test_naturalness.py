"""DistillMOS on real speech: a recording against white noise and a clipped copy of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from utils.audio.io import load_audio
from utils.quality.naturalness import MOS_SAMPLE_RATE, naturalness_of_file, naturalness_of_wav


def real_recording() -> Path:
    """A real person's speech (3 s, mp3) that gradio, a pinned dependency, ships among its media assets."""
    import gradio

    path = Path(gradio.__file__).parent / "media_assets" / "audio" / "heath_ledger.mp3"
    assert path.is_file(), f"{path} is missing from the pinned gradio"
    return path


def test_speech_scores_above_noise_and_a_clipped_copy():
    speech_path = real_recording()
    clean, rate = load_audio(speech_path, MOS_SAMPLE_RATE)
    rms = float(np.sqrt(np.mean(clean**2)))
    noise = np.random.default_rng(0).normal(0.0, rms, size=len(clean)).astype(np.float32)
    top = float(np.max(np.abs(clean)))
    clipped = np.clip(clean * 10.0, -top, top).astype(np.float32)  # clipped at a tenth of its peak

    speech = naturalness_of_file(speech_path)
    assert speech == pytest.approx(naturalness_of_wav(clean, rate), abs=1e-3)
    assert 1.0 <= speech <= 5.0
    assert speech > naturalness_of_wav(noise, rate) + 1.0
    assert speech > naturalness_of_wav(clipped, rate) + 0.5


def test_short_noise_is_not_lifted_by_padding():
    """One second of white noise scores as low as a long stretch of it (the window is filled by repetition)."""
    rng = np.random.default_rng(1)
    short = naturalness_of_wav(rng.normal(0.0, 0.1, MOS_SAMPLE_RATE).astype(np.float32), MOS_SAMPLE_RATE)
    long = naturalness_of_wav(rng.normal(0.0, 0.1, 10 * MOS_SAMPLE_RATE).astype(np.float32), MOS_SAMPLE_RATE)
    assert short < 1.6 and abs(short - long) < 0.3


def test_silence_and_blips_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="silent"):
        naturalness_of_wav(np.zeros(MOS_SAMPLE_RATE, dtype=np.float32), MOS_SAMPLE_RATE)
    with pytest.raises(ValueError, match="less than"):
        naturalness_of_wav(np.ones(100, dtype=np.float32), MOS_SAMPLE_RATE)
