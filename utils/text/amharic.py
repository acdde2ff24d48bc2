"""Amharic text front end: normalisation and rule-based grapheme-to-phoneme.

XTTS v2 has no Amharic support, so Amharic text is fed to it either as
normalised Ethiopic script or as IPA.  :func:`amharic_front_end` is the single
entry point used at both training and inference time so the two always see the
same text.  Only the standard library is imported here (``epitran`` is loaded
lazily, and only for ``backend="epitran"``).

Normalisation (:func:`normalize_amharic`)
    * Ethiopic punctuation becomes ASCII: ``።``→``.``, ``፣``→``,``,
      ``፤``→``;``, ``፥``→``:``, ``፦``→``:``, ``፧``→``?``, ``፨`` (paragraph
      separator)→``.`` (a plain sentence end, no newline).  ``፠`` (section mark)
      is decorative and is removed.  ``፡`` (word space) becomes a space.
    * Whitespace before a converted mark is dropped and one space is put after
      it when a word follows.  In mixed text, whitespace between an Ethiopic
      letter and ASCII ``. , ; : ? !`` is dropped and one space is inserted
      after such a mark when an Ethiopic letter follows directly.
    * Ethiopic numerals are evaluated by the Ge'ez rules (see
      :func:`ethiopic_numeral_to_int`) and, like ASCII digit strings, spelled
      out with :func:`number_to_amharic`.
    * Whitespace runs collapse to one space; the ends are stripped.  Other
      text is left as it is.

Number words (:func:`number_to_amharic`)
    * 11–19 use ``አስራ`` + unit (12 = ``አስራ ሁለት``); other tens + unit are two
      words (25 = ``ሀያ አምስት``).
    * A single hundred is just ``መቶ`` (125 = ``መቶ ሀያ አምስት``); 200 =
      ``ሁለት መቶ``.  Thousand, million and billion always carry their count,
      including one: 1000 = ``አንድ ሺህ``, 2024 = ``ሁለት ሺህ ሀያ አራት``,
      100 000 = ``መቶ ሺህ``, 1 000 000 = ``አንድ ሚሊዮን``.
    * Decimals: integer part, ``ነጥብ``, then the fraction digit by digit
      (3.5 = ``ሶስት ነጥብ አምስት``, 0.25 = ``ዜሮ ነጥብ ሁለት አምስት``).
    * ASCII numbers may use ``,`` thousands separators (``1,000,000``).
      Digit strings with a leading zero (``007``) and numbers of 10^12 or more
      are read digit by digit.

G2P lives in :mod:`utils.text.amharic_g2p` (re-exported here).
"""

from __future__ import annotations

import re

from utils.text.amharic_g2p import AMHARIC_LETTER_TABLE, AMHARIC_LETTERS, amharic_g2p

__all__ = [
    "AMHARIC_LANGUAGE_CODES",
    "AMHARIC_LETTERS",
    "AMHARIC_LETTER_TABLE",
    "amharic_front_end",
    "amharic_g2p",
    "ethiopic_numeral_to_int",
    "is_amharic_code",
    "normalize_amharic",
    "number_to_amharic",
]

AMHARIC_LANGUAGE_CODES = ("amh", "am")


def is_amharic_code(code: str) -> bool:
    """True for ``"amh"``/``"am"`` (case-insensitive, region/script tags allowed: ``am-ET``)."""
    if not isinstance(code, str):
        return False
    primary = code.strip().lower().replace("_", "-").split("-")[0]
    return primary in AMHARIC_LANGUAGE_CODES


# ---------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------

_UNITS = ("ዜሮ", "አንድ", "ሁለት", "ሶስት", "አራት", "አምስት", "ስድስት", "ሰባት", "ስምንት", "ዘጠኝ")
_TENS = ("", "አስር", "ሀያ", "ሰላሳ", "አርባ", "ሃምሳ", "ስልሳ", "ሰባ", "ሰማንያ", "ዘጠና")
_TEEN_PREFIX = "አስራ"  # አስር becomes አስራ before a unit
_HUNDRED = "መቶ"
_SCALES = ((10**9, "ቢሊዮን"), (10**6, "ሚሊዮን"), (10**3, "ሺህ"))
_POINT = "ነጥብ"
_MAX_SPOKEN = 10**12

_GEEZ_VALUES = {chr(0x1369 + i): i + 1 for i in range(9)}  # ፩..፱
_GEEZ_VALUES.update({chr(0x1372 + i): (i + 1) * 10 for i in range(9)})  # ፲..፺
_GEEZ_VALUES["\u137b"] = 100  # ፻
_GEEZ_VALUES["\u137c"] = 10000  # ፼


def _below_100(n: int) -> str:
    tens, unit = divmod(n, 10)
    if tens == 0:
        return _UNITS[unit]
    if unit == 0:
        return _TENS[tens]
    return f"{_TEEN_PREFIX if tens == 1 else _TENS[tens]} {_UNITS[unit]}"


