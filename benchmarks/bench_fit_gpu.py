"""Fit my GPU and Estimate, each in a fresh Python process, first call included: the wall time a person waits.

Each case runs in its own new process (imports, the planner's first call, the answer), as a notebook's first cell
or the page's first click after the app started would. The load average is printed beside each row: on a shared
machine it says whether a timing was disturbed.

    python benchmarks/bench_fit_gpu.py                      # v2.0.2, in the calling process of a fresh child
    python benchmarks/bench_fit_gpu.py --versions v2.0.2 main --repeats 2
    python benchmarks/bench_fit_gpu.py --through-child      # as the page does: via utils.memory_plan.child
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The page's Estimate with the form untouched (train_gpt's defaults), and Fit my GPU for an 8 GB card.
CASES = {
    "estimate": "estimate_gpt_memory(version=VERSION).peak_gib",
    "fit_my_gpu 8 GB": "fit_my_gpu(version=VERSION, card_gb=8).keywords",
}
DIRECT = "from utils.gpt_train import estimate_gpt_memory, fit_my_gpu\n"
THROUGH_CHILD = (
    "from utils.memory_plan.child import plan_in_child\n"
    "estimate_gpt_memory = lambda **kw: plan_in_child('estimate_gpt_memory', **kw)\n"
    "fit_my_gpu = lambda **kw: plan_in_child('fit_my_gpu', **kw)\n"
)


def run(version: str, expression: str, through_child: bool) -> tuple[float, str]:
    code = "\n".join(
        [
            "import json, time",
            "t0 = time.perf_counter()",
            THROUGH_CHILD if through_child else DIRECT,
            f"VERSION = {version!r}",
            f"answer = {expression}",
            "print(json.dumps({'seconds': time.perf_counter() - t0, 'answer': repr(answer)}))",
        ]
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "XTTS_PLANNER_WARM_UP": "0"},
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started  # the process's whole life, interpreter start included
    if done.returncode != 0:
        return wall, "FAILED: " + done.stderr.strip().splitlines()[-1]
    return wall, json.loads(done.stdout.strip().splitlines()[-1])["answer"]


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=["v2.0.2"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--through-child", action="store_true", help="plan in the page's planner process")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; wall seconds of a fresh process per call")
    for repeat in range(args.repeats):
        for version in args.versions:
            for name, expression in CASES.items():
                before = load()
                seconds, answer = run(version, expression, args.through_child)
                print(
                    f"repeat {repeat + 1}  {version:7s} {name:16s} {seconds:8.1f} s  load {before} -> {load()}  "
                    f"{answer[:160]}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
