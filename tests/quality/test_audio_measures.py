"""Audio measures on constructed signals whose answers are known, and outlier flags."""

import hashlib
import math

import numpy as np
import pytest
import soundfile as sf

from utils.quality.audio_measures import clipping_ratio, flag_outliers, measure_file, measure_wav

SR = 48000


def sine(seconds, amplitude, freq=997.0, sr=SR):
    t = np.arange(round(seconds * sr)) / sr
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def bursts(seconds, amplitude, sr=SR, freq=300.0, on_s=0.3, period_s=0.5):
    """Tone bursts with pauses between them, like words: 60 % of the time sounding."""
    t = np.arange(round(seconds * sr)) / sr
    return (amplitude * np.sin(2 * np.pi * freq * t) * ((t % period_s) < on_s)).astype(np.float32)


def test_loudness_of_a_sine_at_known_level():
    # BS.1770: a full-scale 1 kHz sine reads -3.01 LUFS; at half amplitude (-6.02 dB), -9.03.
    m = measure_wav(sine(3.0, 0.5), SR)
    assert m.loudness_lufs == pytest.approx(-9.03, abs=0.1)
    assert m.peak_dbfs == pytest.approx(-6.02, abs=0.01)
    quieter = measure_wav(sine(3.0, 0.5 * 10 ** (-12 / 20)), SR)
    assert m.loudness_lufs - quieter.loudness_lufs == pytest.approx(12.0, abs=0.05)
    assert m.clipping_ratio == 0.0 and m.leading_silence_s == 0.0 and m.trailing_silence_s == 0.0


def test_hard_clipping_ratio():
    full = sine(2.0, 1.0, freq=200.0)
    clipped = np.clip(full, -0.6, 0.6)
    # |sin| >= 0.6 for a fraction 1 - (2/pi) asin(0.6) of the time.
    expected = 1 - 2 / math.pi * math.asin(0.6)
    assert clipping_ratio(clipped) == pytest.approx(expected, abs=0.01)
    assert clipping_ratio(clipped * 0.5) == pytest.approx(expected, abs=0.01)  # scaled after clipping
    assert clipping_ratio(full) == 0.0
    assert clipping_ratio(np.round(full * 0.5 * 32767) / 32767) == 0.0  # 16-bit steps are not plateaus
    lightly = np.clip(full, -0.99, 0.99)
    assert 0 < clipping_ratio(lightly) < 0.1


def test_leading_and_trailing_silence():
    for sr in (16000, 22050, 48000):
        wav = np.concatenate([np.zeros(round(0.5 * sr)), sine(1.2, 0.5, sr=sr), np.zeros(round(0.25 * sr))])
        m = measure_wav(wav, sr)
        assert m.leading_silence_s == pytest.approx(0.5, abs=0.012), sr
        assert m.trailing_silence_s == pytest.approx(0.25, abs=0.012), sr
        assert m.duration == pytest.approx(1.95, abs=1e-3)
        # A noise floor 40 dB down does not count as sound.
        noisy = wav + np.random.default_rng(sr).normal(0, 0.0035, wav.size)
        n = measure_wav(noisy, sr)
        assert n.leading_silence_s == pytest.approx(0.5, abs=0.012)
        assert n.trailing_silence_s == pytest.approx(0.25, abs=0.012)


@pytest.mark.parametrize("snr_db", [10.0, 20.0, 30.0])
def test_snr_estimate_of_noise_added_at_known_snr(snr_db):
    amplitude = 0.3
    signal = bursts(4.0, amplitude)
    # SNR as the estimator defines it: power while sounding over noise power.
    noise_std = math.sqrt(amplitude**2 / 2 / 10 ** (snr_db / 10))
    noisy = signal + np.random.default_rng(int(snr_db)).normal(0, noise_std, signal.size)
    assert measure_wav(noisy, SR).snr_db == pytest.approx(snr_db, abs=1.5)


def test_silent_and_short_clips_say_why():
    silent = measure_wav(np.zeros(SR, dtype=np.float32), SR)
    assert silent.loudness_lufs is None and silent.snr_db is None and "silent" in silent.reason
    assert silent.leading_silence_s == silent.trailing_silence_s == 1.0
    short = measure_wav(sine(0.2, 0.5), SR)
    assert short.loudness_lufs is None and "shorter than 0.4 s" in short.reason


def dataset_clip(i, rng, level_db=0.0):
    amplitude = 0.3 * 10 ** ((level_db + rng.uniform(-1, 1)) / 20)
    wav = bursts(2.0, amplitude, sr=22050, freq=200 + 20 * i)
    wav = np.concatenate([np.zeros(2205), wav, np.zeros(2205)])  # 0.1 s at both ends
    return wav + rng.normal(0, 0.0005, wav.size).astype(np.float32)


def test_flag_outliers_finds_the_odd_clips():
    rng = np.random.default_rng(0)
    clips = [dataset_clip(i, rng) for i in range(12)]
    clips[3] = dataset_clip(3, rng, level_db=-15)  # much quieter than the rest
    clips[5] = np.clip(clips[5] * 4, -0.5, 0.5)  # hard-clipped
    clips[8] = np.concatenate([np.zeros(round(1.5 * 22050)), clips[8]])  # 1.6 s before speech
    clips[10] = clips[10] + rng.normal(0, 0.05, clips[10].size)  # noisy
    measures = [measure_wav(c, 22050, file=f"c{i}.wav") for i, c in enumerate(clips)]
    flagged = {(o.index, o.measure) for o in flag_outliers(measures)}
    assert (3, "loudness_lufs") in flagged
    assert (5, "clipping_ratio") in flagged
    assert (8, "leading_silence_s") in flagged
    assert (10, "snr_db") in flagged
    assert {i for i, _ in flagged} == {3, 5, 8, 10}  # the ordinary clips are left alone
    outlier = next(o for o in flag_outliers(measures) if o.index == 8)
    assert outlier.file == "c8.wav" and any("leading silence" in r for r in outlier.reasons)


def test_flag_outliers_reports_unmeasurable_clips():
    measures = [measure_wav(np.zeros(22050, dtype=np.float32), 22050, file="silent.wav")]
    (outlier,) = flag_outliers(measures)
    assert outlier.measure == "loudness_lufs" and outlier.value is None and "silent" in outlier.reasons[0]


def test_measure_file_only_reads(tmp_path):
    path = tmp_path / "clip.wav"
    sf.write(path, sine(1.0, 0.25, sr=22050), 22050, subtype="PCM_16")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    m = measure_file(path)
    assert m.file == str(path) and m.sample_rate == 22050 and m.duration == pytest.approx(1.0)
    assert m.peak_dbfs == pytest.approx(-12.04, abs=0.05)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
