"""Probe texts (utils/quality/probes.py): every supported language has its four, and any other language gets them
from its own eval texts."""

from __future__ import annotations

import pytest

from utils.quality.probes import LONG_SHARE, PROBE_KINDS, PROBES, probes_for, probes_from_texts
from utils.text.languages import LANGUAGE_CHOICES, char_limit

QUESTION_MARKS = ("?", "？", "؟")
EXCLAMATION_MARKS = ("!", "！")


@pytest.mark.parametrize("language", LANGUAGE_CHOICES)
def test_every_supported_language_has_a_short_text_a_question_an_exclamation_and_a_long_sentence(language):
    probes = probes_for(language)
    assert [p.kind for p in probes] == list(PROBE_KINDS)
    short, question, exclamation, long = (p.text for p in probes)
    assert 1 <= len(short.split()) <= 3
    assert question.endswith(QUESTION_MARKS) and not question.endswith(EXCLAMATION_MARKS)
    assert exclamation.endswith(EXCLAMATION_MARKS)
    limit = char_limit(language)
    assert 0.75 * limit <= len(long) <= LONG_SHARE * limit, f"{language}: {len(long)} of {limit} characters"
    assert len({short, question, exclamation, long}) == 4


def test_amharic_probes_are_in_its_own_script():
    texts = [p.text for p in probes_for("am")]  # the alias reaches the same list
    assert all(any(0x1200 <= ord(ch) <= 0x137F for ch in text) for text in texts)
    assert texts[0].endswith("።") and texts[-1].endswith("።")


def test_a_language_without_a_list_builds_its_probes_from_its_eval_texts():
    texts = [
        "Habari ya asubuhi, rafiki yangu mpendwa.",
        "Leo tutaenda sokoni kununua matunda na mboga.",
        "Mvua ilinyesha usiku kucha katika kijiji chetu kidogo.",
        "Ndiyo.",
    ]
    assert "sw" not in PROBES
    probes = {p.kind: p.text for p in probes_for("sw", texts)}
    assert list(probes) == list(PROBE_KINDS)
    assert probes["short"] == "Ndiyo." and probes["question"].endswith("?") and probes["exclamation"].endswith("!")
    assert probes["question"].startswith("Mvua ilinyesha") and "." not in probes["question"]
    assert probes["long"].endswith(".") and len(probes["long"]) <= LONG_SHARE * char_limit("sw")
    assert all(text.rstrip(".") in probes["long"] for text in texts[:3])


def test_without_any_text_a_language_without_a_list_has_no_probes():
    assert probes_from_texts(["", "  ", "..."], 250) == []
    assert [p.kind for p in probes_from_texts(["one"], 250)] == list(PROBE_KINDS)
