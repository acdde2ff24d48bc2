"""AdamW step time by kernel on this machine: the per-parameter for-loop (torch's default on a CPU), foreach
(torch's default on CUDA) and fused (what the product uses wherever torch has it).

The parameters are shaped like the XTTS GPT's blocks (width 1024: attention 1024x3072 and 1024x1024, MLP
1024x4096 and 4096x1024, biases and norms) repeated to the size asked for; gradients are random. Each kernel
steps the same parameters; the rounds interleave the kernels (a shared machine's load hits all alike), and the
median of the rounds is shown.

    python benchmarks/bench_adamw.py                     # 100 M parameters on the CPU, 5 rounds
    python benchmarks/bench_adamw.py --millions 441 --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
import torch

BLOCK = [(1024, 3072), (3072,), (1024, 1024), (1024,), (1024, 4096), (4096,), (4096, 1024), (1024,), (1024,), (1024,)]
KERNELS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def parameters(millions: float, device: str) -> list[torch.nn.Parameter]:
    per_block = sum(torch.Size(shape).numel() for shape in BLOCK)
    blocks = max(1, round(millions * 1e6 / per_block))
    params = [torch.nn.Parameter(torch.randn(shape, device=device) * 0.02) for _ in range(blocks) for shape in BLOCK]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    return params


def step_seconds(optimizer: torch.optim.Optimizer, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    optimizer.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=100.0, help="parameters, in millions")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args(argv)
    params = parameters(opts.millions, opts.device)
    count = sum(p.numel() for p in params)
    print(f"{common.machine() if opts.device == 'cpu' else torch.cuda.get_device_name()}, {common.now()}")
    print(f"{count / 1e6:.0f} M parameters in {len(params)} tensors, {opts.device}, torch {torch.__version__}")
    optimizers = {
        name: torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.96), eps=1e-8, weight_decay=0.01, **kw)
        for name, kw in KERNELS.items()
    }
    for optimizer in optimizers.values():
        step_seconds(optimizer, opts.device)  # allocates the moments; not timed
    times: dict[str, list[float]] = {name: [] for name in optimizers}
    for _ in range(opts.rounds):
        for name, optimizer in optimizers.items():
            times[name].append(step_seconds(optimizer, opts.device))
        print(f"  round: {', '.join(f'{n} {t[-1]:.3f} s' for n, t in times.items())}, load {common.load_average()}")
    loop = statistics.median(times["for-loop"])
    rows = [
        [name, f"{statistics.median(t):.3f}", f"{min(t):.3f}", f"{loop / statistics.median(t):.2f}x"]
        for name, t in times.items()
    ]
    print()
    print(common.markdown_table(["AdamW kernel", "step, median (s)", "fastest (s)", "vs for-loop"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
