"""Loudness evened by one gain (utils.audio.loudness): to the target, never past the true-peak ceiling, never
raised more than MAX_GAIN_DB, and the true peak seen between samples."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SAMPLE_RATE, synth_speech
from utils.audio.levels import integrated_loudness
from utils.audio.loudness import MAX_GAIN_DB, TARGET_LUFS, TRUE_PEAK_CEILING_DBTP, even_loudness, true_peak_dbtp


def test_the_true_peak_sees_peaks_between_samples():
    n = np.arange(SAMPLE_RATE)
    tone = np.sin(2 * np.pi * (SAMPLE_RATE / 4) * n / SAMPLE_RATE + np.pi / 4)  # samples at +-0.707 only
    assert 20 * np.log10(np.abs(tone).max()) == pytest.approx(-3.0, abs=0.05)
    assert true_peak_dbtp(tone) == pytest.approx(0.0, abs=0.2)
    assert true_peak_dbtp(np.zeros(100)) is None


def test_a_clip_is_brought_to_the_target_by_one_gain():
    quiet = synth_speech(3.0, 1) * 0.05
    out, change = even_loudness(quiet, SAMPLE_RATE)
    assert change.after_lufs == pytest.approx(TARGET_LUFS, abs=0.1) and not change.held_by_peak
    assert change.gain_db == pytest.approx(TARGET_LUFS - change.before_lufs, abs=1e-6)
    assert np.corrcoef(out, quiet)[0, 1] > 0.9999, "the waveform is kept"


def test_a_peaky_clip_is_held_under_the_ceiling_and_a_near_silent_one_raised_by_at_most_the_cap():
    clicks = synth_speech(3.0, 2) * 0.02
    clicks[:: SAMPLE_RATE // 4] = 0.9  # a click every 250 ms: peaks far above the speech
    out, change = even_loudness(clicks, SAMPLE_RATE)
    assert change.held_by_peak and change.true_peak_dbtp == pytest.approx(TRUE_PEAK_CEILING_DBTP, abs=0.01)
    assert true_peak_dbtp(out) <= TRUE_PEAK_CEILING_DBTP + 0.01 and change.after_lufs < TARGET_LUFS

    hiss = np.random.default_rng(0).normal(0, 4e-4, 3 * SAMPLE_RATE).astype(np.float32)  # about -65 LUFS
    out, change = even_loudness(hiss, SAMPLE_RATE)
    assert change.held_by_gain and change.gain_db == pytest.approx(MAX_GAIN_DB)
    assert integrated_loudness(out, SAMPLE_RATE)[0] == pytest.approx(change.before_lufs + MAX_GAIN_DB, abs=0.1)
    assert change.after_lufs < TARGET_LUFS - 5


def test_a_clip_without_a_loudness_keeps_its_level_and_says_why():
    blip = synth_speech(0.3, 3)
    out, change = even_loudness(blip, SAMPLE_RATE)
    assert out is blip and change.gain_db == 0.0 and "0.4 s" in change.reason
