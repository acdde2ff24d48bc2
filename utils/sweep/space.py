"""The search space of a sweep: which of train_gpt's options a trial draws, and from what.

A dimension is a range `(low, high)` (a float range is drawn on a log scale when it spans 10x or more: a learning
rate) or a list of choices. Only options that change how a run trains are open to a sweep: the dataset, the base
model, the evaluation (what is spoken, heard and scored) and the files stay the same for every trial, or trials
would not be compared on the same scores (nor share one baseline). Each value is checked against the option's own
bounds and choices (utils.options.arguments), so a trial never fails on a value train_gpt refuses.

Written as text (the CLI's `--space`, the page's box), one dimension per item: `learning_rate=1e-6:1e-4`,
`num_epochs=2:8`, `lora_rank=0,16`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from utils.options.arguments import TrainArguments, argument_defaults, option_of
from utils.options.option import checked_value

SWEEPABLE = (
    "learning_rate",
    "num_epochs",
    "lora_rank",
    "lora_alpha",
    "lora_targets",
    "weight_decay",
    "grad_clip",
    "batch_size",
    "grad_acumm",
    "optimizer",
    "length_grouping",
    "enable_grad_checkpoint",
    "enable_sdpa",
    "enable_tf32",
    "torch_compile",
)
# A trial of a sweep skips the end-of-run searches by default: each costs several scored evaluations per trial,
# and only the voice kept needs them (python -m utils.cli choose-reference RUN, or a run with the chosen settings).
TRIAL_DEFAULTS = {"inference_search": 0, "reference_search": 0}
# LoRA's other settings mean something only with an adapter: drawn when the trial's lora_rank is above 0.
_LORA_ONLY = ("lora_alpha", "lora_targets")


@dataclass(frozen=True)
class Dimension:
    name: str
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    log: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.choices is not None:
            return {"name": self.name, "choices": list(self.choices)}
        return {"name": self.name, "low": self.low, "high": self.high, "log": self.log}

    def text(self) -> str:
        if self.choices is not None:
            return f"{self.name}={','.join(str(c) for c in self.choices)}"
        return f"{self.name}={self.low:g}:{self.high:g}" + (" (log)" if self.log else "")

    @property
    def points(self) -> float:
        """How many distinct values it holds (inf for a float range)."""
        if self.choices is not None:
            return len(self.choices)
        if isinstance(argument_defaults()[self.name], int) and not isinstance(argument_defaults()[self.name], bool):
            return int(self.high) - int(self.low) + 1
        return 1 if self.low == self.high else math.inf


def _value(name: str, raw: Any) -> Any:
    default = argument_defaults()[name]
    if isinstance(raw, str):
        text = raw.strip()
        if isinstance(default, bool):
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "on", "off"):
                raise ValueError(f"sweep space: {name} takes true or false; got {text!r}.")
            raw = lowered in ("true", "1", "on")
        elif isinstance(default, (int, float)) and not isinstance(default, bool) and text.lower() != "auto":
            try:
                raw = float(text)
            except ValueError:
                raise ValueError(f"sweep space: {name} takes numbers; got {text!r}.") from None
        else:
            raw = text
    try:
        return checked_value(name, raw, default, option_of(name))
    except ValueError as exc:
        raise ValueError(f"sweep space: {exc}") from None


def dimension(name: str, spec: Any) -> Dimension:
    """One dimension from `(low, high)`, a list of choices, or their text ("1e-6:1e-4", "0,16")."""
    name = name.strip()
    if name not in TrainArguments.__dataclass_fields__:
        raise ValueError(f"sweep space: {name!r} is not an option of train_gpt.")
    if name not in SWEEPABLE:
        raise ValueError(
            f"sweep space: {name} is the same for every trial (trials are compared on one dataset, base model and "
            f"evaluation); a sweep draws {', '.join(SWEEPABLE)}."
        )
    if isinstance(spec, str):
        text = spec.strip()
        if ":" in text:
            spec = tuple(part for part in text.split(":"))
        else:
            spec = [part for part in text.split(",") if part.strip()]
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise ValueError(f"sweep space: {name} takes a range low:high; got {spec!r}.")
        low, high = (_value(name, v) for v in spec)
        if isinstance(low, str) or isinstance(high, str) or isinstance(low, bool):
            raise ValueError(f"sweep space: {name} is not a number; give its choices (a,b) instead of a range.")
        if low > high:
            raise ValueError(f"sweep space: {name}'s range {low:g}:{high:g} is empty (low above high).")
        log = isinstance(low, float) and low > 0 and high / low >= 10
        return Dimension(name, low=low, high=high, log=log)
    choices = tuple(dict.fromkeys(_value(name, v) for v in (spec if isinstance(spec, Iterable) else [spec])))
    if not choices:
        raise ValueError(f"sweep space: {name} has no choices.")
    if name == "lora_targets":
        from utils.model.lora import parse_targets

        for choice in choices:
            try:
                parse_targets(choice)
            except ValueError as exc:
                raise ValueError(f"sweep space: {exc}") from None
    return Dimension(name, choices=choices)


def default_space(num_epochs: int) -> dict[str, Any]:
    """The space a sweep draws when the user opens none: the learning rate (the setting users get most wrong),
    the epochs up to the form's, and a full fine-tune against a LoRA adapter."""
    return {
        "learning_rate": (1e-6, 2e-4),
        "num_epochs": (max(1, num_epochs // 3), max(1, num_epochs)),
        "lora_rank": [0, 16],
    }


@dataclass(frozen=True)
class SearchSpace:
    dimensions: tuple[Dimension, ...]

    @classmethod
    def of(cls, space: Mapping[str, Any] | Iterable[str] | str | None, *, num_epochs: int) -> SearchSpace:
        """The space from a mapping name -> spec, text lines or items "name=spec", or None for the default."""
        if space is None or (isinstance(space, str) and not space.strip()):
            space = default_space(num_epochs)
        if isinstance(space, str):
            space = [line for line in space.replace(";", "\n").splitlines()]
        if not isinstance(space, Mapping):
            items: dict[str, Any] = {}
            for item in space:
                item = item.split("#", 1)[0].strip()
                if not item:
                    continue
                if "=" not in item:
                    raise ValueError(f"sweep space: {item!r} is not name=low:high or name=a,b.")
                name, spec = item.split("=", 1)
                items[name.strip()] = spec
            space = items
        dimensions = tuple(dimension(name, spec) for name, spec in space.items())
        if not dimensions:
            raise ValueError("sweep space: it is empty; open at least one option (e.g. learning_rate=1e-6:1e-4).")
        return cls(dimensions)

    def size(self) -> float:
        return math.prod(d.points for d in self.dimensions)

    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def to_json(self) -> list[dict[str, Any]]:
        return [d.to_json() for d in self.dimensions]

    def text(self) -> str:
        return "; ".join(d.text() for d in self.dimensions)

    def check_with(self, fixed: Mapping[str, Any]) -> None:
        """Refuse a space no trial can honour with the run's fixed settings."""
        names = set(self.names())
        lora = next((d for d in self.dimensions if d.name == "lora_rank"), None)
        only_full = (lora is None and not fixed.get("lora_rank")) or (
            lora is not None and lora.choices is not None and set(lora.choices) == {0}
        )
        for name in _LORA_ONLY:
            if name in names and only_full:
                raise ValueError(f"sweep space: {name} means something only with LoRA; open lora_rank too (e.g. 0,16).")

    def checked_settings(self, settings: Any) -> dict[str, Any]:
        """Settings to try first (first_trials), each a dimension of the space with a value inside it."""
        if not isinstance(settings, Mapping):
            raise ValueError(
                f"first_trials: each is a mapping of settings such as {{'learning_rate': 1e-5}}; got {settings!r}."
            )
        dimensions = {d.name: d for d in self.dimensions}
        checked = {}
        for name, raw in settings.items():
            d = dimensions.get(name)
            if d is None:
                raise ValueError(f"first_trials: {name} is not a dimension of the space ({', '.join(dimensions)}).")
            value = _value(name, raw)
            inside = value in d.choices if d.choices is not None else d.low <= value <= d.high
            if not inside:
                raise ValueError(f"first_trials: {name}={value!r} is outside the space ({d.text()}).")
            checked[name] = value
        return checked

    def suggest(self, trial: Any, fixed: Mapping[str, Any]) -> dict[str, Any]:
        """The trial's values (Optuna's suggest_* calls; an enqueued trial gets its given values)."""
        params: dict[str, Any] = {}
        ordered = sorted(self.dimensions, key=lambda d: d.name in _LORA_ONLY)  # lora_rank before what depends on it
        for d in ordered:
            if d.name in _LORA_ONLY and not params.get("lora_rank", fixed.get("lora_rank", 0)):
                continue
            if d.choices is not None:
                params[d.name] = trial.suggest_categorical(d.name, list(d.choices))
            elif isinstance(d.low, int) and isinstance(d.high, int):
                params[d.name] = trial.suggest_int(d.name, d.low, d.high)
            else:
                params[d.name] = trial.suggest_float(d.name, float(d.low), float(d.high), log=d.log)
        return params
