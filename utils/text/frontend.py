"""The text processing a run applies before tokenizing, identical in training and inference.

A run stores its `TextFrontEnd` in `run.json` and `ready/finetune.json`; inference reads it back with
`TextFrontEnd.from_dict`, so the model always hears text processed the way it was trained. Its pronunciation
lexicon (utils.text.lexicon, docs/lexicon.md) goes with it: `train_gpt(lexicon_file=...)` gives one to a run, and
utils.model.ready.set_voice_lexicon sets or replaces a finished voice's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from utils.text.languages import canonical_language
from utils.text.lexicon import Lexicon, read_lexicon_file

AMHARIC = "amh"
_ETHIOPIC_LETTER = re.compile("[\u1200-\u135a\u1380-\u138f\u2d80-\u2dde\uab01-\uab2e]")


def check_g2p_language(language: str, amharic_g2p: bool) -> None:
    """The Amharic G2P needs Amharic text: refused for any other language (before a run, and by the front end)."""
    if amharic_g2p and canonical_language(language) != AMHARIC:
        raise ValueError(
            f"use_amharic_g2p needs language 'amh' (or 'am'); the language is {canonical_language(language)!r}."
        )


@dataclass(frozen=True)
class TextFrontEnd:
    """How a voice's text becomes what the tokenizer reads: its pronunciation lexicon, then (Amharic) normalisation
    and G2P. With G2P an Amharic respelling is phonemes, taken as they are (or Ethiopic script, converted with the
    rest); the terms are looked for in the normalised text, numbers spelled out."""

    language: str
    amharic_g2p: bool = False
    lexicon: Lexicon = field(default_factory=Lexicon)

    def __post_init__(self) -> None:
        object.__setattr__(self, "language", canonical_language(self.language))
        check_g2p_language(self.language, self.amharic_g2p)
        if self.lexicon is None:
            object.__setattr__(self, "lexicon", Lexicon())
        if not isinstance(self.lexicon, Lexicon):
            raise TypeError(f"lexicon must be a Lexicon (utils.text.lexicon); got {type(self.lexicon).__name__}.")

    @property
    def phonemized(self) -> bool:
        return self.amharic_g2p

    def apply(self, text: str) -> str:
        if self.language == AMHARIC:
            from utils.text.amharic import amharic_front_end, normalize_amharic

            if not self.lexicon.covers(AMHARIC):
                return amharic_front_end(text, use_g2p=self.amharic_g2p)
            pieces = self.lexicon.split(normalize_amharic(text), AMHARIC)
            return "".join(self._amharic_piece(piece, respelled) for piece, respelled in pieces)
        return self.lexicon.substitute(text, self.language)

    def _amharic_piece(self, piece: str, respelled: bool) -> str:
        from utils.text.amharic import amharic_g2p, normalize_amharic

        if not respelled:
            return amharic_g2p(piece) if self.amharic_g2p and piece.strip() else piece
        if self.amharic_g2p and not _ETHIOPIC_LETTER.search(piece):
            return piece  # phonemes, as the lexicon gives them
        spoken = normalize_amharic(piece)  # strips: the spaces split() put around it stay
        spoken = amharic_g2p(spoken) if self.amharic_g2p else spoken
        return " " * piece.startswith(" ") + spoken + " " * piece.endswith(" ")

    def for_language(self, language: str) -> TextFrontEnd:
        """The front end for speaking `language` with this voice: its G2P only in its own language, its lexicon's
        entries of that language (synthesize's `language`, when another than the voice's)."""
        language = canonical_language(language or self.language)
        return TextFrontEnd(language, self.amharic_g2p and language == self.language, self.lexicon)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"language": self.language, "amharic_g2p": self.amharic_g2p}
        if self.lexicon:
            data["lexicon"] = self.lexicon.to_records()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, default_language: str = "en") -> TextFrontEnd:
        data = data or {}
        language = data.get("language", default_language)
        lexicon = Lexicon.from_records(data.get("lexicon"), canonical_language(language), "text_frontend lexicon")
        return cls(language, bool(data.get("amharic_g2p", False)), lexicon)

    @classmethod
    def for_run(cls, language: str, amharic_g2p: bool = False, lexicon_file: str = "") -> TextFrontEnd:
        """A run's front end from its arguments (language, use_amharic_g2p, lexicon_file)."""
        language = canonical_language(language)
        lexicon = read_lexicon_file(lexicon_file, language) if lexicon_file else Lexicon()
        return cls(language, amharic_g2p, lexicon)
