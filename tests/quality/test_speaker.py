"""Speaker similarity with Resemblyzer on two espeak-ng voices."""

import numpy as np
import pytest

from tests.quality.speech import VOICE_A, VOICE_B
from utils.audio.io import load_audio
from utils.quality.speaker import cosine, embed_file, embed_wav, get_voice_encoder, speaker_embedding


def test_same_voice_is_more_similar_than_another_voice(espeak_clips):
    reference = speaker_embedding([espeak_clips[VOICE_A, i] for i in (2, 3, 4)])
    assert np.linalg.norm(reference) == pytest.approx(1.0, abs=1e-5)
    for i in (0, 1):  # sentences not in the reference
        same = cosine(embed_file(espeak_clips[VOICE_A, i]), reference)
        other = cosine(embed_file(espeak_clips[VOICE_B, i]), reference)
        assert same > other + 0.15, (same, other)
        assert same > 0.75


def test_encoder_is_loaded_once_and_arrays_match_files(espeak_clips):
    assert get_voice_encoder() is get_voice_encoder()
    wav, sr = load_audio(espeak_clips[VOICE_B, 0], None)
    assert cosine(embed_wav(wav, sr), embed_file(espeak_clips[VOICE_B, 0])) == pytest.approx(1.0, abs=1e-3)


def test_unusable_clips_are_reported(tmp_path, espeak_clips):
    with pytest.raises(ValueError, match="silent"):
        embed_wav(np.zeros(16000, dtype=np.float32), 16000)
    with pytest.raises(ValueError, match="speech"):  # too short to hold 0.3 s of speech
        embed_wav(np.random.default_rng(0).normal(0, 0.1, 3000).astype(np.float32), 16000)
    # A bad clip among good ones is left out; with none usable the error lists each reason.
    good = speaker_embedding([espeak_clips[VOICE_A, 0], tmp_path / "missing.wav"])
    assert cosine(good, embed_file(espeak_clips[VOICE_A, 0])) == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(ValueError, match="missing.wav"):
        speaker_embedding([tmp_path / "missing.wav"])
    with pytest.raises(ValueError, match="none given"):
        speaker_embedding([])
