"""How a run will see its text (front end and vocab), so a dataset check gives the run's own verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.model.base_models import TINY, check_version_name, models_root
from utils.model.tiny import tiny_vocab
from utils.text.frontend import TextFrontEnd
from utils.text.languages import canonical_language


def text_check_options(
    version: str,
    language: str,
    use_amharic_g2p: bool = False,
    custom_model: str = "",
    models_dir: str | None = None,
    *,
    lexicon_file: str = "",
) -> dict[str, Any]:
    """validate_dataset's keywords that check text exactly as a run with these settings will see it:
    through its front end (its pronunciation lexicon included), and against its vocab when that is on disk (a
    custom model's, else the base's; the tiny model's vocab is built alone, without the model). Raises ValueError
    for an unknown version or a lexicon_file that does not read."""
    check_version_name(version, models_dir)
    frontend = TextFrontEnd.for_run(canonical_language(language), use_amharic_g2p, lexicon_file)
    custom_vocab = Path(custom_model).expanduser().parent / "vocab.json" if custom_model else None
    if custom_vocab is not None and custom_vocab.is_file():
        vocab: Path | None = custom_vocab
    elif version == TINY:
        vocab = tiny_vocab(models_root(models_dir) / TINY)
    else:
        vocab = models_root(models_dir) / version / "vocab.json"
    return {"text_frontend": frontend, "vocab_path": vocab if vocab is not None and vocab.is_file() else None}
