"""Which devices a run trains on: the `devices` option ("0,1", "cpu,cpu", or empty for one process).

Only the standard library at the top: TrainArguments checks the option in any process, and a training
worker reads it before torch is imported (it must hide the other GPUs first).
"""

from __future__ import annotations

import os


def parse_devices(devices: str) -> list[str]:
    """'0,1' or 'cuda:0,cuda:1' -> ['0', '1']; 'cpu,cpu' -> ['cpu', 'cpu']; '' -> [] (one process, as always).

    One process per entry; GPU numbers count the GPUs this process sees (CUDA_VISIBLE_DEVICES). A single GPU
    number trains on that GPU alone. Raises ValueError for anything else, saying what to write instead."""
    items = [item.strip().lower() for item in str(devices or "").split(",")]
    if items == [""]:
        return []
    parsed = []
    for item in items:
        index = item.removeprefix("cuda:")
        if item == "cpu":
            parsed.append("cpu")
        elif index.isdigit() and len(index) < 4:
            parsed.append(str(int(index)))
        else:
            raise ValueError(
                f"devices: {item[:40]!r} is not a device. Write GPU numbers such as '0,1' (or "
                "'cuda:0,cuda:1'), or 'cpu,cpu' for CPU processes; leave it empty for one "
                "process."
            )
    if len({entry == "cpu" for entry in parsed}) > 1:
        raise ValueError(f"devices={devices!r} mixes CPU and GPUs; use only GPU numbers ('0,1') or only 'cpu' entries.")
    gpus = [entry for entry in parsed if entry != "cpu"]
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"devices={devices!r} names a GPU twice; each process needs a GPU of its own.")
    return parsed


def check_devices_present(devices: list[str], gpu_count: int) -> None:
    """ValueError naming the GPUs of `devices` that this machine (with `gpu_count` visible GPUs) lacks."""
    missing = [entry for entry in devices if entry != "cpu" and int(entry) >= gpu_count]
    if missing:
        have = f" (0-{gpu_count - 1})" if gpu_count else ""
        raise ValueError(
            f"devices: GPU {', '.join(missing)} not found; this machine has {gpu_count} CUDA GPU(s)"
            f"{have}. Use 'cpu,cpu' to try several processes without a GPU."
        )


def physical_gpu_ids(devices: list[str]) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entry for each device: GPU numbers count the visible GPUs, a worker needs the
    physical one (it sees only its own GPU)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if not visible:
        return list(devices)
    return [entry if entry == "cpu" else visible[int(entry)] for entry in devices]
