"""The training precision: one enum, and the one function that decides it from the GPU architecture."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from utils.device.gpu import architecture_for


class Precision(str, Enum):
    AUTO = "auto"
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"


PRECISIONS = tuple(p.value for p in Precision)


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run will use and why. `precision` is what coqui's trainer config takes."""

    requested: str
    precision: str  # "bf16" | "fp16" | "fp32"
    mixed_precision: bool
    grad_scaler: bool
    reason: str


def _parse(requested: str) -> Precision:
    try:
        return Precision(requested)
    except ValueError:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {requested!r}.") from None


def choose_precision(capability: tuple[int, int] | None, requested: str = "auto") -> PrecisionChoice:
    """Pick the training precision for a compute capability (None = CPU).

    auto: BF16 on 8.0+ (Ampere, Ada, Hopper, Blackwell), FP16 with a GradScaler on 7.x (Volta, Turing),
    FP32 below 7.0 and on CPU. An explicit request the device cannot honour falls back with a reason.
    """
    want = _parse(requested)
    arch = architecture_for(capability)

    def fp32(reason: str) -> PrecisionChoice:
        return PrecisionChoice(want.value, "fp32", False, False, reason)

    def bf16(reason: str) -> PrecisionChoice:
        return PrecisionChoice(want.value, "bf16", True, False, reason)

    def fp16(reason: str) -> PrecisionChoice:
        return PrecisionChoice(want.value, "fp16", True, True, reason)

    if want is Precision.FP32:
        return fp32("FP32 requested.")
    if capability is None:
        if want is Precision.BF16:
            return bf16("BF16 requested on CPU: autocast runs the GPT in BF16 (fast only on CPUs with BF16 units).")
        if want is Precision.FP16:
            return fp32("FP16 mixed precision needs a CUDA GPU (Volta or newer); using FP32 on the CPU.")
        return fp32("No CUDA GPU: FP32 on the CPU.")
    if capability >= (8, 0):
        if want is Precision.FP16:
            return fp16(f"FP16 requested on {arch}; it runs, with a GradScaler (BF16 would need none).")
        return bf16(f"{arch} has native BF16: BF16 autocast, no GradScaler needed.")
    if capability >= (7, 0):
        if want is Precision.BF16:
            return fp16(f"BF16 requested but {arch} has no native BF16: FP16 with a GradScaler instead.")
        return fp16(f"{arch} has FP16 tensor cores but no native BF16: FP16 autocast with a GradScaler.")
    if want in (Precision.BF16, Precision.FP16):
        return fp32(f"{want.value.upper()} requested but {arch} has no tensor cores: FP32 instead.")
    return fp32(f"{arch} has no tensor cores: FP32.")
