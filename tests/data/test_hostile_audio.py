"""Hostile audio (built here): truncated WAVs, float audio over full scale, hour-scale files, NaNs. Each gets an
exact outcome, memory stays bounded, and the user's files stay byte-identical."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import SAMPLE_RATE, digests, run_watched, synth_speech, write_clip
from utils.audio.io import load_audio
from utils.data.validation import validate_dataset

HEADER = "audio_file|text|speaker_name"


def dataset(folder: Path, special: dict[str, str]) -> Path:
    """Two good clips plus the special rows {audio file: text}; returns the CSV."""
    lines = [HEADER]
    for i in range(2):
        write_clip(folder / "wavs" / f"good{i}.wav", 1.5, i)
        lines.append(f"wavs/good{i}.wav|good {i}|a")
    lines += [f"{name}|{text}|a" for name, text in special.items()]
    csv_path = folder / "m.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    return csv_path


def validate(csv_path: Path, **options):
    before = digests(csv_path.parent)
    report = validate_dataset(csv_path, **options)
    assert digests(csv_path.parent) == before, "validation changed the user's files"
    return report


def reasons(report, line: int) -> list[str]:
    return [f"{p.severity}: {p.reason}" for p in report.problems if p.line == line]


def truncated_wav(path: Path, seconds: float = 5.14, keep: float = 0.5) -> Path:
    """A PCM WAV whose header declares `seconds` but whose data stops after `keep` of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), synth_speech(seconds, 3), SAMPLE_RATE, subtype="PCM_16")
    data = path.read_bytes()
    at = data.index(b"data") + 8
    path.write_bytes(data[: at + int((len(data) - at) * keep)])
    return path


@pytest.mark.parametrize("audio_check", ["full", "header"])
def test_wav_header_longer_than_its_data_is_an_error(tmp_path, audio_check):
    truncated_wav(tmp_path / "wavs" / "cut.wav")
    report = validate(dataset(tmp_path, {"wavs/cut.wav": "five seconds of words"}), audio_check=audio_check)
    assert reasons(report, 4) == [
        "error: Audio is truncated: its WAV header declares 5.14 s but the file holds only "
        "2.57 s (an interrupted copy or export?), so its text would not match. Copy or "
        "export it again."
    ]
    assert report.rows_usable == 2


def _set_data_size(path: Path, size: int) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b"data")
    data[at + 4 : at + 8] = struct.pack("<I", size)
    path.write_bytes(bytes(data))


def test_streamed_wav_with_unknown_data_size_is_accepted(tmp_path):
    clip = write_clip(tmp_path / "wavs" / "stream.wav", 2.0, 5)
    _set_data_size(clip, 0xFFFFFFFF)  # what a recorder writing to a pipe leaves
    report = validate(dataset(tmp_path, {"wavs/stream.wav": "streamed"}))
    assert report.rows_usable == 3 and not report.problems


def test_wav_with_chunks_before_its_data_is_measured_right(tmp_path):
    clip = write_clip(tmp_path / "wavs" / "tagged.wav", 2.0, 6)
    data = clip.read_bytes()
    at = data.index(b"data")
    info = b"INFOISFT" + struct.pack("<I", 5) + b"abcde"  # an editor's tag; odd size, so a pad byte follows
    listing = b"LIST" + struct.pack("<I", len(info)) + info + b"\x00"
    body = data[12:at] + listing + data[at:]
    clip.write_bytes(b"RIFF" + struct.pack("<I", len(body) + 4) + b"WAVE" + body)
    assert sf.info(str(clip)).frames == 2 * SAMPLE_RATE
    report = validate(dataset(tmp_path, {"wavs/tagged.wav": "tagged"}))
    assert report.rows_usable == 3 and not report.problems


def hot_float_wav(path: Path, peak: float = 8.0, seconds: float = 2.0) -> Path:
    """Float audio peaking at `peak` (a DAW export with gain), as the issue's 8.0."""
    path.parent.mkdir(parents=True, exist_ok=True)
    voice = synth_speech(seconds, 7)
    sf.write(str(path), voice * (peak / np.abs(voice).max()), SAMPLE_RATE, subtype="FLOAT")
    return path


def test_float_wav_over_full_scale_is_flagged_with_what_prepare_does(tmp_path):
    hot_float_wav(tmp_path / "wavs" / "hot.wav")
    report = validate(dataset(tmp_path, {"wavs/hot.wav": "loud"}))
    assert report.rows_usable == 3
    assert reasons(report, 4) == [
        "warning: Clip peaks at 8.00, 18.1 dB over full scale (FLOAT audio). Prepare scales "
        "it down to a 0.99 peak instead of clipping it; training straight from this CSV "
        "would clip it (coqui's loader cuts samples at 1.0)."
    ]


def test_pcm_at_full_scale_may_be_clipped(tmp_path):
    (tmp_path / "wavs").mkdir(parents=True)
    loud = np.clip(synth_speech(2.0, 8) * 6, -1, 1)
    sf.write(str(tmp_path / "wavs" / "loud.wav"), loud, SAMPLE_RATE, subtype="PCM_16")
    report = validate(dataset(tmp_path, {"wavs/loud.wav": "loud"}))
    assert reasons(report, 4) == ["warning: Clip reaches full scale: it may be clipped (distorted)."]


