"""Which GPU the machine has, read through NVML so that the web process creates no CUDA context."""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass
from typing import Any

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

    @property
    def ampere_or_newer(self) -> bool:
        return self.available and self.capability is not None and self.capability >= (8, 0)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["capability"] = list(self.capability) if self.capability else None
        return data


def gpu_info(name: str, capability: tuple[int, int], total_bytes: int, device_count: int = 1) -> GPUInfo:
    return GPUInfo(
        available=True,
        name=name,
        capability=capability,
        architecture=architecture_for(capability),
        total_memory_gb=round(total_bytes / 1024**3, 2),
        # BF16 tensor cores arrived with Ampere; older cards only emulate it.
        bf16_native=capability >= (8, 0),
        device_count=device_count,
    )


@functools.cache
def detect_gpu() -> GPUInfo:
    """Describe the first CUDA device, computed once per process; safe without CUDA.

    NVML answers first: asking torch for device properties creates a CUDA context, which would hold
    GPU memory in the web app's process beside the training process."""
    try:
        if not torch.cuda.is_available():
            return GPUInfo(available=False)
        count = torch.cuda.device_count()
        handle = nvml_handle()
        if handle is not None:
            import pynvml

            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            capability = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            return gpu_info(name, capability, total, count)  # type: ignore[arg-type]
        props = torch.cuda.get_device_properties(0)
        return gpu_info(props.name, (props.major, props.minor), props.total_memory, count)
    except (RuntimeError, AssertionError):
        # A broken driver must not stop a CPU run.
        return GPUInfo(available=False, name="CUDA unavailable (driver error)")


@functools.cache
def nvml_handle(index: int | None = None) -> Any:
    """An NVML handle for a CUDA device (default: the one this process uses), or None without NVML/GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        if index is None:
            # current_device() would create a CUDA context in a process that has none yet.
            index = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        if visible and visible.split(",")[0].strip().isdigit():
            # NVML counts physical devices; CUDA renumbers the visible ones from 0.
            index = int(visible.split(",")[index].strip())
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no driver, no GPU or no NVML: GPU fields stay empty
        return None


def gpu_free_bytes(index: int = 0) -> int | None:
    """Free memory of a GPU (all processes counted) through NVML, or None without one."""
    handle = nvml_handle(index)
    if handle is None:
        return None
    import pynvml

    return int(pynvml.nvmlDeviceGetMemoryInfo(handle).free)
