"""Preparing hostile data (built here): the same clips added again from anywhere, float audio over full scale, bad
options. A clip is never added twice, never hard-clipped, and the user's files stay byte-identical."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import SAMPLE_RATE, digests, synth_speech, write_dataset
from utils.data.prepare import EVAL_FILE, INDEX_DIR, TRAIN_FILE, prepare_dataset


def prepared_rows(out: Path) -> tuple[list[str], list[str]]:
    return [(out / name).read_text().splitlines()[1:] for name in (TRAIN_FILE, EVAL_FILE)]  # type: ignore[return-value]


def prepare(csv_path: Path, out: Path, **options):
    before = digests(csv_path.parent)
    result = prepare_dataset(csv_path, out, **options)
    assert digests(csv_path.parent) == before, "prepare changed the user's files"
    return result


def test_the_same_clips_from_another_path_are_not_added_again(tmp_path):
    source = write_dataset(tmp_path / "voice", n=8)
    first = prepare(source, tmp_path / "out")
    assert (first.added_train, first.added_eval) == (7, 1)
    shutil.copytree(tmp_path / "voice", tmp_path / "voice-copy")  # the same zip extracted again, elsewhere
    again = prepare(tmp_path / "voice-copy" / "metadata.csv", tmp_path / "out")
    train, evaluation = prepared_rows(tmp_path / "out")
    assert (again.added_train, again.added_eval, again.skipped_existing) == (0, 0, 8)
    assert (len(train), len(evaluation)) == (7, 1), "8 clips stay 7 train + 1 eval (the issue saw 14 + 2)"
    assert again.summary().splitlines() == [
        f"Prepared in {tmp_path / 'out'}: 7 train and 1 eval rows (0 + 0 new, 8 already there)."
    ]


def test_the_same_audio_in_another_container_is_recognised(tmp_path):
    source = write_dataset(tmp_path / "voice", n=4)
    prepare(source, tmp_path / "out")
    flac = tmp_path / "flac"
    (flac / "wavs").mkdir(parents=True)
    lines = ["audio_file|text|speaker_name"]
    for i in range(4):  # the same recordings, saved as FLAC by an editor
        samples, rate = sf.read(str(tmp_path / "voice" / "wavs" / f"clip_{i:03d}.wav"), dtype="int16")
        sf.write(str(flac / "wavs" / f"take_{i}.flac"), samples, rate, subtype="PCM_16")
        lines.append(f"wavs/take_{i}.flac|another text {i}|b")
    (flac / "m.csv").write_text("\n".join(lines) + "\n")
    again = prepare(flac / "m.csv", tmp_path / "out")
    assert (again.added_train, again.added_eval, again.skipped_existing) == (0, 0, 4)


def test_two_rows_with_the_same_audio_in_one_csv_are_added_once(tmp_path):
    source = write_dataset(tmp_path / "voice", n=4)
    shutil.copy(tmp_path / "voice" / "wavs" / "clip_001.wav", tmp_path / "voice" / "wavs" / "copy.wav")
    with open(source, "a") as handle:
        handle.write("wavs/copy.wav|the same clip again|speaker_a\n")
    result = prepare(source, tmp_path / "out")
    assert result.added_train + result.added_eval == 4 and result.skipped_existing == 1
    assert (
        "1 row(s) have the same audio as an earlier row and were added once: line 6 (wavs/copy.wav) = line 3."
        in result.notes
    )


def test_float_audio_over_full_scale_is_scaled_not_clipped(tmp_path):
    source = tmp_path / "voice"
    (source / "wavs").mkdir(parents=True)
    voice = synth_speech(3.0, 4)
    hot = voice * (8.0 / np.abs(voice).max())  # peaks at 8.0: a float export with gain
    sf.write(str(source / "wavs" / "hot.wav"), hot, SAMPLE_RATE, subtype="FLOAT")
    sf.write(str(source / "wavs" / "calm.wav"), synth_speech(2.0, 5), SAMPLE_RATE, subtype="PCM_16")
    (source / "m.csv").write_text("audio_file|text|speaker_name\nwavs/hot.wav|loud|a\nwavs/calm.wav|calm|a\n")
    result = prepare(source / "m.csv", tmp_path / "out", even_loudness=False)  # levels kept: only what is over
    rows = [row for split in prepared_rows(tmp_path / "out") for row in split]
    written, rate = sf.read(str(tmp_path / "out" / next(r for r in rows if "hot_" in r).split("|")[0]))
    assert rate == SAMPLE_RATE and len(written) == len(hot)
    assert np.abs(written).max() == pytest.approx(0.99, abs=2 / 32768)
    assert np.mean(np.abs(written) >= 0.999) == 0.0, "no sample sits at full scale: nothing was clipped"
    assert np.corrcoef(written, hot)[0, 1] > 0.9999, "the waveform is the source's, scaled"
    assert result.notes == [
        "1 clip(s) went over full scale (float audio) and were scaled down to a 0.99 peak, not "
        "clipped: line 2 (wavs/hot.wav, peak 8.00).",
        "Levels kept as recorded (even_loudness off).",
    ]
    assert "scaled down to a 0.99 peak" in result.summary()


def test_option_errors_come_before_any_folder_is_made(tmp_path):
    source = write_dataset(tmp_path / "voice", n=3)
    for options, message in (({"language": "klingon"}, "not a language code"), ({"max_audio_length": 0}, "at least")):
        with pytest.raises(ValueError, match=message):
            prepare(source, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_a_failed_prepare_leaves_a_folder_that_can_be_used_again(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "m.csv").write_text("audio_file|text|speaker_name\nwavs/missing.wav|gone|a\n")
    with pytest.raises(ValueError, match="No usable rows to prepare"):
        prepare(bad / "m.csv", tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == [INDEX_DIR]  # only validation's row index
    result = prepare(write_dataset(tmp_path / "voice", n=3), tmp_path / "out")
    assert result.added_train + result.added_eval == 3


# --- issue 17: an output folder that cannot take the dataset, and links out of it -------------------------------


@pytest.mark.parametrize(
    "make_out, message",
    [
        (lambda tmp: (tmp / "a_file").write_text("mine") and tmp / "a_file", "is a file, not a folder"),
        (lambda tmp: (tmp / "a_file").write_text("mine") and tmp / "a_file" / "below", "cannot be made: .*is a file"),
        (lambda tmp: Path("/proc/xtts-prepared"), "cannot be written to"),
    ],
)
def test_an_output_folder_that_is_a_file_or_not_writable_is_a_clear_error(tmp_path, make_out, message):
    """Issue 17, unclear: a bare NotADirectoryError / FileNotFoundError before."""
    source = write_dataset(tmp_path / "voice", n=4)
    out = make_out(tmp_path)
    with pytest.raises(ValueError, match=f"out_dir {out}.*{message}"):
        prepare(source, out)
    if (tmp_path / "a_file").exists():
        assert (tmp_path / "a_file").read_text() == "mine"


@pytest.mark.parametrize("linked", ["wavs", "metadata_train.csv", ".index"])
def test_preparing_into_a_folder_whose_entries_link_elsewhere_writes_nothing_through_them(tmp_path, linked):
    """Issue 17, silently wrong: preparing into a folder whose wavs/ is a symlink wrote the clips into the folder it
    points to."""
    source = write_dataset(tmp_path / "voice", n=4)
    first = prepare(source, tmp_path / "out")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    entry = tmp_path / "out" / linked
    if entry.is_dir():
        shutil.rmtree(entry)
    else:
        entry.unlink()
    entry.symlink_to(elsewhere / linked if linked.endswith(".csv") else elsewhere)
    more = write_dataset(tmp_path / "more", n=4, seed_offset=20)
    with pytest.raises(ValueError, match=f"{linked} is a symbolic link to .*outside .*nothing is written through it"):
        prepare(more, first.folder)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"], "nothing written through the link"


def test_no_write_of_the_product_follows_a_link_out_of_its_folder(tmp_path):
    from utils.files import LinkOutRefused, append_jsonl, write_json_atomic

    (tmp_path / "elsewhere").mkdir()
    owned = tmp_path / "run"
    owned.mkdir()
    (owned / "evals").symlink_to(tmp_path / "elsewhere")
    (owned / "metrics.jsonl").symlink_to(tmp_path / "elsewhere" / "metrics.jsonl")
    with pytest.raises(LinkOutRefused):
        write_json_atomic(owned / "evals" / "scores.json", {"a": 1})
    with pytest.raises(LinkOutRefused):
        append_jsonl(owned / "metrics.jsonl", {"a": 1})
    assert list((tmp_path / "elsewhere").iterdir()) == []
    (owned / "inside").mkdir()
    (owned / "alias").symlink_to(owned / "inside")  # a link that stays inside its folder is followed
    write_json_atomic(owned / "alias" / "x.json", {"a": 1})
    assert (owned / "inside" / "x.json").is_file()


def test_a_float_clip_of_nan_samples_is_left_out_with_the_reason_even_by_a_header_check(tmp_path):
    """Issue 17 (silently wrong): a float wav of NaN samples was converted as if it were audio."""
    source = write_dataset(tmp_path / "voice", n=6)
    sf.write(
        tmp_path / "voice" / "wavs" / "clip_003.wav", np.full(40000, np.nan, dtype=np.float32), 22050, subtype="FLOAT"
    )
    result = prepare(source, tmp_path / "out", audio_check="header")
    assert result.added_train + result.added_eval == 5
    assert "wavs/clip_003.wav: samples are not numbers, NaN or infinite" in result.summary()
