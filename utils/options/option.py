"""One option of a run: its declaration (`option`, `Option`: help, bounds, choices) and the check of one value
against it, shared by TrainArguments (utils.options.arguments, every option declared once) and the planner's own
options (utils.options.plan_options)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from utils.text.visible import clipped


@dataclass(frozen=True)
class Option:
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    special: tuple[str, ...] = ()  # words a numeric option also takes ("auto")


def option(default: Any, help: str, **spec: Any) -> Any:
    return field(default=default, metadata={"option": Option(help, **spec)})


def checked_value(name: str, value: Any, default: Any, spec: Option) -> Any:
    """The value as its field's type (an integral float is an int), or a ValueError saying what is wrong."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False; got {said(value)}.")
        return value
    if isinstance(value, str) and value.strip().lower() in spec.special:
        return value.strip().lower()
    if isinstance(default, int):
        if isinstance(value, str) and spec.special:  # typed in a text box: "8"
            value = _parsed_number(name, value, spec)
        return _bounded(name, _whole(name, value), spec)
    if isinstance(default, float):
        return _bounded(name, _number(name, value), spec)
    if isinstance(default, tuple):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError(f"{name} must be a list of numbers; got {said(value)}.")
        items = tuple(_number(name, v) for v in value)
        if any(not spec.minimum < v < spec.maximum for v in items):
            raise ValueError(f"{name} are fractions of the run between 0 and 1; got {list(items)}.")
        return items
    if value is None and default == "":
        value = ""  # "no file" written the Python way
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text; got {said(value)}.")
    if spec.choices is not None and value not in spec.choices:
        raise ValueError(f"{name} must be one of {', '.join(spec.choices)}; got {said(value)}.")
    return value


def _parsed_number(name: str, text: str, spec: Option) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"{name} must be a whole number or {' / '.join(spec.special)}; got {said(text)}.") from None


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number; got {said(value)}.")
    return float(value)


def _whole(name: str, value: Any) -> int:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number; got {said(value)}.")
    return value


def _bounded(name: str, value: Any, spec: Option) -> Any:
    low, high = spec.minimum, spec.maximum
    shown = f"{value:.3g}" if isinstance(value, float) else str(value)[:30]
    kind = "a whole number" if isinstance(value, int) else "a number"
    if low is not None and value < low:
        raise ValueError(
            f"{name} must be {kind} of at least {low:g}; got {shown}."
            if kind != "a number"
            else f"{name} must be a number >= {low:g}; got {shown}."
        )
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high:g}; got {shown}.")
    return value


def said(value: Any) -> str:
    """A value as an error message echoes it: its repr, cut when long."""
    return clipped(repr(value), 80)
