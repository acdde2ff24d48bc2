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

G2P (:func:`amharic_g2p`, ``backend="rules"``)
    * Each letter is a consonant plus the vowel of its order:
      1st ə, 2nd u, 3rd i, 4th a, 5th e, 6th none (see below), 7th o.  The
      extra 8th form of many series is Cʷa (ሏ lʷa, ቧ bʷa, ...).
    * Modern merged letters: ሀ ሐ ኀ → h; ሠ ሰ → s; ጸ ፀ → sʼ; አ ዐ → ʔ.  The 1st
      order of ሀ ሐ ኀ አ ዐ is pronounced ``a`` like the 4th (ሀ = ሃ = ha).
    * The glottal stop of the አ/ዐ series is dropped at the start of a word
      (አ → a, እ → ɨ) and written ʔ inside a word (ሰዓት → səʔat).
    * ኸ is /x/ (its traditional value; many speakers say [h]).
    * Labialised series ቈ ኈ ኰ ዀ ጐ give kʼʷ hʷ kʷ xʷ gʷ; their 6th form
      (ቍ ኍ ኵ ዅ ጕ) behaves like any 6th-order letter.  ኧ is ə.  ፘ ፙ ፚ are
      rja mja fja.  Ejectives use U+02BC (kʼ tʼ tʃʼ pʼ sʼ).
    * The Ethiopic gemination mark U+135F after a letter lengthens its
      consonant (ሰ፟ → sːə); Amharic normally leaves gemination unwritten, so
      it is otherwise not shown.

    Sixth-order rule (when a 6th-order letter gets the epenthetic ɨ).  Words
    are maximal runs of Ethiopic letters.  Every run of consecutive 6th-order
    letters in a word is split so that every syllable has a vowel, no syllable
    starts with two consonants, and a syllable ends in at most one consonant,
    or in two at the end of a word when their sonority falls (stop/affricate <
    fricative < nasal < liquid < glide; e.g. -rt, -st, -nt, -lɲ but not -gb,
    -kʼr):

    1. A 6th-order letter at the start of a word always takes ɨ
       (ልጅ lɨdʒ, ውሃ wɨha, እናት ɨnat).
    2. Inside a word (a vowel-bearing letter follows the run), go left to
       right alternating: after a vowel the first consonant is bare (it closes
       the syllable), the next takes ɨ, the next is bare, ...
       (ቋንቋ kʼʷankʼʷa, ኢትዮጵያ itjopʼja, እንግሊዝኛ ɨngɨlizɲa).
    3. At the end of a word, go right to left: the final consonant is bare,
       and so is the one before it when the pair falls in sonority; before
       those the consonants alternate ɨ, bare, ɨ, ... (ሰላም səlam,
       አምስት amɨst, ትምህርት tɨmhɨrt, ፍቅር fɨkʼɨr); rule 1 still applies.

    Gemination, which decides many real epenthesis sites, is not written, so
    the rule is an approximation (ይስጥልኝ gives jɨstʼɨlɲ, speech jɨstʼɨlːɨɲ).

    Coverage: the 34 series ሀ ለ ሐ መ ሠ ረ ሰ ሸ ቀ በ ቨ ተ ቸ ኀ ነ ኘ አ ከ ኸ ወ ዐ ዘ ዠ
    የ ደ ጀ ገ ጠ ጨ ጰ ጸ ፀ ፈ ፐ in all seven orders, their Cʷa forms, the
    labialised series above, ኧ and ፘ ፙ ፚ (:data:`AMHARIC_LETTERS`).  Letters
    used only by other languages or by Ge'ez (ቐ ዸ ጘ series, the -oa forms
    ሇ ቇ ኇ ኯ ዏ ዯ ጏ ፇ, the Ethiopic Supplement/Extended blocks) are treated
    as unknown.

    Pass-through: whitespace, ASCII characters and Unicode punctuation
    (including the Ethiopic marks ፡ ። ፣ ...) are copied unchanged.  Anything
    else that is not a known letter (including Ethiopic numerals: normalise
    first) is copied unchanged and reported.
