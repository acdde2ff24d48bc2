"""What the dataset doctor passed that it should flag ("Trust after the run"): a clip of pure DC (a constant 0.5:
-6 dBFS of "level", nothing to hear) raised no warning and Prepare lifted it +3.9 dB into the training set; a clip
overwritten with silence that kept its size and modification time was served from the check cache as usable; and
another dataset's cache entry copied under this one's name was accepted, describing the other CSV."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import SAMPLE_RATE, synth_speech, write_dataset
from utils.data.check_cache import cache_file
from utils.data.prepare import prepare_dataset
from utils.data.validation import validate_dataset


def _reasons(report) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for problem in report.problems:
        found.setdefault(problem.audio_file, []).append(problem.reason)
    return found


@pytest.fixture
def dc_dataset(tmp_path):
    """Eight clean clips, one of pure DC, one of DC with a hiss 80 dB under it, and speech riding on a DC offset."""
    folder = tmp_path / "voice"
    csv = write_dataset(folder, n=8)
    wavs = folder / "wavs"
    rng = np.random.default_rng(5)
    sf.write(str(wavs / "dc.wav"), np.full(2 * SAMPLE_RATE, 0.5, dtype=np.float32), SAMPLE_RATE)
    near = 0.5 + rng.normal(0, 1e-4, 2 * SAMPLE_RATE)
    sf.write(str(wavs / "near_dc.wav"), near.astype(np.float32), SAMPLE_RATE, subtype="FLOAT")
    sf.write(str(wavs / "offset_speech.wav"), synth_speech(2.0, 7) + 0.3, SAMPLE_RATE)
    with csv.open("a") as handle:
        handle.write("wavs/dc.wav|a constant|a\nwavs/near_dc.wav|nearly constant|a\nwavs/offset_speech.wav|speech|a\n")
    return csv


def test_a_constant_signal_is_rejected_and_never_prepared(dc_dataset, tmp_path):
    report = validate_dataset(dc_dataset)
    reasons = _reasons(report)
    assert reasons["wavs/dc.wav"] == [
        "Clip holds no sound (a constant signal): its samples all stay at +0.50 (a DC offset). Nothing in it is speech."
    ]
    (near,) = reasons["wavs/near_dc.wav"]
    assert near.startswith("Clip holds no sound (a constant signal): its samples stay near +0.50 (a DC offset)")
    assert "wavs/offset_speech.wav" not in reasons, "speech on a DC offset is speech"
    assert report.rows_usable == 9 and report.drop_counts == {"Clip holds no sound (a constant signal)": 2}

    prepared = prepare_dataset(dc_dataset, tmp_path / "prepared")
    names = [line.split("|")[0] for line in prepared.train_csv.read_text().splitlines()[1:]]
    names += [line.split("|")[0] for line in prepared.eval_csv.read_text().splitlines()[1:]]
    assert len(names) == 9 and not any(name.startswith(("wavs/dc_", "wavs/near_dc_")) for name in names)
    changes = (tmp_path / "prepared" / "clip_changes.jsonl").read_text()
    assert "dc.wav" not in changes, "no loudness was evened for it"


def test_a_header_only_check_leaves_a_constant_signal_to_prepare_which_rejects_it(dc_dataset, tmp_path):
    """A large dataset is checked from its headers: Prepare, which decodes every clip, says it holds no sound
    instead of evening its loudness."""
    prepared = prepare_dataset(dc_dataset, tmp_path / "prepared", audio_check="header")
    rejected = {row["audio_file"]: row["reason"] for row in prepared.rejected}
    assert rejected == {
        "wavs/dc.wav": "holds no sound: its samples all stay at +0.50 (a DC offset)",
        "wavs/near_dc.wav": rejected["wavs/near_dc.wav"],
    }
    assert rejected["wavs/near_dc.wav"].startswith("holds no sound: its samples stay near +0.50")
    assert prepared.added_train + prepared.added_eval == 9


def _overwrite_with_silence_keeping_size_and_time(clip):
    stat = clip.stat()
    frames = sf.info(str(clip)).frames
    sf.write(str(clip), np.zeros(frames, dtype=np.float32), SAMPLE_RATE)
    os.utime(clip, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert clip.stat().st_size == stat.st_size and clip.stat().st_mtime_ns == stat.st_mtime_ns


def test_a_clip_rewritten_with_its_size_and_time_kept_is_checked_again(tmp_path):
    source = write_dataset(tmp_path / "voice", n=8)
    cache = tmp_path / "output" / ".dataset-checks"
    first = validate_dataset(source, cache_dir=cache)
    assert first.rows_usable == 8 and validate_dataset(source, cache_dir=cache).check.cache_hit

    _overwrite_with_silence_keeping_size_and_time(tmp_path / "voice" / "wavs" / "clip_003.wav")
    again = validate_dataset(source, cache_dir=cache)
    assert not again.check.cache_hit and again.check.decoded == 1 and again.check.served == 7
    assert _reasons(again)["wavs/clip_003.wav"] == ["Clip is silent (digital silence)."]
    assert again.rows_usable == 7


def test_a_prepared_clip_rewritten_with_its_size_and_time_kept_is_read_again(tmp_path):
    prepared = prepare_dataset(write_dataset(tmp_path / "voice", n=8), tmp_path / "prepared")
    clip = sorted((tmp_path / "prepared" / "wavs").iterdir())[0]
    _overwrite_with_silence_keeping_size_and_time(clip)
    report = validate_dataset(prepared.train_csv, prepared.eval_csv)
    assert report.check.decoded == 1 and report.check.served == 7 and report.rows_usable == 7


def test_another_datasets_cache_entry_under_this_ones_name_is_refused(tmp_path):
    """Two datasets with the same CSV bytes (paths relative to their folders) and the same clips: the entry of one,
    copied under the other's name, holds the other CSV's rows and clips."""
    first = write_dataset(tmp_path / "first", n=8)
    second = write_dataset(tmp_path / "second", n=8)
    assert first.read_bytes() == second.read_bytes()
    cache = tmp_path / "cache"
    validate_dataset(first, cache_dir=cache)
    shutil.copy(cache_file(cache, [first]), cache_file(cache, [second]))

    report = validate_dataset(second, cache_dir=cache)
    assert not report.check.cache_hit and report.check.decoded == 8, "its own clips were read"
    locations = [row.audio_location for _, row, _ in report.iter_usable_splits()]
    assert len(locations) == 8 and all(loc.startswith(str(tmp_path / "second")) for loc in locations)
    assert validate_dataset(second, cache_dir=cache).check.cache_hit, "its own entry replaced the copy"
    assert validate_dataset(first, cache_dir=cache).check.cache_hit, "the first one's entry is its own still"
