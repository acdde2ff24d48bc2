"""Which rank this process is in a multi-process (DDP) run, and the two collectives that set a run up.

A run on several devices is one `train_gpt` per device, started by torchrun (`utils.training.process.launcher`).
Every function here also answers for a process that is not part of one (world size 1, rank 0) without any
collective, so a one-device run calls them at no cost. The order of collectives is the same on every rank:
`describe_ranks` (after the dataset check), `share_run_dir` (once rank 0 has built its trainer and written
the run's files), then the DistributedDataParallel constructor (`utils.training.ranks.data_parallel`).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import torch.distributed as dist

# Set by the launcher for its workers: the identity (pid, start time, host) of the process that called
# train_gpt(devices=...). run.json records it as the run's process, so a reader marks the run failed when it is gone.
LAUNCHER_ENV = "XTTS_DDP_LAUNCHER"


def in_process_group() -> bool:
    """True in a worker started by the launcher (even a one-device one); False in a plain run."""
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if in_process_group() else 1


def is_distributed() -> bool:
    """More than one rank: gradients are averaged across ranks and each rank trains on its own rows."""
    return world_size() > 1


def rank() -> int:
    return dist.get_rank() if in_process_group() else 0


def is_main_process() -> bool:
    """Rank 0: the only process that writes the run folder (and the one process of a plain run)."""
    return rank() == 0


def local_world_size() -> int:
    """Training processes on this machine (torchrun sets LOCAL_WORLD_SIZE); they share its CPU cores."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def launcher_identity() -> dict[str, Any] | None:
    """The process that launched this worker ({pid, pid_started, host}), or None in a plain run."""
    value = os.environ.get(LAUNCHER_ENV)
    return json.loads(value) if value and in_process_group() else None


def device_name() -> str:
    """This process's training device as the machine numbers it: 'cpu' or 'cuda:<physical GPU number>'."""
    from utils.device.gpu import detect_gpu

    if not detect_gpu().available:
        return "cpu"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return f"cuda:{visible or 0}"


def describe_ranks() -> list[dict[str, Any]]:
    """Every rank's pid, host and device, in rank order. A collective: every rank calls it, once."""
    from utils.device.gpu import detect_gpu

    own = {
        "rank": rank(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "device": device_name(),
        "name": detect_gpu().name if detect_gpu().available else "CPU",
    }
    if not in_process_group():
        return [own]
    ranks: list[Any] = [None] * world_size()
    dist.all_gather_object(ranks, own)
    return ranks


def share_run_dir(run_dir: Path | None) -> Path:
    """Rank 0 sends its run folder; the other ranks receive it (theirs is None). A collective: rank 0 calls it
    once its trainer is built and the run's files are written, so the others find every file they read."""
    if not in_process_group():
        assert run_dir is not None
        return run_dir
    shared = [str(run_dir) if run_dir is not None else None]
    dist.broadcast_object_list(shared, src=0)
    return Path(shared[0])


def run_fields(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """run.json fields about the processes: world size and devices, and for several ranks each rank and the back end."""
    fields: dict[str, Any] = {"world_size": len(ranks), "devices": [r["device"] for r in ranks]}
    if in_process_group():
        fields["distributed"] = {"backend": dist.get_backend(), "ranks": ranks}
    return fields
