"""Which languages a run checks it has not forgotten (utils.training.evaluation.retention speaks them): the
`retention_languages` setting read against the languages the run trains."""

from __future__ import annotations

from utils.quality.probes import PROBES
from utils.text.languages import XTTS_LANGUAGES, canonical_language

AUTO = "auto"


def retention_languages(setting: str, trained: list[str]) -> list[str]:
    """The languages a run checks (see the module docstring); an unknown code or a trained one is refused."""
    trained = [canonical_language(t) for t in trained]
    text = (setting or "").strip()
    if text.lower() == AUTO:  # English, else the first language of the base model's list the run does not train
        return [next(code for code in XTTS_LANGUAGES if code not in trained)]
    languages: list[str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        code = canonical_language(part)
        if code not in XTTS_LANGUAGES or code not in PROBES:
            raise ValueError(
                f"retention_languages: {part!r} is not a language the base model speaks ({', '.join(XTTS_LANGUAGES)})."
            )
        if code in trained:
            raise ValueError(
                f"retention_languages: {part!r} is trained by this run: retention checks the languages it does not "
                "train."
            )
        if code not in languages:
            languages.append(code)
    return languages


def check_retention_setting(setting: str, trained: list[str]) -> None:
    """The setting's codes, checked against the languages the run trains (a ValueError saying what is wrong)."""
    retention_languages(setting, trained)
