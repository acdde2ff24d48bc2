"""The planner's phases against the CPU allocator: a real model in train_gpt's setup (a locally built GPT of the
given size, random weights), the eval-loss pass and the scored evaluation's generation and conditioning measured
(utils/memory_check/phase_measure.py), beside the planner's figures for the same shapes.

    python benchmarks/bench_phases.py --layers 8 --width 512 --heads 8 --rows 1 3 10 --cap 300 --clip-seconds 8
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
MIB = 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rows", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--cap", type=int, default=200)
    parser.add_argument("--clip-seconds", type=float, default=3.0)
    parser.add_argument("--models-dir", type=Path, default=Path(tempfile.gettempdir()) / "xtts-bench-phase-models")
    args = parser.parse_args()

    from utils.memory_check.phase_measure import measure_phases
    from utils.memory_check.step_measure import build_model_folder, cpu_step_settings
    from utils.memory_plan import run_phases as rp
    from utils.memory_plan import tracker as t
    from utils.memory_plan.trace import trace_step
    from utils.model.base_models import ensure_base_model

    ensure_base_model("tiny")
    name = f"phases-{args.layers}x{args.width}"
    if not (args.models_dir / name / "config.json").is_file():
        build_model_folder(args.models_dir / name, layers=args.layers, width=args.width, heads=args.heads)
    with tempfile.TemporaryDirectory() as work:
        measured = measure_phases(
            name,
            work,
            args.batch,
            models_dir=args.models_dir,
            rows=tuple(args.rows),
            cap=args.cap,
            clip_seconds=args.clip_seconds,
            enable_grad_checkpoint=True,
            enable_sdpa=True,
        )
    settings = cpu_step_settings(name, measured.shapes, True, True, args.models_dir)
    _, evaluation = trace_step(settings).eval_peak()
    resident = evaluation[t.WEIGHTS] + evaluation[t.FROZEN] + evaluation[t.OPTIMIZER_STATE]
    parts = rp.inference_parts(settings.architecture)
    speaker = parts["speaker_fixed_bytes"] + parts["speaker_bytes_per_second"] * measured.reference_seconds
    rows = [
        ("resident (weights, buffers, AdamW state)", measured.resident_bytes, resident),
        (f"eval loss, batch {args.batch}", measured.eval_loss_bytes, sum(evaluation.values()) - resident),
        *[
            (
                f"generation, {n} texts of {measured.text_tokens} tokens, cap {measured.cap}",
                real,
                rp.generation_bytes(settings.architecture, n, measured.text_tokens, measured.cap),
            )
            for n, real in measured.generation_bytes.items()
        ],
        (
            f"conditioning latents, {measured.reference_seconds:g} s reference",
            measured.conditioning_bytes,
            max(parts["style_bytes"], speaker),
        ),
    ]
    print(f"{args.layers} x {args.width} model, CPU allocator; load average {os.getloadavg()[0]:.1f}")
    print("| phase | measured (MiB) | planned (MiB) | error |\n|---|---|---|---|")
    for label, real, planned in rows:
        print(f"| {label} | {real / MIB:.2f} | {planned / MIB:.2f} | {planned / real - 1:+.1%} |")


if __name__ == "__main__":
    main()
