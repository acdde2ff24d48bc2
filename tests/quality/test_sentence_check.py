"""A spoken sentence's check (utils/quality/sentence_check.py) on real speech heard by the bundled Whisper: a clean
sentence passes, one said twice or cut short fails with its reasons, the best of a sentence's tries is the clean
one whatever their order, and a language the bundled Whisper cannot hear keeps its stop and length checks."""

from __future__ import annotations

from itertools import permutations

import numpy as np

from tests.quality.speech import SENTENCES, VOICE_A
from utils.audio.io import load_audio
from utils.quality.sentence_check import MAX_CER, UNKNOWN_PACE, SentenceCheck, best_try

RATE = 24000


def test_a_clean_sentence_passes_and_a_babbled_or_cut_one_fails(espeak_clips):
    text = SENTENCES[0]
    wav, _ = load_audio(espeak_clips[(VOICE_A, 0)], RATE)
    check = SentenceCheck("en", UNKNOWN_PACE)
    assert check.transcriber is not None and check.whisper == "tiny.en", check.unheard
    clean = check.score(text, wav, RATE, True, 1, 7)
    assert clean.passed and clean.cer <= MAX_CER and 0.5 < clean.duration_ratio < 1.5, clean
    babbled = check.score(text, np.concatenate([wav, wav]), RATE, True, 2, 8)
    assert any("words after the text" in why for why in babbled.failures), babbled
    assert any("times the speaker's length (over 1.5)" in why for why in babbled.failures), babbled
    cut = check.score(text, wav[: len(wav) // 3], RATE, False, 3, 9)
    assert cut.failures[0] == "did not stop (cut at its token cap)" and cut.cer > MAX_CER, cut
    for order in permutations([babbled, cut, clean]):
        assert best_try(order) is clean
    assert best_try([cut, babbled]).number == min((cut, babbled), key=lambda t: len(t.failures)).number


def test_a_language_the_bundled_whisper_cannot_hear_keeps_stop_and_length(espeak_clips):
    check = SentenceCheck("fr", UNKNOWN_PACE)
    if check.transcriber is not None:  # a multilingual Whisper on this machine: it is heard
        return
    assert "hears English only" in check.unheard and "models/whisper/small/" in check.unheard
    wav, _ = load_audio(espeak_clips[(VOICE_A, 1)], RATE)
    scores = check.score("nous entraînons le modèle", wav, RATE, False, 1, 1)
    assert scores.transcript is None and scores.cer is None and scores.failures[0].startswith("did not stop")
