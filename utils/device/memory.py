"""Memory readings of this process and the machine: torch's CUDA allocator, the whole GPU (NVML), RAM and swap."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import psutil
import torch

from utils.device.gpu import nvml_handle

_MB = 1024**2
GPU_FIELDS = ("gpu_allocated_mb", "gpu_reserved_mb", "gpu_peak_allocated_mb", "gpu_used_mb", "gpu_total_mb")


def get_memory_stats() -> dict[str, float | None]:
    """Memory now, in MB: torch's allocator (allocated, reserved, peak), the whole GPU via NVML
    (all processes), this process's RSS, and system RAM and swap. GPU fields are None without a GPU."""
    stats: dict[str, float | None] = dict.fromkeys(GPU_FIELDS, None)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        stats["gpu_allocated_mb"] = round(torch.cuda.memory_allocated() / _MB, 1)
        stats["gpu_reserved_mb"] = round(torch.cuda.memory_reserved() / _MB, 1)
        stats["gpu_peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / _MB, 1)
    handle = nvml_handle()
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


class PeakWatch:
    """The CUDA allocator's peak allocated (and reserved) bytes while a `watch_peak` block ran (None without
    CUDA). Reserved is what the allocator holds from the driver: allocated plus its cached blocks."""

    def __init__(self) -> None:
        self.peak_bytes: int | None = None
        self.reserved_bytes: int | None = None

    def fold(self, value: int, reserved: int | None = None) -> None:
        self.peak_bytes = value if self.peak_bytes is None else max(self.peak_bytes, value)
        if reserved is not None:
            self.reserved_bytes = reserved if self.reserved_bytes is None else max(self.reserved_bytes, reserved)


_watches: list[PeakWatch] = []
_watches_lock = threading.Lock()


def _cuda_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def reset_peak_allocated() -> None:
    """torch's peak reset (the metrics keep a peak per record), after the peak so far is folded into every open
    `watch_peak`: torch keeps one peak, and the spans watched overlap the records."""
    if not _cuda_ready():
        return
    with _watches_lock:
        peak, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        for watch in _watches:
            watch.fold(peak, reserved)
        torch.cuda.reset_peak_memory_stats()


@contextlib.contextmanager
def watch_peak() -> Iterator[PeakWatch]:
    """The CUDA allocator's peak allocated bytes inside the block (`.peak_bytes` after it; None without CUDA),
    whatever resets torch's peak meanwhile through `reset_peak_allocated`."""
    watch = PeakWatch()
    if _cuda_ready():
        watch.fold(torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
    with _watches_lock:
        _watches.append(watch)
    try:
        yield watch
    finally:
        with _watches_lock:
            _watches.remove(watch)
            if _cuda_ready():
                watch.fold(torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())


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
