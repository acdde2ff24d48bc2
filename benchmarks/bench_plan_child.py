"""What planning in a child process costs the page: the child's start, and a plan through it against the same
plan in the calling process.

Each repeat, interleaved (A B A B ...), in a fresh Python process:
- in-process: import the planner, then `estimate_gpt_memory(...)` twice (first: traces; second: cached);
- child: start the child (`warm_up` without a plan), then `plan_in_child("estimate_gpt_memory", ...)` twice;
- warm child: as the app does at launch (in the background there), start the child and plan train_gpt's
  defaults, then the same two plans: the first trace's one-time costs are paid by then.

    python benchmarks/bench_plan_child.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN = {"version": "tiny", "batch_size": 2, "grad_acumm": 1}


def timed(setup: str, plan: str) -> str:
    """A child script that times `setup` (imports, warm-up), then `plan` twice (the first plan, then a cached one)."""
    return "\n".join(
        [
            "import json, time",
            "t0 = time.perf_counter()",
            setup,
            "t1 = time.perf_counter()",
            plan,
            "t2 = time.perf_counter()",
            plan,
            "t3 = time.perf_counter()",
            'print(json.dumps({"start": t1 - t0, "first_plan": t2 - t1, "cached_plan": t3 - t2}))',
        ]
    )


IN_CHILD = "from utils.memory_plan.child import plan_in_child, warm_up\n"
CHILD_PLAN = 'plan_in_child("estimate_gpt_memory", **PLAN)'
CASES = {
    "in-process": timed("from utils.memory_plan.planner import estimate_gpt_memory", "estimate_gpt_memory(**PLAN)"),
    "child": timed(IN_CHILD + "warm_up(background=False, plan_defaults=False)", CHILD_PLAN),
    # What the app does in the background when it starts:
    "warm child": timed(IN_CHILD + "warm_up(background=False, plan_defaults=True)", CHILD_PLAN),
}


def run(code: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", f"PLAN = {PLAN!r}\n{code}"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0] if Path("/proc/loadavg").exists() else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CASES}
    for repeat in range(args.repeats):
        for name, code in CASES.items():
            result = run(code)
            results[name].append(result)
            print(
                f"repeat {repeat + 1} {name:11s} load {load()}  "
                + "  ".join(f"{k} {v:.3f}s" for k, v in result.items())
            )
    print("\nmedians (s):")
    for name, rows in results.items():
        print(f"  {name:11s} " + "  ".join(f"{k} {statistics.median(r[k] for r in rows):.3f}" for k in rows[0]))


if __name__ == "__main__":
    main()
