"""Prepare evens loudness by default and removes noise on request (issue 28), on real speech (espeak-ng): clips
recorded 26 dB apart come out within 2 LU of each other, white noise at 10 dB SNR comes out at least 10 dB
lower, a clip that cannot be used is a rejected row, and the user's files stay byte-identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import digests
from tests.quality.speech import SENTENCES, VOICE_A, VOICE_B, speak
from utils.audio.levels import integrated_loudness
from utils.audio.loudness import TRUE_PEAK_CEILING_DBTP, true_peak_dbtp
from utils.data.prepare import prepare_dataset

RATE = 22050


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> list[np.ndarray]:
    """Six espeak-ng sentences, two voices, as float audio at 22.05 kHz."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (scripts/setup.sh --test installs it)")
    folder = tmp_path_factory.mktemp("espeak")
    clips = []
    for i, text in enumerate(SENTENCES):
        wav, rate = sf.read(str(speak(text, folder / f"s{i}.wav", VOICE_A if i % 2 else VOICE_B)), dtype="float32")
        assert rate == RATE
        clips.append(wav)
    return clips


def _dataset(folder: Path, clips: list[np.ndarray], subtype: str = "PCM_16") -> Path:
    (folder / "wavs").mkdir(parents=True)
    lines = ["audio_file|text|speaker_name"]
    for i, wav in enumerate(clips):
        sf.write(str(folder / "wavs" / f"take_{i}.wav"), wav, RATE, subtype=subtype)
        lines.append(f"wavs/take_{i}.wav|{SENTENCES[i % len(SENTENCES)]}|speaker")
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n")
    return folder / "metadata.csv"


def _prepared_clips(result) -> dict[str, np.ndarray]:
    """Prepared audio by the source clip's name (take_N)."""
    found = {}
    for csv in (result.train_csv, result.eval_csv):
        for line in csv.read_text().splitlines()[1:]:
            name = line.split("|")[0]
            found[name.split("/")[-1].rsplit("_", 1)[0]] = sf.read(str(result.folder / name), dtype="float32")[0]
    return found


def _loudness(wav: np.ndarray) -> float:
    value, why = integrated_loudness(wav, RATE)
    assert value is not None, why
    return value


