"""prepare_dataset's refusals of an edit show what the caller sent for what it is ("Trust after the run"): a
correction holding NUL, BEL or ESC was refused with those characters raw in the message (a terminal rang, or turned
red), and a key or value of a megabyte was repeated whole."""

from __future__ import annotations

import re

import pytest

from tests.helpers import write_dataset
from utils.data.prepare import TRAIN_FILE, prepare_dataset
from utils.data.text_checks import text_check_options
from utils.model.base_models import run_vocab_file

RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def source(tmp_path):
    return write_dataset(tmp_path / "voice", n=6)


@pytest.mark.parametrize("vocab", [False, True], ids=["no vocab", "the run's vocab"])
def test_a_correction_with_control_characters_is_refused_with_them_escaped(source, tmp_path, vocab):
    options = text_check_options("en", vocab=run_vocab_file("tiny")) if vocab else {}
    with pytest.raises(ValueError) as refused:
        prepare_dataset(
            source, tmp_path / "out", corrections={"wavs/clip_001.wav": "a\x00b\x07c\x1b[31m red"}, **options
        )
    message = str(refused.value)
    assert not RAW_CONTROL.search(message), repr(message)
    assert message == (
        "The correction for wavs/clip_001.wav holds control characters ([U+0000] [U+0007] [U+001B]), which are "
        "not words anyone says: remove them."
    )
    assert not (tmp_path / "out" / TRAIN_FILE).exists()


@pytest.mark.parametrize(
    ("edits", "start"),
    [
        ({"corrections": {"\x1b[31m" + "k" * 100_000: "fine text"}}, "No row of the dataset has the audio_file"),
        ({"exclude": ["\x07" * 100_000], "corrections": {"\x07" * 100_000: "x"}}, "[U+0007][U+0007]"),
        ({"corrections": {"wavs/clip_001.wav": ["word"] * 100_000}}, "The correction for wavs/clip_001.wav must be"),
        ({"corrections": {"\x00" * 100_000: 5}}, "The correction for [U+0000][U+0000]"),
    ],
    ids=["unknown key", "excluded and corrected", "not text", "key of NULs"],
)
def test_a_long_value_is_cut_and_its_control_characters_escaped_in_the_message(source, tmp_path, edits, start):
    with pytest.raises(ValueError) as refused:
        prepare_dataset(source, tmp_path / "out", **edits)
    message = str(refused.value)
    assert message.startswith(start), message[:200]
    assert len(message) < 1_500 and re.search(r"\.\.\. \((100|800),0\d\d characters\)", message), message
    assert not RAW_CONTROL.search(message), repr(message[:300])
