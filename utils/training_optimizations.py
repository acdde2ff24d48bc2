"""Training optimizations for the XTTS GPT that really switch on, chosen by GPU architecture.

`TrainingOptimizer.apply(model, config)` sets gradient checkpointing, the attention implementation
(SDPA or eager), mixed precision and the cuDNN/TF32 flags on coqui's `GPTTrainer` and
`GPTTrainerConfig`, and returns a report of what it applied and why it skipped anything.
`detect_gpu()` and `get_memory_stats()` describe the machine for the report, `metrics.jsonl` and the
web UI.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import torch

# Compute capability major -> architecture family (datacenter and consumer parts share a major).
_ARCHITECTURES = {
    3: "Kepler",
    5: "Maxwell",
    6: "Pascal",
    7: "Volta",  # 7.5 is Turing, handled below
    8: "Ampere",  # 8.9 is Ada, handled below
    9: "Hopper",
    10: "Blackwell",
    11: "Blackwell",
    12: "Blackwell",
}

PRECISIONS = ("auto", "bf16", "fp16", "fp32")


def architecture_for(capability: tuple[int, int] | None) -> str:
    """The architecture family of a CUDA compute capability, or "CPU" for None."""
    if capability is None:
        return "CPU"
    major, minor = capability
    if (major, minor) == (7, 5):
        return "Turing"
    if (major, minor) == (8, 9):
        return "Ada"
    return _ARCHITECTURES.get(major, "Blackwell" if major > 12 else "unknown")


@dataclass(frozen=True)
class GPUInfo:
    """What the machine offers for training. `available` is False on a CPU-only machine."""

    available: bool
    name: str = "no CUDA GPU"
    capability: tuple[int, int] | None = None
    architecture: str = "CPU"
    total_memory_gb: float | None = None
    bf16_native: bool = False
    device_count: int = 0

    def summary(self) -> str:
        if not self.available:
            return "No CUDA GPU: training runs on the CPU in FP32 (slow; fine for the tiny model)."
        cap = f"{self.capability[0]}.{self.capability[1]}"
        bf16 = "native BF16" if self.bf16_native else "no native BF16"
        return f"{self.name} ({self.architecture}, compute {cap}, {self.total_memory_gb:.1f} GB, {bf16})"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["capability"] = list(self.capability) if self.capability else None
        return data


def _gpu_info(name: str, capability: tuple[int, int], total_bytes: int) -> GPUInfo:
    return GPUInfo(
        available=True,
        name=name,
        capability=capability,
        architecture=architecture_for(capability),
        total_memory_gb=round(total_bytes / 1024**3, 2),
        # BF16 tensor cores arrived with Ampere; older cards only emulate it.
        bf16_native=capability >= (8, 0),
        device_count=torch.cuda.device_count(),
    )


@functools.cache
def detect_gpu() -> GPUInfo:
    """Describe the first CUDA device, computed once per process; safe without CUDA.

    NVML answers first: asking torch for device properties creates a CUDA context, which would hold
    GPU memory in the web app's process beside the training process."""
    try:
        if not torch.cuda.is_available():
            return GPUInfo(available=False)
        handle = _nvml_handle()
        if handle is not None:
            import pynvml

            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            capability = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))
            return _gpu_info(name, capability, pynvml.nvmlDeviceGetMemoryInfo(handle).total)  # type: ignore[arg-type]
        props = torch.cuda.get_device_properties(0)
        return _gpu_info(props.name, (props.major, props.minor), props.total_memory)
    except (RuntimeError, AssertionError):
        # A broken driver must not stop a CPU run.
        return GPUInfo(available=False, name="CUDA unavailable (driver error)")


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run will use and why. `precision` is what coqui's trainer config takes."""

    requested: str
    precision: str  # "bf16" | "fp16" | "fp32"
    mixed_precision: bool
    grad_scaler: bool
    reason: str


def choose_precision(capability: tuple[int, int] | None, requested: str = "auto") -> PrecisionChoice:
    """Pick the training precision for a compute capability (None = CPU).

    auto: BF16 on 8.0+ (Ampere, Ada, Hopper, Blackwell), FP16 with a GradScaler on 7.x (Volta, Turing),
    FP32 below 7.0 and on CPU. An explicit request the device cannot honour falls back with a reason.
    """
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {requested!r}.")
    arch = architecture_for(capability)

    def fp32(reason: str) -> PrecisionChoice:
        return PrecisionChoice(requested, "fp32", False, False, reason)

    def bf16(reason: str) -> PrecisionChoice:
        return PrecisionChoice(requested, "bf16", True, False, reason)

    def fp16(reason: str) -> PrecisionChoice:
        return PrecisionChoice(requested, "fp16", True, True, reason)

    if requested == "fp32":
        return fp32("FP32 requested.")
    if capability is None:
        if requested == "bf16":
            return bf16("BF16 requested on CPU: autocast runs the GPT in BF16 (fast only on CPUs with BF16 units).")
        if requested == "fp16":
            return fp32("FP16 mixed precision needs a CUDA GPU (Volta or newer); using FP32 on the CPU.")
        return fp32("No CUDA GPU: FP32 on the CPU.")
    if capability >= (8, 0):
        if requested == "fp16":
            return fp16(f"FP16 requested on {arch}; it runs, with a GradScaler (BF16 would need none).")
        return bf16(f"{arch} has native BF16: BF16 autocast, no GradScaler needed.")
    if capability >= (7, 0):
        if requested == "bf16":
            return fp16(f"BF16 requested but {arch} has no native BF16: FP16 with a GradScaler instead.")
        return fp16(f"{arch} has FP16 tensor cores but no native BF16: FP16 autocast with a GradScaler.")
    if requested in ("bf16", "fp16"):
        return fp32(f"{requested.upper()} requested but {arch} has no tensor cores: FP32 instead.")
    return fp32(f"{arch} has no tensor cores: FP32.")