def test_nan_samples_and_empty_files_are_errors(tmp_path):
    (tmp_path / "wavs").mkdir(parents=True)
    broken = synth_speech(2.0, 9)
    broken[5000] = np.nan
    sf.write(str(tmp_path / "wavs" / "nan.wav"), broken, SAMPLE_RATE, subtype="FLOAT")
    sf.write(str(tmp_path / "wavs" / "empty.wav"), np.zeros(0, dtype=np.float32), SAMPLE_RATE)
    report = validate(dataset(tmp_path, {"wavs/nan.wav": "nan", "wavs/empty.wav": "empty"}))
    assert reasons(report, 4) == ["error: Audio contains NaN or infinite samples."]
    assert reasons(report, 5) == ["error: Audio has no samples."]


def _long_stereo_float(path: Path, seconds: float, rate: int = 48000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    mono = synth_speech(seconds, 11, rate)
    sf.write(str(path), np.stack([mono, 0.5 * mono], axis=1), rate, subtype="FLOAT")
    return path


def _traced(function):
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_long_file_over_the_limit_is_rejected_from_its_header_without_decoding(tmp_path):
    clip = _long_stereo_float(tmp_path / "wavs" / "hour.wav", 60.0)  # 23 MB of samples
    csv_path = dataset(tmp_path, {"wavs/hour.wav": "an hour"})
    before = digests(tmp_path)
    validate_dataset(csv_path)  # imports and caches first
    report, peak = _traced(lambda: validate_dataset(csv_path))
    assert digests(tmp_path) == before
    assert reasons(report, 4)[0].startswith("error: Clip is 60.00 s, longer than the 11.61 s limit")
    assert peak < 2 * 1024**2, f"{peak / 1024**2:.1f} MiB traced: the file was decoded"
    assert clip.stat().st_size > 20 * 1024**2


def test_long_file_within_the_limit_is_checked_in_bounded_memory(tmp_path):
    _long_stereo_float(tmp_path / "wavs" / "long.wav", 60.0)
    csv_path = dataset(tmp_path, {"wavs/long.wav": "a minute"})
    before = digests(tmp_path)
    report, peak = _traced(lambda: validate_dataset(csv_path, max_audio_length=70 * 22050, audio_check="full"))
    assert digests(tmp_path) == before
    assert report.rows_usable == 3 and report.audio_check == "full"
    # Decoding it whole would take 23 MB (plus a mono copy); blocks take 0.5 MB each.
    assert peak < 4 * 1024**2, f"{peak / 1024**2:.1f} MiB traced for a 23 MB file"


def test_preview_reads_only_the_beginning(tmp_path):
    clip = _long_stereo_float(tmp_path / "wavs" / "long.wav", 60.0)
    (wav, rate), peak = _traced(lambda: load_audio(clip, None, seconds=12))
    assert (len(wav), rate) == (12 * 48000, 48000)
    assert peak < 8 * 1024**2, f"{peak / 1024**2:.1f} MiB traced for 12 s of a 60 s file"


needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is needed to write an m4a file")


@needs_ffmpeg
def test_long_m4a_is_measured_from_its_header(tmp_path):
    m4a = tmp_path / "wavs" / "long.m4a"
    m4a.parent.mkdir(parents=True)
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=300:duration=13", "-ac", "2", str(m4a)],
        check=True,
    )
    report = validate(dataset(tmp_path, {"wavs/long.m4a": "thirteen seconds"}))
    assert (
        reasons(report, 4)[0].startswith("error: Clip is 13.0")
        and "longer than the 11.61 s limit" in reasons(report, 4)[0]
    )
    wav, rate = load_audio(m4a, None, seconds=3)
    assert rate == 44100 and abs(len(wav) - 3 * 44100) < 1100


_UNDER_A_MEMORY_LIMIT = """
import re, resource, sys
from pathlib import Path
from utils.audio.io import AudioError, read_mono
from utils.data.validation import validate_dataset
folder = Path(sys.argv[1])
validate_dataset(folder / "small.csv")  # every import and one-time allocation before the limit
size = int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + 48 * 1024**2, resource.RLIM_INFINITY))
try:
    read_mono(folder / "wavs" / "long.wav")
    print("decoded whole")
except AudioError as exc:
    print("AudioError:", exc)
report = validate_dataset(folder / "big.csv", max_audio_length=22050 * 200)
print("usable", report.rows_usable, [p.reason for p in report.problems])
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_under_a_memory_limit_validation_finishes_and_decoding_fails_cleanly(tmp_path):
    _long_stereo_float(tmp_path / "wavs" / "long.wav", 120.0)  # 46 MB of samples; whole + mono copy = 69 MB
    dataset(tmp_path, {})
    (tmp_path / "small.csv").write_text((tmp_path / "m.csv").read_text())
    (tmp_path / "big.csv").write_text(f"{HEADER}\nwavs/long.wav|two minutes|a\nwavs/good0.wav|good|a\n")
    result = run_watched(
        [sys.executable, "-c", _UNDER_A_MEMORY_LIMIT, str(tmp_path)], text=True, cwd=Path(__file__).resolve().parents[2]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "AudioError: is too long to decode in memory; cut it into shorter files",
        "usable 2 []",
    ]
