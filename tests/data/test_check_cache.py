"""Checked once (issue 28): a dataset's check is kept by its fingerprint. An unchanged dataset is served from the
cache without opening a clip; a changed clip or CSV line is checked again (that clip alone decoded); a corrupted
cache file is ignored and rebuilt; a prepared folder's clips are never opened again by a run on it."""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import SAMPLE_RATE, digests, synth_speech, write_dataset
from utils.data import pool
from utils.data.check_cache import cache_file
from utils.data.prepare import prepare_dataset
from utils.data.validation import validate_dataset


def _reasons(report) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for problem in report.problems:
        found.setdefault(problem.line, []).append(problem.reason)
    return found


def test_a_second_check_is_served_from_the_cache_and_a_change_is_checked_again(tmp_path):
    source = write_dataset(tmp_path / "voice", n=10)
    before = digests(tmp_path / "voice")
    cache = tmp_path / "output" / ".dataset-checks"
    first = validate_dataset(source, cache_dir=cache)
    assert not first.check.cache_hit and first.check.decoded == 10

    second = validate_dataset(source, cache_dir=cache)
    assert second.check.cache_hit and second.check.decoded == 0
    assert second.summary() == first.summary() and second.fingerprint() == first.fingerprint()
    assert [list(u.lines) for u in second._train] == [list(u.lines) for u in first._train]

    clip = tmp_path / "voice" / "wavs" / "clip_004.wav"
    sf.write(str(clip), np.zeros(2 * SAMPLE_RATE, dtype=np.float32), SAMPLE_RATE)  # now silence
    os.utime(clip, ns=(clip.stat().st_atime_ns, clip.stat().st_mtime_ns + 10_000_000))  # as a coarse clock shows
    lines = source.read_text().splitlines()
    lines[8] = lines[8].split("|")[0] + "||speaker_a"  # line 9's text removed
    source.write_text("\n".join(lines) + "\n")
    third = validate_dataset(source, cache_dir=cache)
    assert not third.check.cache_hit and third.check.decoded == 1, "the changed clip alone is read again"
    assert third.check.served == 9
    reasons = _reasons(third)
    assert any("silent" in r for r in reasons[6]), reasons  # clip_004 is on line 6
    assert reasons[9] == ["Text is empty."]
    assert third.rows_usable == 8 and third.fingerprint() != first.fingerprint()
    assert validate_dataset(source, cache_dir=cache).check.cache_hit, "the new state is cached in turn"

    other = validate_dataset(source, cache_dir=cache, max_audio_length=5 * 22050)  # another option: no hit
    assert not other.check.cache_hit and other.check.decoded == 0, "its clips still come from their probes"
    source.write_text("\n".join(lines[:6]) + "\n")  # rows gone, clips unchanged
    assert validate_dataset(source, cache_dir=cache).check.decoded == 0
    after = digests(tmp_path / "voice")
    changed = {name for name in before if before[name] != after.get(name)}
    assert changed == {"metadata.csv", "wavs/clip_004.wav"} and set(after) == set(before), "checks wrote nothing"
    assert not any(p.suffix == ".json" for p in (tmp_path / "voice").rglob("*")), "nothing is written beside the data"


@pytest.mark.parametrize(
    "damage",
    [b"", b"{not json", b'{"format": 1, "csv": 3, "options": {}, "clips": {"x": [1]}}', b"\x00\xff" * 100],
)
def test_a_corrupted_cache_file_is_ignored_and_rebuilt(tmp_path, damage):
    source = write_dataset(tmp_path / "voice", n=6)
    cache = tmp_path / "cache"
    validate_dataset(source, cache_dir=cache)
    (path,) = cache.iterdir()
    assert path == cache_file(cache, [source])
    path.write_bytes(damage)
    again = validate_dataset(source, cache_dir=cache)
    assert not again.check.cache_hit and again.check.decoded == 6 and again.rows_usable == 6
    assert validate_dataset(source, cache_dir=cache).check.cache_hit, "rebuilt"


def test_a_report_in_the_cache_that_does_not_decode_is_checked_again(tmp_path):
    source = write_dataset(tmp_path / "voice", n=6)
    cache = tmp_path / "cache"
    validate_dataset(source, cache_dir=cache)
    (path,) = cache.iterdir()
    path.write_text(path.read_text().replace('"rows_read"', '"rows_reed"'))  # valid JSON, a broken report
    again = validate_dataset(source, cache_dir=cache)
    assert not again.check.cache_hit and again.rows_usable == 6


def test_the_check_uses_several_worker_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "INLINE_BELOW", 0)  # a small dataset would be checked in this process
    source = write_dataset(tmp_path / "voice", n=16)
    report = validate_dataset(source, workers=2)
    assert report.check.workers == 2 and len(report.check.pids) == 2 and os.getpid() not in report.check.pids
    inline = validate_dataset(source, workers=1)
    assert inline.summary() == report.summary() and inline.fingerprint() == report.fingerprint()
    assert inline.check.workers == 0 and inline.check.pids == [os.getpid()] and inline.check.decoded == 16


def test_a_run_on_a_prepared_dataset_opens_none_of_its_clips(tmp_path):
    source = write_dataset(tmp_path / "voice", n=8)
    prepared = prepare_dataset(source, tmp_path / "prepared")
    assert prepared.fingerprint and (tmp_path / "prepared" / "prepared.json").is_file()
    report = validate_dataset(prepared.train_csv, prepared.eval_csv)  # as train_gpt validates it: no cache given
    assert report.check.decoded == 0 and report.check.served == 8 and report.ok
    assert report.fingerprint() == prepared.fingerprint
    clip = next((tmp_path / "prepared" / "wavs").iterdir())
    sf.write(str(clip), synth_speech(1.2, 99), SAMPLE_RATE)  # edited since: read again, and only it
    report = validate_dataset(prepared.train_csv, prepared.eval_csv)
    assert report.check.decoded == 1 and report.fingerprint() != prepared.fingerprint


def test_a_run_reuses_the_check_of_its_dataset(tmp_path, tiny_base):
    """train_gpt's start and resume validate with the run's options and the output folder's cache: a check with
    the same options (the page's, a previous start) serves it."""
    from utils.data.check_cache import cache_folder
    from utils.data.text_checks import text_check_options
    from utils.model.base_models import run_vocab_file
    from utils.options.arguments import TrainArguments
    from utils.training.run import TrainingRun

    source = write_dataset(tmp_path / "voice", n=8)
    output = tmp_path / "output"
    args = TrainArguments(version="tiny", train_csv=str(source), output_path=str(output), num_epochs=1)
    _, first = TrainingRun(args).check_inputs()
    assert not first.check.cache_hit and first.check.decoded == 8
    _, second = TrainingRun(args).check_inputs()
    assert second.check.cache_hit and second.fingerprint() == first.fingerprint()
    page = validate_dataset(
        source, cache_dir=cache_folder(output), **text_check_options("en", vocab=run_vocab_file("tiny"))
    )
    assert page.check.cache_hit, "the page's Check of the same dataset is the run's"
