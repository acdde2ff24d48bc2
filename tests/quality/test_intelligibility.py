"""CER/WER with ASR-style normalisation."""

import pytest

from utils.quality.intelligibility import cer, corpus_cer, corpus_wer, normalize_text, wer


def test_case_punctuation_and_whitespace_are_not_errors():
    ref = "Hello, World!  It's   a “test” — isn't it?"
    hyp = "hello world its a test isnt it"
    assert cer(ref, hyp) == 0.0 and wer(ref, hyp) == 0.0
    assert normalize_text("Ｆｕｌｌ-width ＡＢＣ") == "full width abc"  # NFKC folds full-width forms


def test_errors_are_counted():
    assert cer("abcd", "abed") == pytest.approx(0.25)  # one substitution in four characters
    assert cer("abcd", "abcdxy") == pytest.approx(0.5)  # two insertions
    assert cer("abcd", "") == 1.0
    assert wer("the cat sat", "the cat sat down") == pytest.approx(1 / 3)
    assert wer("the cat sat", "a cat sat") == pytest.approx(1 / 3)
    # Hyphens split words for WER, while CER ignores word boundaries.
    assert wer("well known", "well-known") == 0.0 and cer("well known", "wellknown") == 0.0
    assert cer("3 cats", "three cats") > 0  # digits are kept: language-specific


def test_scripts_without_spaces_and_ethiopic():
    # Chinese: each character is a word for WER; spaces between characters do not matter for CER.
    assert wer("你好世界", "你好世介") == pytest.approx(0.25)
    assert cer("你好世界。", "你 好 世 界") == 0.0
    # Amharic: Ethiopic punctuation (። ፣) is removed, letters are compared.
    assert cer("ሰላም፣ እንዴት ነህ።", "ሰላም እንዴት ነህ") == 0.0
    assert cer("ሰላም ነው", "ሰላም ነዉ") == pytest.approx(1 / 5)
    # Letters Amharic pronounces alike are one letter for the Amharic error rates only.
    assert cer("ሰላም ሐሳብ ኣለኝ", "ሠላም ሀሳብ አለኝ", "amh") == 0.0
    assert cer("ሰላም ሐሳብ ኣለኝ", "ሠላም ሀሳብ አለኝ") == pytest.approx(3 / 9)
    assert normalize_text("ሓ ኀ ዓ ፀ ሑ", "am") == "ሀ ሀ አ ጸ ሁ"


def test_empty_reference_and_corpus_rates():
    assert cer("", "") == 0.0 and cer("...", "") == 0.0
    assert cer("", "something") == 1.0
    # Corpus CER weighs clips by their length: 2 errors over 6 reference characters.
    assert corpus_cer(["abcd", "ef"], ["abcd", "xy"]) == pytest.approx(2 / 6)
    assert corpus_wer(["a b c", "d"], ["a b c", "e"]) == pytest.approx(1 / 4)
    with pytest.raises(ValueError, match="one transcript per text"):
        corpus_cer(["a", "b"], ["a"])
