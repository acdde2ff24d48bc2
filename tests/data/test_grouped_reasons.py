"""The summary's counted reasons read whole ("Trust after the run"): grouping rows by reason kept the words of a
reason without its numbers and paths, so the summary said "2 × Clip is s, shorter than s", "1 × Clip is silent
dBFS)" and "Text has characters the model's vocabulary.". A group now shows its numbers as the range its rows span
and any other varying part as its first row's, one of several."""

from __future__ import annotations

import re

import numpy as np
import soundfile as sf

from tests.helpers import SAMPLE_RATE, synth_speech, write_dataset
from utils.data.csv_reader import Problem
from utils.data.reasons import MAX_GROUPS, OTHER, ReasonCounts
from utils.data.text_checks import text_check_options
from utils.data.validation import validate_dataset
from utils.model.base_models import run_vocab_file


def test_the_summary_counts_each_kind_of_reason_with_its_numbers_and_words(tmp_path):
    folder = tmp_path / "voice"
    csv = write_dataset(folder, n=8)
    wavs = folder / "wavs"
    sf.write(str(wavs / "short_a.wav"), synth_speech(0.36, 1), SAMPLE_RATE)
    sf.write(str(wavs / "short_b.wav"), synth_speech(0.54, 2), SAMPLE_RATE)
    sf.write(str(wavs / "quiet.wav"), np.random.default_rng(0).normal(0, 1e-4, 2 * SAMPLE_RATE), SAMPLE_RATE)
    rows = [
        "wavs/short_a.wav|hello there|a",
        "wavs/short_b.wav|hello there|a",
        "wavs/quiet.wav|hello there|a",
        "wavs/gone_1.wav|hello there|a",
        "wavs/gone_2.wav|hello there|a",
        "wavs/gone_3.wav|hello there|a",
        "wavs/clip_000.wav|english 字 mixed|a",  # the vocab check runs before the duplicate audio is dropped
        "wavs/clip_001.wav|english 漢 mixed|a",
    ]
    with csv.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(rows) + "\n")

    report = validate_dataset(csv, **text_check_options("en", vocab=run_vocab_file("tiny")))
    gone = str((wavs / "gone_1.wav").resolve())
    assert report.drop_counts == {
        "Audio not found at " + gone + " and others": 3,
        "Clip is 0.36–0.54 s, shorter than 1 s": 2,
        "Text has characters the model's vocabulary lacks (字 and others)": 2,
        "Clip is silent (-80 dBFS)": 1,
    }, report.drop_counts
    assert report.problem_counts == report.drop_counts, "every one of them drops its row"
    summary = report.summary()
    assert (
        "8 rows will not be used: 3 × Audio not found at " + gone + " and others; 2 × Clip is 0.36–0.54 s, shorter "
        "than 1 s; 2 × Text has characters the model's vocabulary lacks (字 and others); 1 × other reasons (see the "
        "rows)." in summary
    ), summary
    for garbled in ("Clip is s,", "than s", "silent dBFS", "vocabulary.", "vocabulary;"):
        assert garbled not in summary, (garbled, summary)


def test_one_row_of_a_kind_reads_as_its_own_reason(tmp_path):
    folder = tmp_path / "voice"
    csv = write_dataset(folder, n=6)
    sf.write(str(folder / "wavs" / "short.wav"), synth_speech(0.42, 1), SAMPLE_RATE)
    with csv.open("a") as handle:
        handle.write("wavs/short.wav|hello there|a\n")
    summary = validate_dataset(csv).summary()
    assert "1 rows will not be used: 1 × Clip is 0.42 s, shorter than 1 s." in summary, summary


def _problem(line: int, reason: str, audio_file: str = "wavs/a.wav") -> Problem:
    return Problem(line, audio_file, "warning", reason, "/data/voice/metadata.csv")


def test_numbers_written_with_a_hyphen_between_them_show_one_row_as_an_example():
    counts = ReasonCounts()
    for first in (3, 9):
        reason = f"Text spans lines {first}-{first + 1} (a line break inside a quoted cell): read with spaces."
        counts.add(_problem(first, reason), drops_row=False)
    labels, drops = counts.labels()
    assert labels == {"e.g. Text spans lines 3-4 (a line break inside a quoted cell)": 2} and drops == {}


def test_quoted_text_and_paths_vary_as_examples_and_other_parts_keep_their_kinds_apart():
    counts = ReasonCounts()
    for i, (name, level) in enumerate([("a", "-72 dBFS"), ("b", "-60 dBFS"), ("c", "digital silence")]):
        counts.add(_problem(i + 2, f"Clip is silent ({level}).", f"wavs/{name}.wav"), drops_row=True)
        counts.add(
            _problem(i + 2, f"Audio not found at /data/voice/wavs/{name} x.wav.", f"wavs/{name} x.wav"), drops_row=True
        )
    labels, _ = counts.labels()
    assert labels == {
        "Clip is silent (-72 to -60 dBFS)": 2,
        "Audio not found at /data/voice/wavs/a x.wav and others": 3,  # a path with a space is one path
        "Clip is silent (digital silence)": 1,
    }


def test_kinds_of_reason_are_bounded_whatever_the_rows():
    counts = ReasonCounts()
    for i in range(MAX_GROUPS + 50):
        counts.add(_problem(i + 2, f"Row kind {'x' * (i % 7)}{chr(0x4E00 + i)} is odd."), drops_row=True)
    labels, drops = counts.labels()
    assert len(counts.groups) == MAX_GROUPS and labels[OTHER] == 50 and sum(drops.values()) == MAX_GROUPS + 50
    assert all(re.search(r"Row kind x*\S is odd", label) for label in labels if label != OTHER)