"""

from __future__ import annotations

import logging
import re
import types
import unicodedata

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

logger = logging.getLogger(__name__)

AMHARIC_LANGUAGE_CODES = ("amh", "am")


def is_amharic_code(code: str) -> bool:
    """True for ``"amh"``/``"am"`` (case-insensitive, region/script tags allowed: ``am-ET``)."""
    if not isinstance(code, str):
        return False
    primary = code.strip().lower().replace("_", "-").split("-")[0]
    return primary in AMHARIC_LANGUAGE_CODES


# ---------------------------------------------------------------------------
# Letter table
# ---------------------------------------------------------------------------

# Vowel of each order (offset within a series); None marks the 6th order,
# whose vowel is decided by the sixth-order rule.
_ORDER_VOWELS = ("ə", "u", "i", "a", "e", None, "o")

# First code point of each plain series -> IPA consonant.  Merged letters share
# a consonant on purpose (modern Amharic no longer distinguishes them).
_SERIES = {
    0x1200: "h",    # ሀ
    0x1208: "l",    # ለ
    0x1210: "h",    # ሐ  (merged with ሀ)
    0x1218: "m",    # መ
    0x1220: "s",    # ሠ  (merged with ሰ)
    0x1228: "r",    # ረ
    0x1230: "s",    # ሰ
    0x1238: "ʃ",    # ሸ
    0x1240: "kʼ",   # ቀ
    0x1260: "b",    # በ
    0x1268: "v",    # ቨ
    0x1270: "t",    # ተ
    0x1278: "tʃ",   # ቸ
    0x1280: "h",    # ኀ  (merged with ሀ)
    0x1290: "n",    # ነ
    0x1298: "ɲ",    # ኘ
    0x12A0: "ʔ",    # አ
    0x12A8: "k",    # ከ
    0x12B8: "x",    # ኸ
    0x12C8: "w",    # ወ
    0x12D0: "ʔ",    # ዐ  (merged with አ)
    0x12D8: "z",    # ዘ
    0x12E0: "ʒ",    # ዠ
    0x12E8: "j",    # የ
    0x12F0: "d",    # ደ
    0x1300: "dʒ",   # ጀ
    0x1308: "g",    # ገ
    0x1320: "tʼ",   # ጠ
    0x1328: "tʃʼ",  # ጨ
    0x1330: "pʼ",   # ጰ
    0x1338: "sʼ",   # ጸ
    0x1340: "sʼ",   # ፀ  (merged with ጸ)
    0x1348: "f",    # ፈ
    0x1350: "p",    # ፐ
}

# Series whose 1st order is said "a" in modern Amharic (ሀ = ሃ).
_FIRST_ORDER_A = {0x1200, 0x1210, 0x1280, 0x12A0, 0x12D0}

# Series whose 8th slot (offset 7) is the Amharic Cʷa letter.  The other
# series' 8th slots are -oa letters of other languages (ሇ ቇ ኇ ኯ ዏ ዯ ጏ ፇ) or
# special (ኧ), so they are not listed.
_WA_SERIES = (
    0x1208, 0x1210, 0x1218, 0x1220, 0x1228, 0x1230, 0x1238, 0x1260, 0x1268,
    0x1270, 0x1278, 0x1290, 0x1298, 0x12D8, 0x12E0, 0x12F0, 0x1300, 0x1320,
    0x1328, 0x1330, 0x1338, 0x1348, 0x1350,
)

# Labialised series: first code point -> consonant.  Offsets 0,2,3,4,5 are
# Cʷə Cʷi Cʷa Cʷe Cʷ(ɨ); offsets 1, 6 and 7 are unassigned.
_LABIALISED_SERIES = {
    0x1248: "kʼʷ",  # ቈ
    0x1288: "hʷ",   # ኈ  (ኀ merged with ሀ)
    0x12B0: "kʷ",   # ኰ
    0x12C0: "xʷ",   # ዀ
    0x1310: "gʷ",   # ጐ
}
_LABIALISED_OFFSETS = {0: "ə", 2: "i", 3: "a", 4: "e", 5: None}

_SPECIAL_LETTERS = {
    "\u12A7": ("ʔ", "ə"),   # ኧ: Amharic uses it for a bare ä (ə)
    "\u1358": ("rj", "a"),  # ፘ
    "\u1359": ("mj", "a"),  # ፙ
    "\u135A": ("fj", "a"),  # ፚ
}


def _build_table() -> dict[str, tuple[str, str | None]]:
    table: dict[str, tuple[str, str | None]] = {}
    for base, cons in _SERIES.items():
        for offset, vowel in enumerate(_ORDER_VOWELS):
            if offset == 0 and base in _FIRST_ORDER_A:
                vowel = "a"
            table[chr(base + offset)] = (cons, vowel)
    for base in _WA_SERIES:
        table[chr(base + 7)] = (_SERIES[base] + "ʷ", "a")
    for base, cons in _LABIALISED_SERIES.items():
        for offset, vowel in _LABIALISED_OFFSETS.items():
            table[chr(base + offset)] = (cons, vowel)
    table.update(_SPECIAL_LETTERS)
    return table


_TABLE = _build_table()

#: Read-only view: letter -> (IPA consonant, vowel or None for 6th order).
AMHARIC_LETTER_TABLE = types.MappingProxyType(_TABLE)
#: Every letter this module handles as Amharic, in code point order.
AMHARIC_LETTERS = tuple(sorted(_TABLE))

_GLOTTAL = "ʔ"
_EPENTHETIC = "ɨ"
_GEMINATION_MARK = "\u135F"

# Sonority classes for the word-final two-consonant coda test.
_SONORITY = {
    "p": 1, "b": 1, "t": 1, "d": 1, "k": 1, "g": 1, "ʔ": 1,
    "pʼ": 1, "tʼ": 1, "kʼ": 1, "tʃ": 1, "dʒ": 1, "tʃʼ": 1,
    "f": 2, "v": 2, "s": 2, "z": 2, "ʃ": 2, "ʒ": 2, "h": 2, "x": 2, "sʼ": 2,
    "m": 3, "n": 3, "ɲ": 3,
    "l": 4, "r": 4,
    "w": 5, "j": 5,
}


def _sonority(cons: str) -> int:
    return _SONORITY.get(cons.replace("ʷ", "").replace("ː", ""), 1)


def _epenthesis_pattern(cons: list[str], preceded: bool, final: bool) -> list[bool]:
    """For a run of 6th-order consonants, True where the consonant takes ɨ.

    ``preceded``: a vowel-bearing letter comes before the run in the word;
    ``final``: the run ends the word.  See the module docstring for the rule.
    """
    k = len(cons)
    if not final:
        # Left to right: after a vowel start bare, at word start start with ɨ.
        takes = [(j % 2 == 1) if preceded else (j % 2 == 0) for j in range(k)]
    else:
        # Right to left: one or two final coda consonants, then ɨ, bare, ...
        coda = 2 if k >= 2 and _sonority(cons[-2]) > _sonority(cons[-1]) else 1
        takes = []
        for j in range(k):
            r = k - 1 - j
            takes.append(r >= coda and (r - coda) % 2 == 0)
    if not preceded:
        takes[0] = True  # nothing before it can carry it: no initial clusters
    return takes


def _word_to_ipa(segs: list[tuple[str, str | None]]) -> str:
    vowels = [v for _, v in segs]
    n = len(segs)
    j = 0
    while j < n:
        if vowels[j] is not None:
            j += 1
            continue
        start = j
        while j < n and vowels[j] is None:
            j += 1
        run = [c for c, _ in segs[start:j]]
        for pos, take in zip(range(start, j), _epenthesis_pattern(run, start > 0, j == n)):
            vowels[pos] = _EPENTHETIC if take else ""
    out = []
    for idx, ((cons, _), vowel) in enumerate(zip(segs, vowels)):
        if idx == 0 and cons.startswith(_GLOTTAL):
            cons = ""  # word-initial glottal onset is not written
        out.append(cons + vowel)
    return "".join(out)


def _passes_through(ch: str) -> bool:
    return ch.isascii() or ch.isspace() or unicodedata.category(ch).startswith("P")


def _rules_g2p(text: str) -> tuple[str, list[int]]:
    out: list[str] = []
    unknown: list[int] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in _TABLE:
            segs = []
            while i < n and text[i] in _TABLE:
                cons, vowel = _TABLE[text[i]]
                i += 1
                if i < n and text[i] == _GEMINATION_MARK:
                    cons += "ː"
                    i += 1
                segs.append((cons, vowel))
            out.append(_word_to_ipa(segs))
            continue
        if not _passes_through(text[i]):
            unknown.append(i)
        out.append(text[i])
        i += 1
    return "".join(out), unknown


def _unknown_indices(text: str) -> list[int]:
    """Unknown characters of ``text`` under this module's inventory."""
    return _rules_g2p(text)[1]


