"""Babble measures of a clip (utils/quality/babble.py) on known texts and transcripts."""

from __future__ import annotations

import pytest

from utils.quality.babble import SpeakingPace, babble_rate, babbled, repeats, words, words_beyond


@pytest.mark.parametrize(
    ("text", "transcript", "beyond"),
    [
        ("Yes.", "Yes.", 0),
        ("Yes.", "Yes, yes, I said yes", 4),
        ("The cat sat.", "the cat sat on the mat and then", 5),
        ("The cat sat.", "the cat", 0),  # a word cut, nothing beyond
        ("The cat sat.", "a cat sat there", 1),  # a substitution inside, one word after
        ("Thank you.", "", 0),
        ("Thank you.", "something else entirely", 1),  # nothing of the text heard: the tail past its length
    ],
)
def test_words_beyond_counts_what_was_said_after_the_text(text, transcript, beyond):
    assert words_beyond(text, transcript, "en") == beyond


def test_words_of_a_script_without_spaces_are_its_characters():
    assert words("好的。", "zh-cn") == ["好", "的"]
    assert words_beyond("好的。", "好的好的好的", "zh-cn") == 4


@pytest.mark.parametrize(
    ("text", "transcript", "count"),
    [
        ("I said so.", "I said so.", 0),
        ("I said so.", "I said I said so", 1),
        ("hello world", "hello hello hello world", 2),
        ("no no", "no no", 0),  # the text's own repetition is not counted
        ("go home", "go home go home go home", 2),
    ],
)
def test_repeats_counts_words_and_word_groups_said_twice_in_a_row(text, transcript, count):
    assert repeats(text, transcript, "en") == count


def test_the_pace_is_fit_with_an_overhead_on_the_training_rows():
    rows = [("x" * chars, 0.3 + chars / 15.0) for chars in (10, 25, 40, 80, 120)]
    pace = SpeakingPace.fit(rows)
    assert pace.chars_per_second == pytest.approx(15.0) and pace.overhead_seconds == pytest.approx(0.3)
    assert pace.expected_seconds("x" * 30) == pytest.approx(2.3)
    # An overhead the fit puts below zero (or too few rows) falls back to characters over seconds.
    assert SpeakingPace.fit([("x" * 10, 0.5), ("x" * 100, 8.0), ("x" * 50, 3.0)]).overhead_seconds == 0.0
    assert SpeakingPace.fit([("abcd", 2.0)]) == SpeakingPace(2.0, 0.0)
    assert SpeakingPace.fit([("", 1.0), ("text", 0.0)]) is None


def test_a_clip_babbles_when_it_did_not_stop_or_ran_over_one_and_a_half_times_its_length():
    assert babbled(False, 1.0) is True and babbled(True, 1.6) is True and babbled(None, 1.6) is True
    assert babbled(True, 1.4) is False and babbled(True, None) is False and babbled(None, None) is None
    assert babble_rate([True, False, None, False]) == pytest.approx(1 / 3)
    assert babble_rate([None]) is None


def test_a_word_said_over_and_over_counts_once_per_repeat():
    assert repeats("yes", "yes yes yes yes", "en") == 3
