"""How a run folder's records are declared, read and written: `Record` and its JSON conversion.

The records themselves (run.json, each line of metrics.jsonl) are declared in utils.training.recording.records.

Why dataclasses and not TypedDict: a TypedDict is a plain dict at run time, so a reader would still write
`record.get("best") or {}` and a misspelt key would pass unnoticed until it reached a type checker nobody runs
on the page code. A dataclass gives readers attribute access with a declared default (absent is None), refuses
an unknown field when a writer builds it, and carries the conversion in one place: `from_json` maps the names
older runs wrote (`early_stopping`) and keeps keys it does not know in `extra`, which `to_json` writes back, so
a record of another version of the app is never silently cut down. `from_json(strict=True)` refuses an unknown
key, a missing required field or a value of the wrong type (the test that reads every record of a real run).

Required fields are always written (their value may be None: a loss that was not finite); optional fields are
written only when they have a value, so an optional field that is absent reads as None. run.json leaves out
every field without a value (it grows as the run goes).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, ClassVar, TypeVar, Union

R = TypeVar("R", bound="Record")


class RecordError(ValueError):
    """A record that does not match its declaration (strict reading, or a writer naming an unknown field)."""


@dataclass(kw_only=True)
class Record:
    """A JSON object with declared fields; what it does not declare is kept in `extra` (see the module doc)."""

    LEGACY: ClassVar[dict[str, str]] = {}  # a name older runs wrote -> the field that holds it now
    OMIT_NONE: ClassVar[bool] = False  # True: every field without a value is left out (absent reads as None)
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def json_fields(cls) -> tuple[dataclasses.Field, ...]:
        return tuple(f for f in dataclasses.fields(cls) if f.name != "extra")

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in cls.json_fields())

    @classmethod
    def required_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in cls.json_fields() if f.metadata["required"])

    @classmethod
    def upgrade(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """`data` with the names older runs wrote moved to today's fields (a dict value merges under today's)."""
        data = dict(data)
        for old, new in cls.LEGACY.items():
            if old not in data:
                continue
            value = data.pop(old)
            if isinstance(value, dict) and isinstance(data.get(new), dict):
                data[new] = {**value, **data[new]}
            elif data.get(new) is None:
                data[new] = value
        return data

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any], *, strict: bool = False) -> R:
        """The record of a JSON object. Tolerant by default: unknown keys go to `extra`, a nested record that is
        not an object stays in `extra` as it was. Strict: any mismatch raises RecordError."""
        if not isinstance(data, Mapping):
            raise RecordError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        data = cls.upgrade(data)
        hints = _hints(cls)
        names = cls.field_names()
        problems = []
        if strict:
            problems += [f"unknown field {k!r}" for k in data if k not in names and k != "type"]
            problems += [f"missing field {k!r}" for k in sorted(cls.required_names() - set(data))]
        values: dict[str, Any] = {}
        extra = {k: v for k, v in data.items() if k not in names and k != "type"}
        for name in names & set(data):
            value, hint = data[name], hints[name]
            nested = _record_class(hint)
            if nested is not None and value is not None:
                if isinstance(value, Mapping):
                    value = nested.from_json(value, strict=strict)
                elif strict:
                    problems.append(f"{name}: expected an object, got {value!r:.60}")
                else:
                    extra[name] = value
                    continue
            elif strict and not _matches(value, hint):
                problems.append(f"{name}: {value!r:.60} is not {hint}")
            values[name] = value
        if problems:
            raise RecordError(f"{cls.__name__}: " + "; ".join(problems))
        return cls(**values, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The JSON object: required fields always, optional ones when set, then the kept unknown keys."""
        out: dict[str, Any] = {}
        for f in self.json_fields():
            value = getattr(self, f.name)
            if value is None and (self.OMIT_NONE or not f.metadata["required"]):
                continue
            out[f.name] = to_json_value(value)
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    @classmethod
    def check_names(cls, names: Iterable[str]) -> None:
        """Raise RecordError for a name this record does not declare (a writer's typo, or an old name)."""
        unknown = sorted(set(names) - cls.field_names())
        if unknown:
            raise RecordError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")


def to_json_value(value: Any) -> Any:
    """A field's value as JSON: records as objects, enums as their value."""
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _record_class(hint: Any) -> type[Record] | None:
    """The Record class of `X | None`, else None."""
    for arg in typing.get_args(hint) or (hint,):
        if isinstance(arg, type) and issubclass(arg, Record):
            return arg
    return None


def _matches(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's type (for strict reading)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    if origin is dict:
        _, item = typing.get_args(hint) or (str, Any)
        return isinstance(value, dict) and all(isinstance(k, str) and _matches(v, item) for k, v in value.items())
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)