_EPITRAN = None


def _epitran_transliterate(text: str) -> str:
    global _EPITRAN
    if _EPITRAN is None:
        try:
            import epitran  # lazy: heavy and optional

            _EPITRAN = epitran.Epitran("amh-Ethi")
        except Exception as exc:  # ImportError, missing data files, ...
            raise RuntimeError(
                "amharic_g2p(backend='epitran') needs the 'epitran' package with its "
                f"'amh-Ethi' map, which could not be loaded ({exc!r}); install epitran "
                "or use backend='rules'."
            ) from exc
    return _EPITRAN.transliterate(text)


def amharic_g2p(text: str, *, backend: str = "rules", report: list | None = None) -> str:
    """Convert Amharic text to IPA.

    ``backend="rules"`` uses this module's table and sixth-order rule (module
    docstring); ``backend="epitran"`` uses ``epitran.Epitran("amh-Ethi")``,
    loaded on first use (RuntimeError if it cannot be).  Any other backend is
    a ValueError.

    Characters that are neither known letters nor pass-through characters
    (whitespace, ASCII, Unicode punctuation) are copied unchanged.  If
    ``report`` is a list, one dict ``{"char", "index", "codepoint", "name"}``
    per such occurrence is appended (index into ``text``; judged by this
    module's inventory whatever the backend), and one warning is logged per
    call when any were found.
    """
    if backend not in ("rules", "epitran"):
        raise ValueError(f"unknown Amharic G2P backend {backend!r}; use 'rules' or 'epitran'")
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")

    if backend == "rules":
        result, unknown = _rules_g2p(text)
    else:
        result = _epitran_transliterate(text)
        unknown = _unknown_indices(text)

    if unknown:
        if report is not None:
            for i in unknown:
                ch = text[i]
                report.append(
                    {
                        "char": ch,
                        "index": i,
                        "codepoint": f"U+{ord(ch):04X}",
                        "name": unicodedata.name(ch, ""),
                    }
                )
        codes = sorted({f"U+{ord(text[i]):04X}" for i in unknown})
        logger.warning(
            "amharic_g2p: %d unknown character(s) passed through unchanged: %s",
            len(unknown),
            ", ".join(codes),
        )
    return result


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

_GEEZ_VALUES = {chr(0x1369 + i): i + 1 for i in range(9)}           # ፩..፱
_GEEZ_VALUES.update({chr(0x1372 + i): (i + 1) * 10 for i in range(9)})  # ፲..፺
_GEEZ_VALUES["\u137B"] = 100     # ፻
_GEEZ_VALUES["\u137C"] = 10000   # ፼


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
_WORDSPACE = "\u1361"    # ፡
_SECTION_MARK = "\u1360"  # ፠ (decorative, removed)

_ETH_LETTER = "\u1200-\u135A\u1380-\u138F\u2D80-\u2DDE\uAB01-\uAB2E"
_GEEZ_NUMBER_RE = re.compile("[\u1369-\u137C]+")
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