def noise_floor_db(wav: np.ndarray) -> float:
    """The quietest 10% of 20 ms frames against the clip's RMS, in dB: the noise between the words."""
    frame = int(0.02 * RATE)
    frames = wav[: len(wav) // frame * frame].reshape(-1, frame).astype(np.float64)
    power = np.mean(frames**2, axis=1)
    return float(10 * np.log10(max(np.percentile(power, 10), 1e-20) / np.mean(wav.astype(np.float64) ** 2)))


def test_clips_recorded_26_db_apart_come_out_within_2_lu(tmp_path, speech):
    gains_db = [0.0, -26.0, -6.0, -20.0, -12.0, -3.0]
    clips = [wav * np.float32(0.9 / np.abs(wav).max() * 10 ** (gain / 20)) for wav, gain in zip(speech, gains_db)]
    source = _dataset(tmp_path / "voice", clips)
    before = digests(tmp_path / "voice")
    inputs = [_loudness(wav) for wav in clips]
    assert max(inputs) - min(inputs) > 20, inputs

    result = prepare_dataset(source, tmp_path / "out")
    out = _prepared_clips(result)
    levels = [_loudness(out[f"take_{i}"]) for i in range(len(clips))]
    assert max(levels) - min(levels) <= 2.0, f"prepared loudness {levels} from inputs {inputs}"
    assert all(true_peak_dbtp(wav) <= TRUE_PEAK_CEILING_DBTP + 0.1 for wav in out.values()), "nothing over the ceiling"
    assert digests(tmp_path / "voice") == before, "the user's files are only read"
    summary = result.summary()
    assert "Loudness evened to -23 LUFS" in summary and "take_1.wav" in summary, summary
    changes = [json.loads(line) for line in (tmp_path / "out" / "clip_changes.jsonl").read_text().splitlines()]
    by_file = {c["audio_file"]: c for c in changes}
    assert by_file["wavs/take_1.wav"]["gain_db"] - by_file["wavs/take_0.wav"]["gain_db"] == pytest.approx(26, abs=1)

    kept = prepare_dataset(source, tmp_path / "kept", even_loudness=False)
    kept_levels = [_loudness(wav) for wav in _prepared_clips(kept).values()]
    assert max(kept_levels) - min(kept_levels) > 20, "even_loudness=False keeps the recorded levels"
    assert "Levels kept as recorded" in kept.summary()


def test_denoise_lowers_the_noise_floor_by_10_db(tmp_path, speech):
    rng = np.random.default_rng(7)
    noisy = []
    for wav in speech[:4]:
        clean = wav * np.float32(0.5 / np.abs(wav).max())
        rms = np.sqrt(np.mean(clean.astype(np.float64) ** 2))
        noisy.append((clean + rng.standard_normal(len(clean)) * rms / 10 ** (10 / 20)).astype(np.float32))  # 10 dB
    source = _dataset(tmp_path / "voice", noisy)
    before = digests(tmp_path / "voice")

    result = prepare_dataset(source, tmp_path / "out", denoise=True)
    out = _prepared_clips(result)
    for i, wav in enumerate(noisy):
        floor_in, floor_out = noise_floor_db(wav), noise_floor_db(out[f"take_{i}"])
        assert floor_out <= floor_in - 10, f"take_{i}: noise floor {floor_in:.1f} -> {floor_out:.1f} dB"
        lag = np.argmax(np.correlate(out[f"take_{i}"][:RATE], wav[:RATE], "full")) - (RATE - 1)
        assert abs(lag) <= 2, f"the denoised clip keeps its timing (lag {lag} samples)"
    assert digests(tmp_path / "voice") == before
    assert "Denoised with DeepFilterNet 3" in result.summary() and "SNR" in result.summary()
    changes = [json.loads(line) for line in (tmp_path / "out" / "clip_changes.jsonl").read_text().splitlines()]
    assert all(c["snr_after"] > c["snr_before"] + 10 for c in changes), changes
    assert len(result.examples) == 3 and all(Path(prepared).is_file() for _, prepared in result.examples)


def test_a_clip_that_cannot_be_decoded_is_a_rejected_row_not_a_failed_prepare(tmp_path, speech):
    source = _dataset(tmp_path / "voice", speech[:4])
    flac = tmp_path / "voice" / "wavs" / "take_9.flac"
    sf.write(str(flac), speech[4], RATE)
    data = bytearray(flac.read_bytes())
    data[300:] = bytes((b * 7 + 13) % 256 for b in data[300:])  # its header intact, its frames garbage
    flac.write_bytes(bytes(data))
    with open(source, "a") as handle:
        handle.write("wavs/take_9.flac|a clip whose frames are damaged|speaker\n")
    result = prepare_dataset(source, tmp_path / "out", audio_check="header")  # the header check passes it
    assert result.added_train + result.added_eval == 4
    assert [(r["line"], r["audio_file"]) for r in result.rejected] == [(6, "wavs/take_9.flac")], result.rejected
    assert "1 row(s) rejected and left out: line 6 (wavs/take_9.flac: " in result.summary()


def test_float_audio_far_over_full_scale_is_evened_not_clipped(tmp_path, speech):
    hot = speech[0] * np.float32(8.0 / np.abs(speech[0]).max())
    source = _dataset(tmp_path / "voice", [hot, speech[1]], subtype="FLOAT")
    result = prepare_dataset(source, tmp_path / "out")
    out = _prepared_clips(result)["take_0"]
    assert np.abs(out).max() < 0.999 and np.corrcoef(out, hot)[0, 1] > 0.999, "one gain: the waveform is kept"
    assert _loudness(out) == pytest.approx(-23, abs=0.5)
