"""Amharic grapheme-to-phoneme (rule-based, or epitran as an option). Only the standard library is imported.

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
import types
import unicodedata

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# Letter table
# ---------------------------------------------------------------------------

# Vowel of each order (offset within a series); None marks the 6th order,
# whose vowel is decided by the sixth-order rule.
_ORDER_VOWELS = ("ə", "u", "i", "a", "e", None, "o")

# First code point of each plain series -> IPA consonant.  Merged letters share
# a consonant on purpose (modern Amharic no longer distinguishes them).
_SERIES = {
    0x1200: "h",  # ሀ
    0x1208: "l",  # ለ
    0x1210: "h",  # ሐ  (merged with ሀ)
    0x1218: "m",  # መ
    0x1220: "s",  # ሠ  (merged with ሰ)
    0x1228: "r",  # ረ
    0x1230: "s",  # ሰ
    0x1238: "ʃ",  # ሸ
    0x1240: "kʼ",  # ቀ
    0x1260: "b",  # በ
    0x1268: "v",  # ቨ
    0x1270: "t",  # ተ
    0x1278: "tʃ",  # ቸ
    0x1280: "h",  # ኀ  (merged with ሀ)
    0x1290: "n",  # ነ
    0x1298: "ɲ",  # ኘ
    0x12A0: "ʔ",  # አ
    0x12A8: "k",  # ከ
    0x12B8: "x",  # ኸ
    0x12C8: "w",  # ወ
    0x12D0: "ʔ",  # ዐ  (merged with አ)
    0x12D8: "z",  # ዘ
    0x12E0: "ʒ",  # ዠ
    0x12E8: "j",  # የ
    0x12F0: "d",  # ደ
    0x1300: "dʒ",  # ጀ
    0x1308: "g",  # ገ
    0x1320: "tʼ",  # ጠ
    0x1328: "tʃʼ",  # ጨ
    0x1330: "pʼ",  # ጰ
    0x1338: "sʼ",  # ጸ
    0x1340: "sʼ",  # ፀ  (merged with ጸ)
    0x1348: "f",  # ፈ
    0x1350: "p",  # ፐ
}

# Series whose 1st order is said "a" in modern Amharic (ሀ = ሃ).
_FIRST_ORDER_A = {0x1200, 0x1210, 0x1280, 0x12A0, 0x12D0}

# Series whose 8th slot (offset 7) is the Amharic Cʷa letter.  The other
# series' 8th slots are -oa letters of other languages (ሇ ቇ ኇ ኯ ዏ ዯ ጏ ፇ) or
# special (ኧ), so they are not listed.
_WA_SERIES = (
    0x1208,
    0x1210,
    0x1218,
    0x1220,
    0x1228,
    0x1230,
    0x1238,
    0x1260,
    0x1268,
    0x1270,
    0x1278,
    0x1290,
    0x1298,
    0x12D8,
    0x12E0,
    0x12F0,
    0x1300,
    0x1320,
    0x1328,
    0x1330,
    0x1338,
    0x1348,
    0x1350,
)

# Labialised series: first code point -> consonant.  Offsets 0,2,3,4,5 are
# Cʷə Cʷi Cʷa Cʷe Cʷ(ɨ); offsets 1, 6 and 7 are unassigned.
_LABIALISED_SERIES = {
    0x1248: "kʼʷ",  # ቈ
    0x1288: "hʷ",  # ኈ  (ኀ merged with ሀ)
    0x12B0: "kʷ",  # ኰ
    0x12C0: "xʷ",  # ዀ
    0x1310: "gʷ",  # ጐ
}
_LABIALISED_OFFSETS = {0: "ə", 2: "i", 3: "a", 4: "e", 5: None}

_SPECIAL_LETTERS = {
    "\u12a7": ("ʔ", "ə"),  # ኧ: Amharic uses it for a bare ä (ə)
    "\u1358": ("rj", "a"),  # ፘ
    "\u1359": ("mj", "a"),  # ፙ
    "\u135a": ("fj", "a"),  # ፚ
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
_GEMINATION_MARK = "\u135f"

# Sonority classes for the word-final two-consonant coda test.
_SONORITY = {
    "p": 1,
    "b": 1,
    "t": 1,
    "d": 1,
    "k": 1,
    "g": 1,
    "ʔ": 1,
    "pʼ": 1,
    "tʼ": 1,
    "kʼ": 1,
    "tʃ": 1,
    "dʒ": 1,
    "tʃʼ": 1,
    "f": 2,
    "v": 2,
    "s": 2,
    "z": 2,
    "ʃ": 2,
    "ʒ": 2,
    "h": 2,
    "x": 2,
    "sʼ": 2,
    "m": 3,
    "n": 3,
    "ɲ": 3,
    "l": 4,
    "r": 4,
    "w": 5,
    "j": 5,
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
