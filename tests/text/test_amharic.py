"""Tests for utils/text/amharic.py (Amharic normalisation and G2P).

Expected IPA values were worked out by hand from the rules in the module
docstring (sixth-order rule, merged letters, word-initial glottal dropped).
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest

from tests.helpers import run_watched
from utils.text import amharic
from utils.text import amharic_g2p as amharic_g2p_module
from utils.text.amharic import (
    AMHARIC_LANGUAGE_CODES,
    AMHARIC_LETTERS,
    amharic_front_end,
    amharic_g2p,
    ethiopic_numeral_to_int,
    is_amharic_code,
    normalize_amharic,
    number_to_amharic,
)

ETHIOPIC_RE = re.compile("[\u1200-\u139f\u2d80-\u2ddf]")

# Independently written: the 34 base series (7 orders each) and their consonant.
BASE_SERIES = [
    ("ሀሁሂሃሄህሆ", "h"),
    ("ለሉሊላሌልሎ", "l"),
    ("ሐሑሒሓሔሕሖ", "h"),
    ("መሙሚማሜምሞ", "m"),
    ("ሠሡሢሣሤሥሦ", "s"),
    ("ረሩሪራሬርሮ", "r"),
    ("ሰሱሲሳሴስሶ", "s"),
    ("ሸሹሺሻሼሽሾ", "ʃ"),
    ("ቀቁቂቃቄቅቆ", "kʼ"),
    ("በቡቢባቤብቦ", "b"),
    ("ቨቩቪቫቬቭቮ", "v"),
    ("ተቱቲታቴትቶ", "t"),
    ("ቸቹቺቻቼችቾ", "tʃ"),
    ("ኀኁኂኃኄኅኆ", "h"),
    ("ነኑኒናኔንኖ", "n"),
    ("ኘኙኚኛኜኝኞ", "ɲ"),
    ("አኡኢኣኤእኦ", ""),  # glottal dropped word-initially
    ("ከኩኪካኬክኮ", "k"),
    ("ኸኹኺኻኼኽኾ", "x"),
    ("ወዉዊዋዌውዎ", "w"),
    ("ዐዑዒዓዔዕዖ", ""),  # glottal dropped word-initially
    ("ዘዙዚዛዜዝዞ", "z"),
    ("ዠዡዢዣዤዥዦ", "ʒ"),
    ("የዩዪያዬይዮ", "j"),
    ("ደዱዲዳዴድዶ", "d"),
    ("ጀጁጂጃጄጅጆ", "dʒ"),
    ("ገጉጊጋጌግጎ", "g"),
    ("ጠጡጢጣጤጥጦ", "tʼ"),
    ("ጨጩጪጫጬጭጮ", "tʃʼ"),
    ("ጰጱጲጳጴጵጶ", "pʼ"),
    ("ጸጹጺጻጼጽጾ", "sʼ"),
    ("ፀፁፂፃፄፅፆ", "sʼ"),
    ("ፈፉፊፋፌፍፎ", "f"),
    ("ፐፑፒፓፔፕፖ", "p"),
]
# A lone 6th-order letter is word-initial, so it takes ɨ.
ORDER_VOWELS = ["ə", "u", "i", "a", "e", "ɨ", "o"]
FIRST_ORDER_A = {"ሀ", "ሐ", "ኀ", "አ", "ዐ"}

BASE_LETTER_EXPECTED = {}
for _row, _cons in BASE_SERIES:
    assert len(_row) == 7
    for _order, _letter in enumerate(_row):
        _vowel = "a" if _order == 0 and _letter in FIRST_ORDER_A else ORDER_VOWELS[_order]
        BASE_LETTER_EXPECTED[_letter] = _cons + _vowel

LABIALISED_EXPECTED = {
    "ቈ": "kʼʷə",
    "ቊ": "kʼʷi",
    "ቋ": "kʼʷa",
    "ቌ": "kʼʷe",
    "ቍ": "kʼʷɨ",
    "ኈ": "hʷə",
    "ኊ": "hʷi",
    "ኋ": "hʷa",
    "ኌ": "hʷe",
    "ኍ": "hʷɨ",
    "ኰ": "kʷə",
    "ኲ": "kʷi",
    "ኳ": "kʷa",
    "ኴ": "kʷe",
    "ኵ": "kʷɨ",
    "ጐ": "gʷə",
    "ጒ": "gʷi",
    "ጓ": "gʷa",
    "ጔ": "gʷe",
    "ጕ": "gʷɨ",
    "ሏ": "lʷa",
    "ሗ": "hʷa",
    "ሟ": "mʷa",
    "ሧ": "sʷa",
    "ሯ": "rʷa",
    "ሷ": "sʷa",
    "ሿ": "ʃʷa",
    "ቧ": "bʷa",
    "ቯ": "vʷa",
    "ቷ": "tʷa",
    "ቿ": "tʃʷa",
    "ኗ": "nʷa",
    "ኟ": "ɲʷa",
    "ዟ": "zʷa",
    "ዧ": "ʒʷa",
    "ዷ": "dʷa",
    "ጇ": "dʒʷa",
    "ጧ": "tʼʷa",
    "ጯ": "tʃʼʷa",
    "ጷ": "pʼʷa",
    "ጿ": "sʼʷa",
    "ፏ": "fʷa",
    "ፗ": "pʷa",
    "ኧ": "ə",
}

WORDS = [
    ("ሰላም", "səlam"),
    ("ቋንቋ", "kʼʷankʼʷa"),  # medial ን closes the syllable: bare
    ("ኢትዮጵያ", "itjopʼja"),
    ("አማርኛ", "amarɲa"),
    ("ቤት", "bet"),
    ("ልጅ", "lɨdʒ"),  # word-initial 6th order takes ɨ
    ("ውሃ", "wɨha"),  # ሃ = ha
    ("ትምህርት", "tɨmhɨrt"),  # final -rt falls in sonority: kept
    ("አዲስ አበባ", "adis abəba"),
    ("መጽሐፍ", "məsʼhaf"),  # ሐ 1st order = ha
    ("ጤና ይስጥልኝ", "tʼena jɨstʼɨlɲ"),
    ("እናት", "ɨnat"),
    ("አባት", "abat"),
    ("ቡና", "buna"),
    ("ሀገር", "hagər"),  # ሀ 1st order = ha
    ("ዳቦ", "dabo"),
    ("ሰዓት", "səʔat"),  # medial glottal kept
    ("ምዕራብ", "mɨʔrab"),
    ("ሥዕል", "sɨʔɨl"),  # final ʔl rises: broken
    ("አምስት", "amɨst"),
    ("ፍቅር", "fɨkʼɨr"),
    ("ክፍል", "kɨfɨl"),
    ("ቅርብ", "kʼɨrb"),
    ("እንግሊዝኛ", "ɨngɨlizɲa"),
    ("ስድስት", "sɨdɨst"),
    ("ሶስት", "sost"),
    ("ጓደኛ", "gʷadəɲa"),
    ("ኳስ", "kʷas"),
    ("ቁጥር", "kʼutʼɨr"),
    ("ዣንጥላ", "ʒantʼɨla"),
    ("ቸኮሌት", "tʃəkolet"),
    ("ቪዲዮ", "vidijo"),
    ("ጨው", "tʃʼəw"),
    ("ኧረ", "ərə"),
    ("ሰላም, ዓለም.", "səlam, aləm."),
]


def _g2p_with_report(text):
    report = []
    return amharic_g2p(text, report=report), report


# --------------------------------------------------------------------------
# Letter coverage
# --------------------------------------------------------------------------


def test_module_letters_all_map_to_ipa():
    assert len(AMHARIC_LETTERS) >= 34 * 7
    for letter in AMHARIC_LETTERS:
        out, report = _g2p_with_report(letter)
        assert out, letter
        assert not ETHIOPIC_RE.search(out), (letter, out)
        assert report == [], (letter, report)


def test_independent_base_table_is_covered():
    missing = [c for c in BASE_LETTER_EXPECTED if c not in AMHARIC_LETTERS]
    assert missing == []
    assert len(BASE_LETTER_EXPECTED) == 34 * 7


@pytest.mark.parametrize("letter,expected", sorted(BASE_LETTER_EXPECTED.items()))
def test_base_letter_ipa(letter, expected):
    out, report = _g2p_with_report(letter)
    assert out == expected
    assert not ETHIOPIC_RE.search(out)
    assert report == []


@pytest.mark.parametrize("letter,expected", sorted(LABIALISED_EXPECTED.items()))
def test_labialised_and_special_letters(letter, expected):
    assert letter in AMHARIC_LETTERS
    assert amharic_g2p(letter) == expected


def test_ejectives_use_modifier_apostrophe():
    out = amharic_g2p("ቅ ጥ ጭ ጵ ፅ ጽ")
    assert out == "kʼɨ tʼɨ tʃʼɨ pʼɨ sʼɨ sʼɨ"
    assert "\u02bc" in out and "'" not in out


def test_non_amharic_letters_are_not_claimed():
    for ch in ("ቐ", "ጘ", "ዸ", "ሇ", "ዯ", "ⶀ"):
        assert ch not in AMHARIC_LETTERS
        out, report = _g2p_with_report(ch)
        assert out == ch
        assert len(report) == 1


# --------------------------------------------------------------------------
# Words and the sixth-order rule
# --------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", WORDS)
def test_common_words(text, expected):
    out, report = _g2p_with_report(text)
    assert out == expected
    assert report == []


def test_gemination_mark_lengthens_consonant():
    assert amharic_g2p("ሰ\u135fላም") == "sːəlam"


def test_ethiopic_marks_and_ascii_pass_through():
    out, report = _g2p_with_report("ሰላም። Hi, 42!")
    assert out == "səlam። Hi, 42!"
    assert report == []


# --------------------------------------------------------------------------
# Merged letters
# --------------------------------------------------------------------------

MERGED_GROUPS = [
    ["ሀሁሂሃሄህሆ", "ሐሑሒሓሔሕሖ", "ኀኁኂኃኄኅኆ"],
    ["ሠሡሢሣሤሥሦ", "ሰሱሲሳሴስሶ"],
    ["ዐዑዒዓዔዕዖ", "አኡኢኣኤእኦ"],
    ["ጸጹጺጻጼጽጾ", "ፀፁፂፃፄፅፆ"],
]


@pytest.mark.parametrize("group", MERGED_GROUPS, ids=lambda g: g[0][0])
def test_merged_letters_identical(group):
    for order in range(7):
        letters = [row[order] for row in group]
        for context in ("{}", "ሰ{}ም", "ል{}"):  # initial, medial, final
            outs = {amharic_g2p(context.format(c)) for c in letters}
            assert len(outs) == 1, (letters, context, outs)


def test_merged_letters_in_words():
    assert amharic_g2p("ሀገር") == amharic_g2p("ሐገር") == amharic_g2p("ኀገር") == "hagər"
    assert amharic_g2p("ሰላም") == amharic_g2p("ሠላም") == "səlam"
    assert amharic_g2p("ሰዓት") == amharic_g2p("ሰአት") == "səʔat"
    assert amharic_g2p("ጸሐይ") == amharic_g2p("ፀሐይ") == "sʼəhaj"
    assert amharic_g2p("ሗ") == amharic_g2p("ኋ") == "hʷa"
    assert amharic_g2p("ሧ") == amharic_g2p("ሷ") == "sʷa"


# --------------------------------------------------------------------------
# Unknown characters
# --------------------------------------------------------------------------


def test_unknown_characters_pass_through_and_are_reported(caplog):
    text = "ሰላም ቐ€ቐ"
    with caplog.at_level(logging.WARNING, logger="utils.text.amharic_g2p"):
        out, report = _g2p_with_report(text)
    assert out == "səlam ቐ€ቐ"
    assert len(report) == 3
    assert [r["codepoint"] for r in report] == ["U+1250", "U+20AC", "U+1250"]
    assert [r["index"] for r in report] == [4, 5, 6]  # "ሰላም" is 3 characters
    assert [r["char"] for r in report] == ["ቐ", "€", "ቐ"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "U+1250" in warnings[0].getMessage()


def test_ethiopic_numerals_in_g2p_are_reported():
    out, report = _g2p_with_report("፲፪")
    assert out == "፲፪"
    assert [r["codepoint"] for r in report] == ["U+1372", "U+136A"]


def test_no_warning_without_unknowns(caplog):
    with caplog.at_level(logging.WARNING, logger="utils.text.amharic_g2p"):
        amharic_g2p("ሰላም")
    assert not caplog.records


def test_unknown_without_report_list_still_passes_through():
    assert amharic_g2p("ሰላም ☃") == "səlam ☃"


def test_bad_backend():
    with pytest.raises(ValueError):
        amharic_g2p("ሰላም", backend="espeak")


# --------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "numeral,value",
    [
        ("፩", 1),
        ("፺፱", 99),
        ("፲፪", 12),
        ("፻፳፭", 125),
        ("፪፻", 200),
        ("፼", 10000),
        ("፪፼፫፻", 20300),
        ("፻፼", 1000000),
        ("፳፻፲፮", 2016),
        ("፲፻", 1000),
    ],
)
def test_ethiopic_numeral_values(numeral, value):
    assert ethiopic_numeral_to_int(numeral) == value


@pytest.mark.parametrize(
    "text,expected",
    [
        ("፲፪", "አስራ ሁለት"),
        ("፻፳፭", "መቶ ሀያ አምስት"),
        ("፪፻", "ሁለት መቶ"),
        ("፼", "አስር ሺህ"),
        ("፪፼፫፻", "ሀያ ሺህ ሶስት መቶ"),
        ("፲፪ሰዓት", "አስራ ሁለት ሰዓት"),
    ],
)
def test_ethiopic_numerals_normalised(text, expected):
    assert normalize_amharic(text) == expected


ARABIC_NUMBERS = [
    ("0", "ዜሮ"),
    ("7", "ሰባት"),
    ("10", "አስር"),
    ("12", "አስራ ሁለት"),
    ("19", "አስራ ዘጠኝ"),
    ("25", "ሀያ አምስት"),
    ("90", "ዘጠና"),
    ("100", "መቶ"),
    ("125", "መቶ ሀያ አምስት"),
    ("200", "ሁለት መቶ"),
    ("1000", "አንድ ሺህ"),
    ("1001", "አንድ ሺህ አንድ"),
    ("2024", "ሁለት ሺህ ሀያ አራት"),
    ("100000", "መቶ ሺህ"),
    ("1000000", "አንድ ሚሊዮን"),
    ("1,000,000", "አንድ ሚሊዮን"),
    ("1500000", "አንድ ሚሊዮን አምስት መቶ ሺህ"),
    ("2000000000", "ሁለት ቢሊዮን"),
    ("3.5", "ሶስት ነጥብ አምስት"),
    ("0.25", "ዜሮ ነጥብ ሁለት አምስት"),
    ("12.05", "አስራ ሁለት ነጥብ ዜሮ አምስት"),
    ("007", "ዜሮ ዜሮ ሰባት"),
]


@pytest.mark.parametrize("text,expected", ARABIC_NUMBERS)
def test_arabic_numbers_normalised(text, expected):
    assert normalize_amharic(text) == expected


def test_number_to_amharic_direct_and_range():
    assert number_to_amharic(11) == "አስራ አንድ"
    assert number_to_amharic(999) == "ዘጠኝ መቶ ዘጠና ዘጠኝ"
    with pytest.raises(ValueError):
        number_to_amharic(-1)
    with pytest.raises(ValueError):
        number_to_amharic(10**12)


def test_huge_number_read_digit_by_digit():
    assert normalize_amharic("1000000000000") == " ".join(["አንድ"] + ["ዜሮ"] * 12)


def test_number_in_sentence():
    assert normalize_amharic("ዋጋው 15 ብር ነው።") == "ዋጋው አስራ አምስት ብር ነው."


# --------------------------------------------------------------------------
# Punctuation and whitespace
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("ሰላም።", "ሰላም."),
        ("ሰላም፣ደህና", "ሰላም, ደህና"),
        ("አንድ፤ሁለት", "አንድ; ሁለት"),
        ("ሀ፥ለ", "ሀ: ለ"),
        ("እንዲህ፦ ሰላም", "እንዲህ: ሰላም"),
        ("ደህና ነህ፧", "ደህና ነህ?"),
        ("ሰላም፨ደህና", "ሰላም. ደህና"),
        ("፠ ሰላም", "ሰላም"),
        ("ሰላም፡ነው", "ሰላም ነው"),
        ("ሰላም ። ደህና", "ሰላም. ደህና"),
        ("ሰላም።።", "ሰላም.."),
    ],
)
def test_ethiopic_punctuation(text, expected):
    assert normalize_amharic(text) == expected


def test_ascii_ethiopic_mix_spacing():
    assert normalize_amharic("ሰላም.ደህና") == "ሰላም. ደህና"
    assert normalize_amharic("ሰላም ,ደህና ነህ ?") == "ሰላም, ደህና ነህ?"


def test_whitespace_and_other_text():
    assert normalize_amharic("  ሰላም \n\t ዓለም  ") == "ሰላም ዓለም"
    assert normalize_amharic("Hello, world! e.g. example.com") == "Hello, world! e.g. example.com"


# --------------------------------------------------------------------------
# Front end, language codes, backends, imports
# --------------------------------------------------------------------------


def test_front_end_without_g2p():
    assert amharic_front_end("ሰላም፣ ዓለም። ፲፪", use_g2p=False) == "ሰላም, ዓለም. አስራ ሁለት"


def test_front_end_with_g2p():
    assert amharic_front_end("ሰላም፣ ዓለም። ፲፪", use_g2p=True) == "səlam, aləm. asra hulət"


def test_language_codes():
    assert AMHARIC_LANGUAGE_CODES == ("amh", "am")
    for code in ("amh", "am", "AM", " amh ", "am-ET", "amh_Ethi"):
        assert is_amharic_code(code), code
    for code in ("en", "ar", "amx", "", "a"):
        assert not is_amharic_code(code), code


def test_epitran_backend():
    try:
        out = amharic_g2p("ሰላም", backend="epitran")
    except RuntimeError as exc:
        pytest.skip(f"epitran backend unavailable: {exc}")
    assert out.strip()
    assert not ETHIOPIC_RE.search(out)


def test_epitran_missing_raises_runtime_error(monkeypatch):
    monkeypatch.setattr(amharic_g2p_module, "_EPITRAN", None)
    monkeypatch.setitem(sys.modules, "epitran", None)  # makes the import fail
    with pytest.raises(RuntimeError, match="epitran"):
        amharic_g2p("ሰላም", backend="epitran")


def test_module_import_is_light():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('amh', {str(Path(amharic.__file__))!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "heavy = [m for m in ('torch', 'epitran', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert mod.amharic_g2p('ሰላም') == 'səlam'\n"
    )
    result = run_watched([sys.executable, "-c", code], text=True)
    assert result.returncode == 0, result.stderr
