"""The text vocabulary of a run: the base model's, or one extended for a language XTTS does not know."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VOCAB_FILE = "vocab.json"


@dataclass
class VocabChoice:
    path: Path
    languages: list[str]
    info: dict[str, Any] = field(default_factory=dict)
    new_language: str | None = None

    def adapt_model(self, model: Any) -> None:
        """Fit the model to this vocab (nothing to do for the base vocab)."""

    def copy_into(self, run_dir: Path) -> Path:
        target = Path(run_dir) / VOCAB_FILE
        if self.path.resolve() != target.resolve():
            shutil.copyfile(self.path, target)
        return target


def prepare_vocab(
    base_vocab: Path,
    base_config: dict[str, Any],
    language: str,
    texts: list[str],
    output_path: Path,
    new_tokens: int,
) -> VocabChoice:
    languages = list(base_config.get("languages") or [])
    if language in languages:
        return VocabChoice(Path(base_vocab), languages, {"base_vocab": str(base_vocab), "extended": False})
    raise ValueError(f"Language {language!r} is not in the base model; new languages are not supported yet.")
