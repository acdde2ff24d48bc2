"""How long a checkpoint save stops the training loop: a blocking write against the background writer.

A model of GPT-block-shaped parameters (width 1024) with AdamW's state is saved by the product's
CheckpointWriter, as a run saves: weights, optimizer, config. "Loop blocked" is the time `save()` holds the
caller (with the background writer: waiting for a previous write, if any, and the CPU copy); "written after"
is when the file is on disk. Each mode is timed alternately, the median of the rounds shown.

    python benchmarks/bench_save.py                      # 100 M parameters, 3 rounds, in a temporary folder
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
import torch
from bench_adamw import parameters

from utils.training.checkpointing.checkpoints import CheckpointWriter


def trainer_of(millions: float) -> SimpleNamespace:
    params = parameters(millions, "cpu")
    model = torch.nn.ParameterList(params)
    optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)
    optimizer.step()  # AdamW's moments exist, as after a first step
    return SimpleNamespace(
        _get_model=lambda: model,
        optimizer=optimizer,
        scheduler=None,
        config=SimpleNamespace(to_dict=lambda: {"epochs": 1}),
        epochs_done=0,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args(argv)
    trainer = trainer_of(opts.millions)
    print(f"{common.machine()}, {common.now()}, {opts.millions:.0f} M parameters with AdamW state")
    results: dict[str, dict[str, list[float]]] = {m: {"blocked": [], "written": []} for m in ("blocking", "background")}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(opts.rounds):
            for mode in ("blocking", "background"):
                writer = CheckpointWriter(Path(folder) / mode, keep=1, background=mode == "background")
                writer.run_dir.mkdir(exist_ok=True)
                started = time.perf_counter()
                path = writer.save(trainer, round_ + 1)
                blocked = time.perf_counter() - started
                writer.flush()
                written = time.perf_counter() - started
                results[mode]["blocked"].append(blocked)
                results[mode]["written"].append(written)
                size = path.stat().st_size / 1e9
                print(f"  {mode}: loop blocked {blocked:.2f} s, on disk after {written:.2f} s ({size:.2f} GB)")
    rows = [
        [mode, f"{statistics.median(r['blocked']):.2f}", f"{statistics.median(r['written']):.2f}"]
        for mode, r in results.items()
    ]
    print()
    print(common.markdown_table(["save", "loop blocked (s, median)", "file on disk after (s, median)"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
