"""The one splitter (utils/text/split.py): paragraphs, sentences and a sentence over the limit cut at clause marks, then
between words, then where there is no space, each piece saying what follows it; nothing of the text lost or moved."""

from __future__ import annotations

import pytest

from utils.text.split import (
    BREAKS,
    CLAUSE,
    END,
    NO_SPACE,
    PARAGRAPH,
    SENTENCE,
    WORD,
    sentence_pieces,
    speech_pieces,
)


def test_paragraphs_and_sentences_say_what_follows_them():
    text = "Hello there. How are you?\n\n  \nFine, thanks!\nBye"
    pieces = speech_pieces(text, 250)
    assert [(p.text, p.sentence, p.after) for p in pieces] == [
        ("Hello there.", 1, SENTENCE),
        ("How are you?", 2, PARAGRAPH),
        ("Fine, thanks!", 3, SENTENCE),
        ("Bye", 4, END),
    ]
    assert all(p.parts == 1 and not p.cut for p in pieces), "a comma does not cut a sentence under the limit"


def test_a_long_sentence_is_cut_at_clause_marks_then_words_then_where_there_is_no_space():
    clauses = "one two three, four five six; seven eight nine: ten eleven twelve, " * 3 + "end."
    nobreak = " ".join(f"word{i}" for i in range(20)) + "."
    text = f"{clauses} {nobreak} {'x' * 95}"
    pieces = speech_pieces(text, 40)
    assert all(len(p.text) <= 40 for p in pieces)
    assert "".join(p.text for p in pieces).replace(" ", "") == text.replace(" ", ""), "nothing lost or moved"
    first = [p for p in pieces if p.sentence == 1]
    assert first[0].text == "one two three, four five six;" and first[0].after == CLAUSE
    assert {p.after for p in first[:-1]} == {CLAUSE} and first[-1].after == SENTENCE
    assert [(p.part, p.parts) for p in first] == [(i, len(first)) for i in range(1, len(first) + 1)]
    second = [p for p in pieces if p.sentence == 2]
    assert len(second) > 1 and {p.after for p in second[:-1]} == {WORD}, "no clause mark: cut between words"
    third = [p for p in pieces if p.sentence == 3]
    assert [p.text for p in third] == ["x" * 40, "x" * 40, "x" * 15]
    assert [p.after for p in third] == [NO_SPACE, NO_SPACE, END]


def test_numbers_and_times_are_not_clause_marks_and_cjk_marks_are():
    assert sentence_pieces("It costs 3,50 at 10:30 and then some more words here", 30) == [
        "It costs 3,50 at 10:30 and",
        "then some more words here",
    ]
    cjk = "你好，今天天气很好，我们去公园散步吧"
    assert sentence_pieces(cjk, 8) == ["你好，", "今天天气很好，", "我们去公园散步吧"]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t"])
def test_nothing_to_say_is_no_piece(text):
    assert speech_pieces(text, 250) == []


def test_every_break_is_declared_once():
    assert len(set(BREAKS)) == len(BREAKS) == 6 and END in BREAKS
