"""Sentences in recognised speech: where they end (Latin, CJK, Ethiopic, Arabic and Devanagari marks), and
joining recognised words back into text (no spaces between CJK characters)."""

from __future__ import annotations

from collections.abc import Iterable

# Full stops that end a sentence wherever they are (no space follows in CJK text):
# CJK 。！？． ; Ethiopic ። ፧ ፨ (፣ is a comma) ; Arabic ؟ ; Urdu ۔ ; Devanagari । ॥
_ENDS_ALWAYS = "。！？．።፧፨؟۔।॥"
# Latin-style ends only count before whitespace or the end of the text (so 3.5, a.m.x do not).
_ENDS_LATIN = ".!?…"
_ENDS = _ENDS_ALWAYS + _ENDS_LATIN
# Closing quotes and brackets stay with the sentence they close.
_CLOSERS = "\"'”’»)]}」』）》〉›"
_OPENERS = "\"'“‘«([{「『（《〈‹¿¡"
# Tokens (lower case, without their final ".") after which a "." does not end a sentence.
ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "e.g",
        "i.e",
        "cf",
        "fig",
        "approx",
        "dept",
        "gen",
        "gov",
        "lt",
        "col",
        "sgt",
        "capt",
        "rev",
        "hon",
        "mt",
    }
)


def _is_abbreviation(token: str) -> bool:
    return token.strip(_OPENERS).rstrip(".").lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping each end mark (and closing quotes) with its sentence.

    Ends: ``. ! ? …`` (Latin: only before whitespace or the end, and ``.`` not after an
    abbreviation such as Mr. / Dr. / e.g., so decimals like 3.5 stay whole), and anywhere:
    ``。 ！ ？ ．`` (CJK), ``። ፧ ፨`` (Ethiopic), ``؟ ۔`` (Arabic/Urdu), ``। ॥`` (Devanagari).
    ``;``, ``:``, ``,`` and Ethiopic ``፣`` are not ends. Empty pieces are dropped.
    """
    out: list[str] = []
    start = i = 0
    n = len(text)
    while i < n:
        if text[i] not in _ENDS:
            i += 1
            continue
        j = i + 1
        while j < n and (text[j] in _ENDS or text[j] in _CLOSERS):  # "?!", "...", '."'
            j += 1
        run = text[i:j]
        if any(c in _ENDS_ALWAYS for c in run):
            is_end = True
        elif j < n and not text[j].isspace():
            is_end = False  # 3.5, example.com, e.g.x
        elif run.rstrip(_CLOSERS) == ".":
            before = text[start:i].split()
            is_end = not (before and _is_abbreviation(before[-1]))
        else:
            is_end = True
        if is_end:
            piece = text[start:j].strip()
            if piece:
                out.append(piece)
            start = j
        i = j
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def ends_sentence(word: str) -> bool:
    """Whether a recognised word closes a sentence (same rules as :func:`split_sentences`)."""
    w = word.strip().rstrip(_CLOSERS)
    if not w or w[-1] not in _ENDS:
        return False
    if w[-1] in _ENDS_ALWAYS or w[-1] != ".":
        return True
    return not _is_abbreviation(w)


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
