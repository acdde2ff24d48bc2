"""Language codes: the ones XTTS v2 knows, aliases users type, and per-language text limits."""

from __future__ import annotations

import functools
import re

from utils.constants import XTTS_LANGUAGES

# What the language pickers offer: XTTS's own languages, then the new languages this tool supports.
LANGUAGE_CHOICES = (*XTTS_LANGUAGES, "amh")

# Codes users type for a language XTTS spells differently.
ALIASES = {"zh": "zh-cn", "am": "amh"}

# Characters per line the XTTS tokenizer accepts before warning that audio may be cut, for
# languages coqui's table lacks. Amharic's syllabary packs a consonant and vowel in each letter, so
# its lines are short in characters; IPA from G2P is about twice as long, and is checked against
# the default limit instead (see `char_limit`).
EXTRA_CHAR_LIMITS = {"amh": 150}
DEFAULT_CHAR_LIMIT = 250

_CODE_PATTERN = re.compile(r"^[a-z]{2,3}(-[a-z]{2,4})?$")


def canonical_language(code: str) -> str:
    """Lower-case, trimmed, with aliases resolved ("am" -> "amh", "zh" -> "zh-cn")."""
    code = (code or "").strip().lower().replace("_", "-")
    return ALIASES.get(code, code)


def is_known_language(code: str) -> bool:
    """True for the 17 languages the XTTS v2 base model was trained on."""
    return canonical_language(code) in XTTS_LANGUAGES


def is_valid_language_code(code: str) -> bool:
    """ISO 639-1/639-3 shaped, optionally with a region: "en", "amh", "zh-cn"."""
    return bool(_CODE_PATTERN.match(canonical_language(code)))


@functools.cache
def char_limits() -> dict[str, int]:
    """coqui's per-language table (read from its tokenizer, so it follows the pinned version) plus ours."""
    from TTS.tts.layers.xtts.tokenizer import VoiceBpeTokenizer

    return {**VoiceBpeTokenizer().char_limits, **EXTRA_CHAR_LIMITS}


def char_limit(code: str, *, phonemized: bool = False) -> int:
    """The per-line character limit the XTTS tokenizer applies to this language's text."""
    if phonemized:
        return DEFAULT_CHAR_LIMIT
    lang = canonical_language(code)
    limits = char_limits()
    return limits.get(lang, limits.get(lang.split("-")[0], DEFAULT_CHAR_LIMIT))


# faster-whisper names languages by ISO 639-1; ours may be 639-3 (amh) or carry a region (zh-cn).
_WHISPER_CODES = {"amh": "am"}


def whisper_language(code: str) -> str | None:
    """The language code faster-whisper expects, or None to let it detect the language."""
    lang = canonical_language(code)
    if not lang or lang == "auto":
        return None
    return _WHISPER_CODES.get(lang, lang.split("-")[0])


# The languages' names in English, as messages say them ("English CER 6% -> 19%").
LANGUAGE_NAMES = {
    "en": "English", "es": "Spanish", "fr": "French", "de": "German", "it": "Italian", "pt": "Portuguese",
    "pl": "Polish", "tr": "Turkish", "ru": "Russian", "nl": "Dutch", "cs": "Czech", "ar": "Arabic",
    "zh-cn": "Chinese", "hu": "Hungarian", "ko": "Korean", "ja": "Japanese", "hi": "Hindi", "amh": "Amharic",
}  # fmt: skip


def language_name(code: str) -> str:
    """The language's English name, or its code when it has none here (a new language)."""
    return LANGUAGE_NAMES.get(canonical_language(code), code)
