"""Sentences in recognised speech: whether a recognised word ends one (the rules of utils.text.split.split_sentences,
the product's one sentence splitter, importable from here too), and joining recognised words back into text (no
spaces between CJK characters)."""

from __future__ import annotations

from collections.abc import Iterable

from utils.text.split import CLOSERS, ENDS, ENDS_ALWAYS, is_abbreviation, split_sentences

__all__ = ["ends_sentence", "join_words", "split_sentences"]


def ends_sentence(word: str) -> bool:
    """Whether a recognised word closes a sentence (same rules as :func:`split_sentences`)."""
    w = word.strip().rstrip(CLOSERS)
    if not w or w[-1] not in ENDS:
        return False
    if w[-1] in ENDS_ALWAYS or w[-1] != ".":
        return True
    return not is_abbreviation(w)


def _no_space_char(ch: str) -> bool:
    # Scripts written without spaces between words: Han, kana, CJK punctuation, full-width forms,
    # Thai, Lao, Myanmar, Khmer.
    o = ord(ch)
    return (
        0x3000 <= o <= 0x30FF
        or 0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF
        or 0xF900 <= o <= 0xFAFF
        or 0xFF00 <= o <= 0xFFEF
        or 0x0E00 <= o <= 0x0EFF
        or 0x1000 <= o <= 0x109F
        or 0x1780 <= o <= 0x17FF
    )


def join_words(texts: Iterable[str]) -> str:
    """Join words with spaces, except next to scripts written without spaces (CJK, Thai...)."""
    out = ""
    for t in texts:
        t = t.strip()
        if not t:
            continue
        if out and not (_no_space_char(out[-1]) or _no_space_char(t[0])):
            out += " "
        out += t
    return out
