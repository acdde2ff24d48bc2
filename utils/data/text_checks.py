"""How a run will see its text (front end and vocab), so a dataset check gives the run's own verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.text.frontend import TextFrontEnd
from utils.text.languages import canonical_language


def text_check_options(
    language: str,
    use_amharic_g2p: bool = False,
    *,
    vocab: Path | None = None,
    lexicon_file: str = "",
) -> dict[str, Any]:
    """validate_dataset's keywords that check text exactly as a run with these settings will see it: through its
    front end (its pronunciation lexicon included), and against its vocab (`vocab`: the run's vocab file as
    utils.model.base_models.run_vocab_file finds it, None when it is not on disk: no vocab check). Raises
    ValueError for a lexicon_file that does not read."""
    frontend = TextFrontEnd.for_run(canonical_language(language), use_amharic_g2p, lexicon_file)
    return {"text_frontend": frontend, "vocab_path": vocab}
