"""coqui's XTTS tokenizer, taught to accept languages it has no text cleaner for.

coqui's `VoiceBpeTokenizer.preprocess_text` raises NotImplementedError for any language outside its
17; a new language's text (already normalised by our front end) only needs light cleanup before
BPE. Known languages behave exactly as in coqui.
"""

from __future__ import annotations

import os
import re

from TTS.tts.layers.xtts.tokenizer import VoiceBpeTokenizer

from utils.text.languages import EXTRA_CHAR_LIMITS, is_known_language

_SPACES = re.compile(r"\s+")


class FineTuneTokenizer(VoiceBpeTokenizer):
    def __init__(self, vocab_file: str | os.PathLike | None = None) -> None:
        super().__init__(vocab_file)
        self.char_limits.update(EXTRA_CHAR_LIMITS)

    def preprocess_text(self, txt: str, lang: str) -> str:
        if is_known_language(lang) or lang in ("zh", "ja"):
            return super().preprocess_text(txt, lang)
        # A new language: the run's front end has normalised it; keep case-folding like coqui's cleaners.
        return _SPACES.sub(" ", txt).strip().lower()


def tokenizer_for(vocab_file: str | os.PathLike, language: str) -> VoiceBpeTokenizer:
    """The tokenizer to use with a vocab: ours for a new language, coqui's otherwise."""
    if is_known_language(language):
        return VoiceBpeTokenizer(str(vocab_file))
    return FineTuneTokenizer(str(vocab_file))
