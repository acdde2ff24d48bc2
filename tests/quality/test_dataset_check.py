"""The dataset check before training (espeak-ng speech, Whisper tiny.en), and what the user does with it:
exclude rows and correct transcripts in the prepared copy, never in their own files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import digests, write_dataset
from tests.quality.speech import SENTENCES, VOICE_A
from utils.data.prepare import EDITS_FILE, EVAL_FILE, TRAIN_FILE, prepare_dataset
from utils.quality.dataset_check import check_dataset


@pytest.fixture
def voice_dataset(tmp_path, espeak_clips) -> Path:
    """Six rows of one voice: row 2 carries the text of another clip, row 4 is hard-clipped, row 5 starts with
    1.5 s of silence; the others are clean."""
    folder = tmp_path / "voice"
    (folder / "wavs").mkdir(parents=True)
    lines = ["audio_file|text|speaker_name"]
    for i, text in enumerate(SENTENCES):
        wav, rate = sf.read(str(espeak_clips[VOICE_A, i]), dtype="float32")
        if i == 4:
            wav = np.clip(wav * 8, -0.9, 0.9)
        if i == 5:
            wav = np.concatenate([np.zeros(int(1.5 * rate), dtype=np.float32), wav])
        sf.write(str(folder / "wavs" / f"s{i}.wav"), wav, rate)
        lines.append(f"wavs/s{i}.wav|{SENTENCES[0] if i == 2 else text}|speaker")
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "metadata.csv"


def prepared(out: Path) -> dict[str, str]:
    """{audio file name stem before its digest: text} of both prepared splits."""
    rows = {}
    for name in (TRAIN_FILE, EVAL_FILE):
        for line in (out / name).read_text(encoding="utf-8").splitlines()[1:]:
            audio, text, _ = line.split("|")
            rows[Path(audio).stem.rsplit("_", 1)[0]] = text
    return rows


@pytest.mark.slow
def test_flagged_rows_come_worst_first_with_their_reasons(whisper, voice_dataset):
    before = digests(voice_dataset.parent)
    events = []
    check = check_dataset(voice_dataset, language="en", transcriber=whisper, progress=lambda *e: events.append(e))
    assert check.checked == 6 and check.transcript_reason == ""
    flagged = {row.audio_file: row for row in check.flagged}
    assert check.flagged[0].audio_file == "wavs/s2.wav", "the wrong transcript is the worst row"
    assert check.flagged[0].cer > 0.5 and "transcript disagrees" in check.flagged[0].problems[0]
    assert check.flagged[0].transcript and check.flagged[0].text == SENTENCES[0]
    assert any("clipped" in p for p in flagged["wavs/s4.wav"].problems)
    assert any("leading silence" in p for p in flagged["wavs/s5.wav"].problems)
    assert flagged["wavs/s5.wav"].measures.leading_silence_s == pytest.approx(1.5, abs=0.1)
    assert {"wavs/s0.wav", "wavs/s1.wav", "wavs/s3.wav"}.isdisjoint(flagged), "clean rows are not flagged"
    assert [e[:2] for e in events] == [(i, 6) for i in range(1, 7)]
    assert json.loads(json.dumps(check.flagged[0].to_dict()))["line"] == 4
    assert digests(voice_dataset.parent) == before


def test_without_a_transcriber_the_audio_is_still_measured(voice_dataset):
    check = check_dataset(voice_dataset, language="en")
    assert check.checked == 6 and "no transcription model" in check.transcript_reason
    assert {row.audio_file for row in check.flagged} == {"wavs/s4.wav", "wavs/s5.wav"}
    assert all(row.cer is None and row.transcript is None for row in check.flagged)
    assert "Transcripts not checked" in check.summary()


def test_exclusions_and_corrections_go_into_the_prepared_copy_only(voice_dataset, tmp_path):
    before = digests(voice_dataset.parent)
    out = tmp_path / "prepared"
    result = prepare_dataset(
        voice_dataset, out, language="en", exclude=["wavs/s4.wav"], corrections={"wavs/s2.wav": SENTENCES[2]}
    )
    rows = prepared(out)
    assert "s4" not in rows and rows["s2"] == SENTENCES[2] and len(rows) == 5
    assert result.excluded == ["wavs/s4.wav"]
    assert result.corrected == [{"audio_file": "wavs/s2.wav", "before": SENTENCES[0], "after": SENTENCES[2]}]
    summary = result.summary()
    assert "1 row(s) excluded on request: wavs/s4.wav" in summary
    assert (
        f'1 transcript(s) corrected in the prepared copy (your CSV is unchanged): wavs/s2.wav: "{SENTENCES[2]}"'
        in summary
    )
    edits = [json.loads(line) for line in (out / EDITS_FILE).read_text().splitlines()]
    assert [e["edit"] for e in edits] == ["excluded", "corrected"]
    assert digests(voice_dataset.parent) == before, "the user's CSV and audio are unchanged"

    # Preparing into the same folder again edits the rows it already holds.
    again = prepare_dataset(
        voice_dataset, out, language="en", exclude=["wavs/s5.wav"], corrections={"wavs/s3.wav": "a better text"}
    )
    rows = prepared(out)
    assert "s5" not in rows and rows["s3"] == "a better text" and rows["s4"] == SENTENCES[4], "s4 is back"
    assert rows["s2"] == SENTENCES[2], "the earlier correction stays"
    assert again.excluded == ["wavs/s5.wav"] and digests(voice_dataset.parent) == before


def test_bad_edits_are_refused_before_anything_is_written(voice_dataset, tmp_path):
    out = tmp_path / "prepared"
    cases = [
        (dict(exclude=["wavs/nope.wav"]), "No row of the dataset has the audio_file 'wavs/nope.wav'"),
        (dict(exclude="wavs/s1.wav"), "exclude is a list"),
        (dict(corrections={"wavs/s1.wav": "  "}), "correction for wavs/s1.wav cannot be used: Text is empty"),
        (dict(exclude=["wavs/s1.wav"], corrections={"wavs/s1.wav": "x"}), "both excluded and corrected"),
        (dict(exclude=[f"wavs/s{i}.wav" for i in range(6)]), "leaves no"),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=message):
            prepare_dataset(voice_dataset, out, language="en", **options)
        assert not (out / TRAIN_FILE).exists()
    shutil.rmtree(out, ignore_errors=True)


def test_naturalness_ranks_a_clip_that_sounds_wrong_and_a_threshold_marks_clips_to_exclude(
    tmp_path, espeak_clips, monkeypatch
):
    """Ten rows of real speech, one of them white noise: its naturalness (DistillMOS) is far below the rest, the
    summary suggests a threshold, and that threshold marks it to be excluded. The clips are decoded and scored by
    two worker processes."""
    from utils.data import pool

    folder = tmp_path / "voice"
    (folder / "wavs").mkdir(parents=True)
    lines = ["audio_file|text|speaker_name"]
    clips = sorted(espeak_clips.items())[:10]
    for i, ((_, sentence), path) in enumerate(clips):
        wav, rate = sf.read(str(path), dtype="float32")
        if i == 6:
            wav = np.random.default_rng(3).normal(0, 0.1, len(wav)).astype(np.float32)
        sf.write(str(folder / "wavs" / f"s{i}.wav"), wav, rate)
        lines.append(f"wavs/s{i}.wav|{SENTENCES[sentence]}|speaker")
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(pool, "INLINE_BELOW", 0)  # ten clips would be checked in this process

    check = check_dataset(folder / "metadata.csv", language="en", workers=2)
    assert len(check.work.pids) == 2 and os.getpid() not in check.work.pids
    noise = next(row for row in check.flagged if row.audio_file == "wavs/s6.wav")
    assert any("far below the dataset's median" in p for p in noise.problems), noise.problems
    assert noise.naturalness < check.naturalness_median - 0.8 and not noise.suggest_exclude
    assert check.suggestion.startswith("1 clip(s) score far below the rest on naturalness")
    threshold = float(check.suggestion.split("threshold to ")[1].split()[0])
    assert noise.naturalness < threshold < check.naturalness_median
    assert "Naturalness (predicted MOS, 1-5): median" in check.summary() and check.suggestion in check.summary()

    marked = check_dataset(folder / "metadata.csv", language="en", min_naturalness=threshold, workers=2)
    excluded = [row.audio_file for row in marked.flagged if row.suggest_exclude]
    assert excluded == ["wavs/s6.wav"], [(r.audio_file, r.naturalness) for r in marked.flagged]


def test_the_check_validates_as_validate_prepare_and_start_do_and_shares_their_cache_entry(tmp_path):
    """ "Trust after the run": the check validated without the run's text front end and vocab, so a row Start
    rejects (a character the model's vocabulary lacks) was checked as usable, under a cache entry of its own."""
    from utils.data.check_cache import cache_folder
    from utils.data.text_checks import text_check_options
    from utils.data.validation import validate_dataset
    from utils.model.base_models import run_vocab_file

    csv = write_dataset(tmp_path / "voice", n=8, texts=["plain english words", "english 漢字 mixed"])
    options = text_check_options("en", vocab=run_vocab_file("tiny"))
    cache = cache_folder(tmp_path / "output")
    page = validate_dataset(csv, cache_dir=cache, **options)  # the page's Validate (and Prepare, and Start)
    assert page.rows_usable == 4 and page.drop_counts == {
        "Text has characters the model's vocabulary lacks (字 漢)": 4
    }, page.drop_counts

    check = check_dataset(csv, language="en", cache_dir=cache, naturalness=False, **options)
    assert check.report.check.cache_hit, "Validate's entry served the check"
    assert check.report.summary() == page.summary() and check.checked == 4
    assert len(list(cache.iterdir())) == 1, "one entry for the dataset"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(min_naturalness="3"), r"min_naturalness must be a number from 1 to 5 \(a predicted MOS, .*\); got '3'."),
        (dict(min_naturalness=7), "min_naturalness must be a number from 1 to 5 .*; got 7."),
        (dict(threshold="0.3"), r"threshold must be a number of 0 or more \(a CER: .*\); got '0.3'."),
        (dict(threshold=float("nan")), "threshold must be a number of 0 or more .*; got nan."),
        (dict(threshold=True), "threshold must be a number of 0 or more .*; got True."),
        (dict(workers=2.5), "workers must be a whole number from 0 to 512 .*; got 2.5."),
        (dict(threshold="x" * 10_000), r"got 'xxxxx.*\.\.\. \(10,002 characters\)\.$"),
    ],
)
def test_numeric_settings_are_refused_by_name_before_anything_is_read(tmp_path, options, message):
    csv = write_dataset(tmp_path / "voice", n=4)
    with pytest.raises(ValueError, match=message):
        check_dataset(csv, language="en", naturalness=False, cache_dir=tmp_path / "cache", **options)
    assert not (tmp_path / "cache").exists(), "refused before the dataset was read"