@dataclass
class OptimizationReport:
    """What `TrainingOptimizer.apply` (or `.plan`) did: applied items with details, skipped ones with reasons."""

    device: dict[str, Any]
    precision: dict[str, Any]
    applied: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def add(self, name: str, detail: str) -> None:
        self.applied.append({"name": name, "detail": detail})

    def skip(self, name: str, reason: str) -> None:
        self.skipped.append({"name": name, "reason": reason})

    def is_applied(self, name: str) -> bool:
        return any(item["name"] == name for item in self.applied)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "precision": self.precision, "applied": self.applied, "skipped": self.skipped}

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")
        return path

    def to_markdown(self) -> str:
        lines = [f"**Device:** {self.device.get('summary', '')}", ""]
        lines += [f"- **{item['name']}**: on. {item['detail']}" for item in self.applied]
        lines += [f"- **{item['name']}**: off. {item['reason']}" for item in self.skipped]
        return "\n".join(lines)


GRAD_CHECKPOINTING = "gradient checkpointing"
SDPA = "SDPA attention"
MIXED_PRECISION = "mixed precision"
TF32 = "TF32 matmuls"
CUDNN_BENCHMARK = "cuDNN benchmark"


def gpt_transformer(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers GPT2Model inside coqui's GPTTrainer, an Xtts, or the XTTS GPT wrapper."""
    found = getattr(model, "xtts", model)
    while not hasattr(found, "h"):  # GPTTrainer.xtts -> Xtts.gpt (coqui GPT) -> GPT.gpt (GPT2Model)
        found = found.gpt
    return found


def set_gradient_checkpointing(gpt2: torch.nn.Module, enable: bool) -> int:
    """Turn recompute-in-backward on or off for every GPT2 block; returns how many blocks are on.

    `gradient_checkpointing_enable()` cannot be used: after setting the flags it asks for the input
    embeddings, and XTTS deletes `wte` from its GPT2Model, so it raises AttributeError. The private
    setter it calls does the real work, with the non-reentrant checkpoint that needs no input grads.
    """
    from torch.utils.checkpoint import checkpoint

    func = functools.partial(checkpoint, use_reentrant=False)
    gpt2._set_gradient_checkpointing(enable=enable, gradient_checkpointing_func=func)
    return sum(bool(getattr(block, "gradient_checkpointing", False)) for block in gpt2.h)


class TrainingOptimizer:
    """Applies the three training optimizations (and the GPU flags they need) to a coqui GPTTrainer."""

    def __init__(
        self,
        enable_grad_checkpoint: bool = True,
        enable_sdpa: bool = True,
        enable_mixed_precision: bool = True,
        precision: str = "auto",
        gpu: GPUInfo | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}.")
        self.enable_grad_checkpoint = enable_grad_checkpoint
        self.enable_sdpa = enable_sdpa
        self.enable_mixed_precision = enable_mixed_precision
        self.precision = precision
        self.gpu = gpu if gpu is not None else detect_gpu()

    def precision_choice(self) -> PrecisionChoice:
        if not self.enable_mixed_precision:
            return PrecisionChoice(self.precision, "fp32", False, False, "Mixed precision is off: FP32.")
        return choose_precision(self.gpu.capability if self.gpu.available else None, self.precision)

    def plan(self) -> OptimizationReport:
        """What `apply` will do on this machine, without a model (shown in the UI before Start)."""
        choice = self.precision_choice()
        report = OptimizationReport(
            device={**self.gpu.to_dict(), "summary": self.gpu.summary()}, precision=asdict(choice)
        )
        if self.enable_grad_checkpoint:
            report.add(GRAD_CHECKPOINTING, "every GPT block recomputes its activations in backward")
        else:
            report.skip(GRAD_CHECKPOINTING, "turned off by the user")
        if self.enable_sdpa:
            report.add(SDPA, "GPT attention uses torch scaled_dot_product_attention (fused kernels)")
        else:
            report.skip(SDPA, "turned off by the user: eager attention (the baseline)")
        if choice.mixed_precision:
            scaler = " with a GradScaler" if choice.grad_scaler else ""
            report.add(MIXED_PRECISION, f"{choice.precision.upper()} autocast{scaler}. {choice.reason}")
        elif self.enable_mixed_precision:
            report.skip(MIXED_PRECISION, choice.reason)
        else:
            report.skip(MIXED_PRECISION, "turned off by the user: FP32")
        ampere_plus = self.gpu.available and self.gpu.capability >= (8, 0)
        for name, detail in ((TF32, "FP32 matmuls and convolutions use TF32 tensor cores"),
                             (CUDNN_BENCHMARK, "cuDNN picks the fastest convolution kernels")):  # fmt: skip
            if ampere_plus:
                report.add(name, detail)
            else:
                report.skip(name, "needs an Ampere or newer GPU" if self.gpu.available else "no CUDA GPU")
        return report

    def apply(self, model: torch.nn.Module, config: Any) -> OptimizationReport:
        """Apply the plan to a coqui `GPTTrainer` and its `GPTTrainerConfig`; return what was applied."""
        report = self.plan()
        gpt2 = gpt_transformer(model)

        blocks_on = set_gradient_checkpointing(gpt2, self.enable_grad_checkpoint)
        if self.enable_grad_checkpoint and blocks_on != len(gpt2.h):
            raise RuntimeError(f"Gradient checkpointing is on for {blocks_on} of {len(gpt2.h)} GPT blocks.")
        # A KV cache is never read in training; building one per step only costs memory.
        gpt2.config.use_cache = False

        gpt2.set_attn_implementation("sdpa" if self.enable_sdpa else "eager")
        wanted = "sdpa" if self.enable_sdpa else "eager"
        if gpt2.config._attn_implementation != wanted:
            raise RuntimeError(f"GPT attention is {gpt2.config._attn_implementation!r}, expected {wanted!r}.")

        choice = self.precision_choice()
        config.mixed_precision = choice.mixed_precision
        config.precision = choice.precision if choice.mixed_precision else "fp32"

        # The coqui trainer sets these torch flags from its config when it starts, so set them there.
        ampere_plus = report.is_applied(TF32)
        config.allow_tf32 = ampere_plus
        config.cudnn_benchmark = ampere_plus
        if ampere_plus:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            torch.backends.cudnn.benchmark = True
        return report


# --- memory -----------------------------------------------------------------------------------------

_MB = 1024**2


@functools.cache
def _nvml_handle() -> Any:
    """An NVML handle for the CUDA device this process uses, or None without NVML/GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        # current_device() would create a CUDA context in a process that has none yet.
        index = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        if visible and visible.split(",")[0].strip().isdigit():
            # NVML counts physical devices; CUDA renumbers the visible ones from 0.
            index = int(visible.split(",")[index].strip())
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no driver, no GPU or no NVML: GPU fields stay empty
        return None


def get_memory_stats() -> dict[str, float | None]:
    """Memory now, in MB: torch's allocator (allocated, reserved, peak), the whole GPU via NVML
    (all processes), this process's RSS, and system RAM and swap. GPU fields are None without a GPU."""
    stats: dict[str, float | None] = dict.fromkeys(
        ("gpu_allocated_mb", "gpu_reserved_mb", "gpu_peak_allocated_mb", "gpu_used_mb", "gpu_total_mb"), None
    )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        stats["gpu_allocated_mb"] = round(torch.cuda.memory_allocated() / _MB, 1)
        stats["gpu_reserved_mb"] = round(torch.cuda.memory_reserved() / _MB, 1)
        stats["gpu_peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / _MB, 1)
    handle = _nvml_handle()
    if handle is not None:
        import pynvml

        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        stats["gpu_used_mb"] = round(info.used / _MB, 1)
        stats["gpu_total_mb"] = round(info.total / _MB, 1)
    ram = psutil.virtual_memory()
    swap = psutil.swap_memory()
    stats.update(
        process_rss_mb=round(psutil.Process().memory_info().rss / _MB, 1),
        ram_used_mb=round((ram.total - ram.available) / _MB, 1),
        ram_total_mb=round(ram.total / _MB, 1),
        swap_used_mb=round(swap.used / _MB, 1),
        swap_total_mb=round(swap.total / _MB, 1),
    )
    return stats


def format_memory_stats(stats: dict[str, float | None] | None = None) -> str:
    """A few human lines for a log or notebook."""
    stats = stats if stats is not None else get_memory_stats()

    def gb(key: str) -> str:
        value = stats.get(key)
        return "n/a" if value is None else f"{value / 1024:.2f} GB"

    lines = []
    if stats.get("gpu_allocated_mb") is not None or stats.get("gpu_total_mb") is not None:
        lines.append(
            f"GPU (torch): allocated {gb('gpu_allocated_mb')}, reserved {gb('gpu_reserved_mb')}, "
            f"peak {gb('gpu_peak_allocated_mb')}"
        )
        lines.append(f"GPU (whole device): used {gb('gpu_used_mb')} of {gb('gpu_total_mb')}")
    else:
        lines.append("GPU: none")
    lines.append(f"RAM: used {gb('ram_used_mb')} of {gb('ram_total_mb')}; this process {gb('process_rss_mb')}")
    lines.append(f"Swap: used {gb('swap_used_mb')} of {gb('swap_total_mb')}")
    return "\n".join(lines)


def print_memory_stats(stats: dict[str, float | None] | None = None) -> None:
    print(format_memory_stats(stats))
