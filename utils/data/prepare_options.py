"""How Prepare processes each clip, declared once: `prepare_dataset`'s keywords take their defaults from here, the
CLI's `prepare` flags and the Dataset tab's controls their names, bounds and help."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from utils.audio.loudness import TARGET_LUFS, TRUE_PEAK_CEILING_DBTP


class Option(NamedTuple):
    """An option's help and bounds (as TrainArguments declares its own, without importing the training stack)."""

    help: str
    minimum: float | None = None
    maximum: float | None = None


def option(default: Any, help: str, **bounds: float) -> Any:
    return field(default=default, metadata={"option": Option(help, **bounds)})


@dataclass(frozen=True)
class PrepareOptions:
    even_loudness: bool = option(
        True,
        f"Each clip brought to the loudness target (ITU-R BS.1770 integrated loudness) by one gain, its true peak "
        f"kept under {TRUE_PEAK_CEILING_DBTP:g} dBTP so nothing clips. Off keeps each clip's recorded level.",
    )
    loudness_target: float = option(
        TARGET_LUFS,
        "The integrated loudness every clip is brought to, in LUFS (EBU R128: -23).",
        minimum=-40.0,
        maximum=-10.0,
    )
    denoise: bool = option(
        False,
        "Background noise removed by DeepFilterNet 3 (bundled, offline, on every core; about a quarter of a "
        "second of CPU per clip more): the summary gives each clip's SNR before and after.",
    )
    workers: int = option(0, "Worker processes converting clips; 0 uses every core.", minimum=0, maximum=512)

    def __post_init__(self) -> None:
        for f in fields(self):
            value, spec = getattr(self, f.name), prepare_option(f.name)
            if isinstance(f.default, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"{f.name} must be True or False; got {value!r}.")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{f.name} must be a number; got {value!r}.")
            if isinstance(f.default, int) and value != int(value):
                raise ValueError(f"{f.name} must be a whole number; got {value!r}.")
            if not spec.minimum <= value <= spec.maximum:  # type: ignore[operator]
                raise ValueError(f"{f.name} is {value!r}; it must be from {spec.minimum:g} to {spec.maximum:g}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prepare_option(name: str) -> Option:
    return PrepareOptions.__dataclass_fields__[name].metadata["option"]


DEFAULTS = PrepareOptions()
