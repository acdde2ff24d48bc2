"""The settings a voice speaks with, each declared once (name, type, range, the base model's value, help), and the
one check of a value against its declaration.

Every place a setting enters goes through `checked`: `utils.model.inference.synthesize` (a notebook or script), the
Test tab and its `/synthesize` and `/compare_with_base` API (webui/test_tab.py, whose sliders are built from these
declarations, so a slider offers exactly what the check accepts), and a voice's own files (ready/config.json, read
by `utils.model.ready.read_inference_settings`, where a bad value falls back to the base model's with a warning
naming the file and the setting).

The ranges follow XTTS's own use (coqui's `Xtts.inference` and transformers' sampling): temperature and top_p must be
above 0 (transformers refuses 0), top_p at most 1, top_k at least 1, a repetition penalty below 1 rewards
repetition (so it starts at 1), and speed stretches the speech by 1 / speed (coqui clamps it at 0.05 without a
word: `speed=-1` spoke "Hello there." for 37 s), so it stays within 0.25-4. Booleans are not numbers here, a whole
number must be whole (50.0 is 50, 50.5 is refused), and NaN and infinities are refused.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    name: str
    label: str  # the Test tab's slider
    whole: bool  # a whole number (else any number in the range)
    low: float
    high: float
    default: float | int  # the base model's (XTTS v2's config.json), or the page's starting value
    step: float  # the slider's step (the check accepts any value in the range)
    help: str

    def kind(self) -> str:
        return "a whole number" if self.whole else "a number"

    def allowed(self) -> str:
        """'a number from 0.01 to 2'"""
        low, high = (int(self.low), int(self.high)) if self.whole else (f"{self.low:g}", f"{self.high:g}")
        return f"{self.kind()} from {low} to {high}"


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "temperature", "Temperature", False, 0.01, 2.0, 0.75, 0.01,
            "Randomness of the sampling: lower is steadier, higher more varied (and more likely to babble).",
        ),
        Setting(
            "length_penalty", "Length penalty", False, -2.0, 2.0, 1.0, 0.1,
            "Used by beam search only; XTTS samples with one beam, so it changes nothing today.",
        ),
        Setting(
            "repetition_penalty", "Repetition penalty", False, 1.0, 20.0, 5.0, 0.1,
            "Above 1 discourages repeating sounds (long silences, 'uhhh'); 1 is no penalty.",
        ),
        Setting(
            "top_k", "Top-k", True, 1, 100, 50, 1,
            "Sample only among the k most likely next audio tokens.",
        ),
        Setting(
            "top_p", "Top-p", False, 0.01, 1.0, 0.85, 0.01,
            "Sample only among the most likely tokens whose probabilities add up to p.",
        ),
        Setting(
            "speed", "Speed", False, 0.25, 4.0, 1.0, 0.05,
            "Speaking rate: 2 is twice as fast, 0.5 half as fast.",
        ),
        Setting(
            "max_audio_tokens", "Longest output (audio tokens, ~21.5 per second)", True, 2, 600, 250, 1,
            "The longest speech one generation may give (the model's own limit when that is lower).",
        ),
        Setting(
            "seed", "Seed", True, 0, 2**32 - 1, 1, 1,
            "The same text, reference and seed give the same speech.",
        ),
        Setting(
            "tries", "Tries per sentence", True, 1, 10, 3, 1,
            "Each sentence is checked as it is spoken (Whisper, stop, length); one that fails is spoken again with "
            "the next seed, the best kept. 1 checks nothing (utils.model.long_text).",
        ),
    )
}  # fmt: skip

# The sampling settings a voice's ready/config.json carries (XttsConfig's, coqui's own Xtts.synthesize reads them
# there), in the order the Test tab shows them.
CONFIG_KEYS = ("temperature", "length_penalty", "repetition_penalty", "top_k", "top_p")


def _said(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def checked(name: str, value: Any) -> float | int:
    """`value` of setting `name` as its type (an int for a whole-number setting, else a float), or a ValueError
    that names the setting, its range and the value: "temperature must be a number from 0.01 to 2 (got 'hot')"."""
    setting = SETTINGS[name]
    number: float | int | None = None
    if isinstance(value, bool):
        pass  # True is not 1 here
    elif isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(real := float(value)):
        number = real if not setting.whole else int(real) if real.is_integer() else None
    if number is None or not setting.low <= number <= setting.high:
        raise ValueError(f"{name} must be {setting.allowed()} (got {_said(value)})")
    return number if setting.whole else float(number)


def checked_all(values: dict[str, Any]) -> dict[str, float | int]:
    """Each setting of `values` checked (None stays None: the caller's default applies)."""
    return {name: None if value is None else checked(name, value) for name, value in values.items()}


def defaults(names: tuple[str, ...] = CONFIG_KEYS) -> dict[str, float | int]:
    """The base model's value of each setting."""
    return {name: SETTINGS[name].default for name in names}
