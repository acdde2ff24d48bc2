"""Throughput of a multi-device run against one device: the same train_gpt call, with and without `devices`.

Runs the product's own `train_gpt` (coqui's trainer, torchrun, DDP) on a synthetic speech-like dataset
(or --train-csv), then reads each run's metrics.jsonl: median step time, samples/s (all ranks' clips),
peak GPU memory per rank, and the wall time of the whole call (process start-up and model loading
included). The first --warmup steps are left out of the medians.

    python benchmarks/bench_ddp.py --devices cpu,cpu                       # CPU: two gloo processes, tiny model
    python benchmarks/bench_ddp.py --devices 0,1 --version v2.0.2 --batch-size 8 --clips 256   # two GPUs
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from tests.helpers import write_dataset
from utils.device.gpu import detect_gpu
from utils.files import read_jsonl
from utils.gpt_train import train_gpt


def run_once(devices: str, csv_path: Path, output: Path, options: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    result = train_gpt(
        version=options.version,
        language="en",
        num_epochs=options.epochs,
        batch_size=options.batch_size,
        grad_acumm=1,
        train_csv=str(csv_path),
        output_path=str(output),
        save_step=10**6,
        enable_mixed_precision=detect_gpu().available,
        num_workers=-1,
        print_step=10**6,
        devices=devices,
    )
    wall = time.perf_counter() - started
    train = [r for r in read_jsonl(Path(result.run_dir) / "metrics.jsonl") if r["type"] == "train"]
    timed = train[options.warmup :] or train
    per_rank = [r.get("ranks") or [r] for r in train]  # a one-process run's record is its only rank
    return {
        "devices": devices or "(one process)",
        "steps": len(train),
        "step_s": statistics.median(r["step_time"] for r in timed),
        "samples_s": statistics.median(r["samples_per_sec"] for r in timed),
        "peak_gpu_mb": [
            max(ranks[i].get("gpu_peak_allocated_mb") or 0.0 for ranks in per_rank) for i in range(len(per_rank[-1]))
        ],
        "wall_s": wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", required=True, help="the multi-device run: 'cpu,cpu' or GPU numbers '0,1'")
    parser.add_argument("--version", default="tiny")
    parser.add_argument("--train-csv", default="", help="a dataset; default: synthetic clips")
    parser.add_argument("--clips", type=int, default=48, help="synthetic clips (1.5-3 s) when no --train-csv")
    parser.add_argument("--batch-size", type=int, default=4, help="clips per step on each process")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out of the medians")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as folder:
        csv_path = Path(options.train_csv) if options.train_csv else write_dataset(Path(folder) / "data", options.clips)
        rows = [run_once(devices, csv_path, Path(folder) / "out", options) for devices in ("", options.devices)]
    gpu = detect_gpu()
    gpus = f" x{gpu.device_count}" if gpu.available else ""
    print(
        f"\nDevice: {gpu.summary()}{gpus}; {platform.processor() or platform.machine()}; "
        f"model {options.version}, batch {options.batch_size} per process, {options.epochs} epochs"
    )
    print(
        f"{'devices':<16}{'steps':>7}{'step s':>9}{'samples/s':>11}{'speed-up':>10}{'wall s':>9}  peak GPU MB per rank"
    )
    for row in rows:
        speedup = row["samples_s"] / rows[0]["samples_s"]
        peaks = ", ".join(f"{p:.0f}" for p in row["peak_gpu_mb"]) if gpu.available else "-"
        print(
            f"{row['devices']:<16}{row['steps']:>7}{row['step_s']:>9.3f}{row['samples_s']:>11.2f}{speedup:>9.2f}x"
            f"{row['wall_s']:>9.1f}  {peaks}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
