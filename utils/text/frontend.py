"""The text processing a run applies before tokenizing, identical in training and inference.

A run stores its `TextFrontEnd` in `run.json` and `ready/finetune.json`; inference reads it back with
`TextFrontEnd.from_dict`, so the model always hears text processed the way it was trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from utils.text.languages import canonical_language

AMHARIC = "amh"


def check_g2p_language(language: str, amharic_g2p: bool) -> None:
    """The Amharic G2P needs Amharic text: refused for any other language (before a run, and by the front end)."""
    if amharic_g2p and canonical_language(language) != AMHARIC:
        raise ValueError(
            f"use_amharic_g2p needs language 'amh' (or 'am'); the language is {canonical_language(language)!r}."
        )


@dataclass(frozen=True)
class TextFrontEnd:
    language: str
    amharic_g2p: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "language", canonical_language(self.language))
        check_g2p_language(self.language, self.amharic_g2p)

    @property
    def phonemized(self) -> bool:
        return self.amharic_g2p

    def apply(self, text: str) -> str:
        if self.language == AMHARIC:
            from utils.text.amharic import amharic_front_end

            return amharic_front_end(text, use_g2p=self.amharic_g2p)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"language": self.language, "amharic_g2p": self.amharic_g2p}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, default_language: str = "en") -> TextFrontEnd:
        data = data or {}
        return cls(data.get("language", default_language), bool(data.get("amharic_g2p", False)))