def _below_1000(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    parts = []
    if hundreds:
        parts.append(_HUNDRED if hundreds == 1 else f"{_UNITS[hundreds]} {_HUNDRED}")
    if rest:
        parts.append(_below_100(rest))
    return " ".join(parts)


def number_to_amharic(n: int) -> str:
    """Spell a whole number 0 <= n < 10**12 in Amharic words (rules in module docstring)."""
    if not 0 <= n < _MAX_SPOKEN:
        raise ValueError(f"number out of range for Amharic words: {n}")
    if n == 0:
        return _UNITS[0]
    parts = []
    for scale, name in _SCALES:
        count, n = divmod(n, scale)
        if count:
            parts.append(f"{_below_1000(count)} {name}")
    if n:
        parts.append(_below_1000(n))
    return " ".join(parts)


def ethiopic_numeral_to_int(numeral: str) -> int:
    """Value of an Ethiopic numeral string by the Ge'ez rules.

    Units and tens add up; ፻ multiplies what precedes it within the current
    ten-thousand group (a missing multiplier is 1: ፻፳፭ = 125, ፪፻ = 200,
    ፲፻ = 1000); ፼ multiplies everything before it by 10000 (፼ = 10000,
    ፪፼፫፻ = 20300, ፻፼ = 1000000).
    """
    total = hundreds = current = 0
    for ch in numeral:
        value = _GEEZ_VALUES[ch]
        if value == 100:
            hundreds += (current or 1) * 100
            current = 0
        elif value == 10000:
            group = hundreds + current
            if group == 0 and total == 0:
                group = 1
            total = (total + group) * 10000
            hundreds = current = 0
        else:
            current += value
    return total + hundreds + current


def _digits_to_words(digits: str) -> str:
    return " ".join(_UNITS[int(d)] for d in digits)


def _integer_words(digits: str) -> str:
    if len(digits) > 1 and digits.startswith("0"):
        return _digits_to_words(digits)  # codes, phone numbers: read digits
    value = int(digits)
    if value >= _MAX_SPOKEN:
        return _digits_to_words(digits)
    return number_to_amharic(value)


# ---------------------------------------------------------------------------
# Normalisation
# ---------------------------------------------------------------------------

_ETHIOPIC_PUNCT = {
    "\u1362": ".",  # ። full stop
    "\u1363": ",",  # ፣ comma
    "\u1364": ";",  # ፤ semicolon
    "\u1365": ":",  # ፥ colon
    "\u1366": ":",  # ፦ preface colon
    "\u1367": "?",  # ፧ question mark
    "\u1368": ".",  # ፨ paragraph separator: a sentence end
}
_WORDSPACE = "\u1361"  # ፡
_SECTION_MARK = "\u1360"  # ፠ (decorative, removed)

_ETH_LETTER = "\u1200-\u135a\u1380-\u138f\u2d80-\u2dde\uab01-\uab2e"
_GEEZ_NUMBER_RE = re.compile("[\u1369-\u137c]+")
_ARABIC_NUMBER_RE = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?")
_MARKS_NO_SPACE = frozenset(".,;:?!" + "".join(_ETHIOPIC_PUNCT))
_ETH_PUNCT_RE = re.compile(r"\s*([" + "".join(_ETHIOPIC_PUNCT) + r"])(\s*)")
_SPACE_BEFORE_PUNCT_RE = re.compile(rf"(?<=[{_ETH_LETTER}])\s+(?=[.,;:?!])")
_NO_SPACE_AFTER_PUNCT_RE = re.compile(rf"([.,;:?!])(?=[{_ETH_LETTER}])")
_WHITESPACE_RE = re.compile(r"\s+")


def _pad(match: re.Match, words: str) -> str:
    # Keep number words apart from letters they were glued to ("15ኛ", "፲፪ሰዓት").
    s = match.string
    before = " " if match.start() > 0 and s[match.start() - 1].isalnum() else ""
    after = " " if match.end() < len(s) and s[match.end()].isalnum() else ""
    return before + words + after


def _arabic_number(match: re.Match) -> str:
    integer, _, fraction = match.group(0).replace(",", "").partition(".")
    words = _integer_words(integer)
    if fraction:
        words = f"{words} {_POINT} {_digits_to_words(fraction)}"
    return _pad(match, words)


def _geez_number(match: re.Match) -> str:
    return _pad(match, number_to_amharic(ethiopic_numeral_to_int(match.group(0))))


def _ethiopic_punct(match: re.Match) -> str:
    mark = _ETHIOPIC_PUNCT[match.group(1)]
    s, end = match.string, match.end()
    # One space after the mark when a word (or other text) follows; none
    # before another sentence mark ("።።" -> "..").
    if end < len(s) and s[end] not in _MARKS_NO_SPACE and (match.group(2) or s[end].isalnum()):
        return mark + " "
    return mark


def normalize_amharic(text: str) -> str:
    """Normalise Amharic text for TTS (punctuation, numbers, spacing).

    See the module docstring for the exact rules.  Example:
    ``"ሰላም፡ዓለም። ፲፪ ሰዓት"`` -> ``"ሰላም ዓለም. አስራ ሁለት ሰዓት"``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    text = text.replace(_WORDSPACE, " ").replace(_SECTION_MARK, " ")
    text = _GEEZ_NUMBER_RE.sub(_geez_number, text)
    text = _ARABIC_NUMBER_RE.sub(_arabic_number, text)
    text = _ETH_PUNCT_RE.sub(_ethiopic_punct, text)
    text = _SPACE_BEFORE_PUNCT_RE.sub("", text)
    text = _NO_SPACE_AFTER_PUNCT_RE.sub(r"\1 ", text)
    return _WHITESPACE_RE.sub(" ", text).strip()


def amharic_front_end(text: str, use_g2p: bool) -> str:
    """The Amharic text front end shared by training and inference.

    Always applies :func:`normalize_amharic`; with ``use_g2p`` the result is
    then converted by :func:`amharic_g2p` (rules backend).
    """
    text = normalize_amharic(text)
    if use_g2p:
        text = amharic_g2p(text)
    return text
