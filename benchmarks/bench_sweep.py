"""What one trial of a sweep costs (utils.sweep): its wall time split into the worker's start-up (a fresh process:
imports, the dataset check from its cache, the model build) and the run's own phases from its run.json timings
(training steps, eval loss, the scored evaluation's generation in the loop, scoring in the background and the loop's
wait for it, saves, export), on the tiny model with a scored evaluation of one sentence and the probes.

Trial 0 scores the base model's baseline (step 0) and the others take it (TrainArguments.quality_baseline_from):
the difference in scoring time is what sharing the baseline saves per trial.

    python benchmarks/bench_sweep.py --trials 3
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rows", type=int, default=10, help="Clips of the synthetic dataset.")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rule", default="eval_loss", help="eval_loss scores in the background; a score in the loop.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tests.helpers import write_dataset
    from utils.files import read_json
    from utils.sweep.sweep import sweep_gpt

    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    csv = write_dataset(root / "data", n=args.rows)
    load_before = common.load_average()
    started = time.monotonic()
    result = sweep_gpt(
        train_csv=str(csv),
        output_path=str(root / "out"),
        version="tiny",
        language="en",
        batch_size=2,
        grad_acumm=1,
        num_epochs=args.epochs,
        precision="fp32",
        num_workers=0,
        quality_eval=1,
        quality_max_audio_tokens=10,
        whisper_model="tiny.en",
        learning_rate=1e-3,
        rule=args.rule,
        trials=args.trials,
        space=["learning_rate=1e-6:1e-3"],
    )
    wall = time.monotonic() - started
    print(f"sweep trial benchmark, {common.now()}")
    print(f"device: {common.machine()}; load average before {load_before}, after {common.load_average()}")
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"{args.trials} trials, {args.rows} clips, {args.epochs} epochs, rule {args.rule}; sweep wall {wall:.1f} s")
    head = (
        "trial",
        "state",
        "steps",
        "trial s",
        "start-up s",
        "train s",
        "eval loss s",
        "generation s",
        "scoring s (background)",
        "waited s",
        "saves+export s",
    )
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for trial in result.trials:
        record = read_json(Path(trial["run_dir"]) / "run.json", {}) or {}
        timings = record.get("timings") or {}
        phases = {k: v.get("seconds", 0.0) for k, v in (timings.get("phases") or {}).items()}
        total = trial["seconds"] or 0.0
        start_up = total - float(timings.get("wall_s") or 0.0) + phases.get("startup", 0.0)
        cells = [
            trial["number"],
            trial["state"],
            record.get("steps_done"),
            f"{total:.1f}",
            f"{start_up:.1f}",
            f"{phases.get('train_steps', 0):.1f}",
            f"{phases.get('eval_loss', 0):.1f}",
            f"{phases.get('scored_eval', 0):.1f}",
            f"{(timings.get('background') or {}).get('scoring', 0):.1f}",
            f"{phases.get('scoring_wait', 0):.1f}",
            f"{phases.get('saves', 0) + phases.get('export', 0):.1f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
