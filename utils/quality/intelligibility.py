"""Character and word error rates of a transcript against its text, normalised as ASR evaluations do.

Normalisation (:func:`normalize_text`, the same for reference and hypothesis): Unicode NFKC (full-width
and compatibility forms fold to their plain letters), case folding, apostrophes removed ("don't" ->
"dont"), every other punctuation mark or symbol (Unicode categories P* and S*, which covers Ethiopic
``። ፣``, CJK ``。、`` and Arabic ``؟ ،``) replaced by a space, whitespace collapsed. Diacritics and
digits are kept: they are language-specific ("3" vs "three" stays an error).

For Amharic (``language="amh"`` or ``"am"``) the letters that modern Amharic pronounces alike are
folded to one spelling, as Amharic ASR evaluations do: the ሐ and ኀ series to ሀ, ሠ to ሰ, ዐ to አ, ፀ to ጸ
(all seven orders), and the 4th-order ሃ ኣ to the 1st-order ሀ አ they sound like; a recogniser choosing
the other spelling of the same sound is not an error.

CER counts characters without the spaces: word segmentation is what WER measures, and scripts written
without spaces (Chinese, Japanese, Thai) or recognisers that split or join words differently are then
compared fairly. WER splits on spaces, and each character of a script written without spaces counts as
one word there. For such scripts, and for Amharic where words are long and morphology rich, CER is the
meaningful figure. Rates are edits / reference length and can exceed 1 when the transcript is longer.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import jiwer

from utils.data.sentences import _no_space_char

_APOSTROPHES = "'’ʼ`´"
_AMHARIC_CODES = ("amh", "am")


def _amharic_homophones() -> dict[int, str]:
    table = {}
    pairs = (
        (0x1200, 0x1200),
        (0x1210, 0x1200),
        (0x1280, 0x1200),
        (0x1220, 0x1230),
        (0x12A0, 0x12A0),
        (0x12D0, 0x12A0),
        (0x1340, 0x1338),
    )
    for source, target in pairs:
        for order in range(7):  # the seven vowel orders sit at the same offsets in every series
            # The 4th order of the h and glottal series sounds like their 1st (ሃ = ሀ = ha, ኣ = አ = a).
            folded = 0 if order == 3 and target in (0x1200, 0x12A0) else order
            if source + order != target + folded:
                table[source + order] = chr(target + folded)
    return table


_AMHARIC_FOLD = _amharic_homophones()


class _Normalize(jiwer.AbstractTransform):
    """The normalisation of the module docstring, as a jiwer transform."""

    def __init__(self, language: str | None = None) -> None:
        self.amharic = (language or "").strip().lower() in _AMHARIC_CODES

    def process_string(self, s: str) -> str:
        s = unicodedata.normalize("NFKC", s).casefold()
        if self.amharic:
            s = s.translate(_AMHARIC_FOLD)
        out = []
        for ch in s:
            if ch in _APOSTROPHES:
                continue
            out.append(" " if unicodedata.category(ch)[0] in "PS" else ch)
        return " ".join("".join(out).split())


class _SplitNoSpaceScripts(jiwer.AbstractTransform):
    """Put spaces around characters of scripts written without spaces, so each counts as a word."""

    def process_string(self, s: str) -> str:
        return " ".join("".join(f" {ch} " if _no_space_char(ch) else ch for ch in s).split())


def _cer_transform(language: str | None) -> jiwer.Compose:
    return jiwer.Compose(
        [_Normalize(language), jiwer.RemoveWhiteSpace(replace_by_space=False), jiwer.ReduceToListOfListOfChars()]
    )


def _wer_transform(language: str | None) -> jiwer.Compose:
    return jiwer.Compose([_Normalize(language), _SplitNoSpaceScripts(), jiwer.ReduceToListOfListOfWords()])


def normalize_text(text: str, language: str | None = None) -> str:
    """``text`` as the error rates see it (see the module docstring)."""
    return _Normalize(language).process_string(text)


def _rate(references: Sequence[str], hypotheses: Sequence[str], transform: jiwer.Compose) -> float:
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses: give one transcript per text")
    ref_units = [transform([r])[0] for r in references]
    kept = [(r, h) for r, h, units in zip(references, hypotheses, ref_units) if units]
    # An empty reference has no error rate of its own: its transcript's units all count as insertions.
    insertions = sum(len(transform([h])[0]) for h, units in zip(hypotheses, ref_units) if not units)
    if not kept:
        return 0.0 if insertions == 0 else 1.0
    out = jiwer.process_words([r for r, _ in kept], [h for _, h in kept], transform, transform)
    total = sum(len(u) for u in ref_units)
    return (out.substitutions + out.deletions + out.insertions + insertions) / total


def cer(reference: str, hypothesis: str, language: str | None = None) -> float:
    """Character error rate of ``hypothesis`` against ``reference`` after normalisation, spaces not
    counted. An empty (after normalisation) reference gives 0.0 for an empty hypothesis, else 1.0."""
    return _rate([reference], [hypothesis], _cer_transform(language))


def wer(reference: str, hypothesis: str, language: str | None = None) -> float:
    """Word error rate of ``hypothesis`` against ``reference`` after normalisation (characters of
    scripts written without spaces count as words). Empty reference: as :func:`cer`."""
    return _rate([reference], [hypothesis], _wer_transform(language))


def corpus_cer(references: Sequence[str], hypotheses: Sequence[str], language: str | None = None) -> float:
    """CER over a set of clips: all edits over all reference characters (long clips weigh more,
    as in ASR benchmarks), not the mean of per-clip rates."""
    return _rate(list(references), list(hypotheses), _cer_transform(language))


def corpus_wer(references: Sequence[str], hypotheses: Sequence[str], language: str | None = None) -> float:
    """WER over a set of clips: all word edits over all reference words."""
    return _rate(list(references), list(hypotheses), _wer_transform(language))
