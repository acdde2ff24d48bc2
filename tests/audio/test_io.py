"""utils.audio.io: any format read as mono float samples, resampled; WAVs written atomically."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from utils.audio.io import load_audio, write_wav


def test_load_audio_downmixes_and_resamples(tmp_path):
    sr_in = 44100
    t = np.arange(sr_in * 2) / sr_in
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    path = tmp_path / "stereo.wav"
    sf.write(path, np.stack([tone, 0.5 * tone], axis=1), sr_in, subtype="FLOAT")
    before = path.read_bytes()

    wav, sr = load_audio(path, 22050)
    assert sr == 22050 and wav.dtype == np.float32 and wav.ndim == 1
    assert len(wav) == pytest.approx(len(tone) / 2, abs=2)
    mid = wav[2000:-2000]  # away from resampling edge effects
    assert np.abs(mid).max() == pytest.approx(0.75 * 0.5, rel=0.02)  # mean of the channels
    spectrum = np.abs(np.fft.rfft(mid))
    assert np.fft.rfftfreq(len(mid), 1 / sr)[spectrum.argmax()] == pytest.approx(440, abs=2)

    native, native_sr = load_audio(path, None)
    assert native_sr == sr_in and np.allclose(native, 0.75 * tone, atol=1e-6)
    assert path.read_bytes() == before


def test_write_wav_roundtrip_and_no_overwrite(tmp_path):
    wav = np.linspace(-1.2, 1.2, 2205).astype(np.float32)  # out-of-range values get clipped
    path = write_wav(tmp_path / "x.wav", wav, 22050)
    info = sf.info(path)
    assert (info.samplerate, info.channels, info.frames, info.subtype) == (22050, 1, 2205, "PCM_16")
    back, _ = sf.read(path, dtype="float32")
    assert np.allclose(back, np.clip(wav, -1, 1), atol=1 / 32767)
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        write_wav(path, np.zeros(10, dtype=np.float32), 22050, overwrite=False)
    assert path.read_bytes() == before
    write_wav(path, np.zeros(10, dtype=np.float32), 22050)
    assert sf.info(path).frames == 10
