"""The memory planner's table for the full-size XTTS GPT: peak GPU memory per configuration and batch.

Every figure is the planner's (utils.memory_plan): the product's training step traced on fake
tensors with a GPU's autocast policy, attention kernel and allocator rounding emulated, plus the
CUDA overhead. No GPU and no weights are needed: a version that is not downloaded is planned from
its published architecture.

    python benchmarks/plan_memory.py                         # batch 2 and 8, one optimizer step per batch
    python benchmarks/plan_memory.py --grad-acumm 2          # as train_gpt's default (gradients held)
    python benchmarks/plan_memory.py --cpu-check             # also: planner vs the CPU allocator, real steps

Rows: coqui's step as shipped (FP32, eager, no checkpointing), +SDPA, +BF16, +checkpointing, all three, all
three with train_gpt's leaner steps (fused GELU, checkpointed conditioning path, fused AdamW, HiFi-GAN kept on
the CPU), with bitsandbytes' 8-bit AdamW on top, and LoRA (rank 16) instead of a full fine-tune.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from utils.memory_plan.planner import BREAKDOWN, GIB, estimate_gpt_memory

FLAGS = ("enable_sdpa", "enable_mixed_precision", "enable_grad_checkpoint")
COQUI = {"leaner_steps": False}  # coqui's step as shipped: composite GELU, foreach AdamW, HiFi-GAN on the GPU
ROWS = [
    ("baseline (FP32, eager, no checkpointing; coqui's step)", COQUI),
    ("+ SDPA", {**COQUI, "enable_sdpa": True}),
    ("+ BF16", {**COQUI, "enable_mixed_precision": True}),
    ("+ checkpointing", {**COQUI, "enable_grad_checkpoint": True}),
    ("all three", {**COQUI, **dict.fromkeys(FLAGS, True)}),
    ("all three + leaner steps (train_gpt's default)", dict.fromkeys(FLAGS, True)),
    ("+ 8-bit AdamW (bitsandbytes)", {**dict.fromkeys(FLAGS, True), "optimizer": "adamw_8bit"}),
    (
        "LoRA rank 16 (PEFT; c_attn, c_proj, c_fc), all three + leaner steps",
        {**dict.fromkeys(FLAGS, True), "lora_rank": 16},
    ),
    ("LoRA rank 16 + 8-bit AdamW", {**dict.fromkeys(FLAGS, True), "lora_rank": 16, "optimizer": "adamw_8bit"}),
]
COLUMNS = BREAKDOWN  # the planner's own order of its breakdown


def plan_rows(args: argparse.Namespace) -> list[dict]:
    rows = []
    for name, options in ROWS:
        keywords = {
            **dict.fromkeys(FLAGS, False),
            **options,
            "version": args.version,
            "grad_acumm": args.grad_acumm,
            "max_audio_length": args.max_audio_length,
            "precision": "bf16",
        }
        if args.models_dir:
            keywords["models_dir"] = args.models_dir
        for batch in args.batches:
            started = time.perf_counter()
            estimate = estimate_gpt_memory(batch_size=batch, **keywords)
            rows.append({"name": name, "estimate": estimate, "seconds": time.perf_counter() - started})
            print(f"... {name}, batch {batch}: {estimate.peak_gib:.2f} GiB ({rows[-1]['seconds']:.1f} s)", flush=True)
    return rows


def _where(estimate) -> str:  # type: ignore[no-untyped-def]
    """The run's phase that sets the peak, and within a training step its part (forward, backward, optimizer)."""
    return f"{estimate.peak_phase} ({estimate.step_phase})" if estimate.step_phase else estimate.peak_phase


def table(rows: list[dict]) -> str:
    header = (
        "| configuration | batch | peak (GiB) | phase | "
        + " | ".join(c.replace("_", " ") for c in COLUMNS)
        + " | vs baseline | time (s) |"
    )
    lines = [header, "|" + "---|" * (len(COLUMNS) + 6)]
    baseline = {r["estimate"].batch_size: r["estimate"].peak_gib for r in rows if r["name"].startswith("baseline")}
    for r in rows:
        e = r["estimate"]
        parts = " | ".join(f"{e.breakdown_gib[c]:.2f}" for c in COLUMNS)
        ratio = e.peak_gib / baseline[e.batch_size]
        lines.append(
            f"| {r['name']} | {e.batch_size} | **{e.peak_gib:.2f}** | {_where(e)} | {parts} | {ratio:.0%} "
            f"| {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


def cpu_check() -> str:
    """Planner vs the CPU allocator's peak of real CPU steps (tiny model and a locally built mid-size one)."""
    from utils.memory_check.step_measure import build_model_folder, cpu_step_settings, real_cpu_step
    from utils.memory_plan.trace import trace_step

    lines = [
        (
            "| model | batch | ckpt | SDPA | measured peak (MiB) | of which the step (MiB) | planned (MiB) "
            "| error total | error step part |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as folder:
        models = Path(folder) / "models"
        build_model_folder(models / "mid", layers=6, width=384, heads=6)
        for version, checkpoint, sdpa in (("tiny", False, False), ("mid", False, True), ("mid", True, True)):
            models_dir = models if version == "mid" else None
            measured, shapes = real_cpu_step(
                version,
                Path(folder) / f"{version}-{checkpoint}",
                4,
                enable_grad_checkpoint=checkpoint,
                enable_sdpa=sdpa,
                models_dir=models_dir,
            )
            settings = cpu_step_settings(version, shapes, checkpoint, sdpa, models_dir)
            trace = trace_step(settings)
            planned = sum(trace.peak()[1].values())
            step_part = planned - measured.resident_bytes
            name = "tiny (2 x 64)" if version == "tiny" else "mid (6 x 384)"
            lines.append(
                f"| {name} | {shapes['batch_size']} | {checkpoint} | {sdpa} | "
                f"{measured.peak_bytes / 2**20:.1f} | {measured.step_peak_bytes / 2**20:.1f} | "
                f"{planned / 2**20:.1f} | {planned / measured.peak_bytes - 1:+.1%} | "
                f"{step_part / measured.step_peak_bytes - 1:+.1%} |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="v2.0.2", help="Base model version (planned from its architecture).")
    parser.add_argument("--models-dir", default="", help="Folder of base models (default ./models).")
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--grad-acumm", type=int, default=1, help="2+ plans the micro-steps that hold gradients.")
    parser.add_argument("--max-audio-length", type=int, default=255995, help="Longest clip, samples at 22050 Hz.")
    parser.add_argument("--cpu-check", action="store_true", help="Also compare with real CPU steps (a minute).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the output (markdown) here.")
    args = parser.parse_args(argv)
    started = datetime.now().isoformat(timespec="seconds")
    rows = plan_rows(args)
    first = rows[0]["estimate"]
    every = [r["estimate"] for r in rows if r["name"].startswith("+ 8-bit")]
    all_three = {r["estimate"].batch_size: r["estimate"] for r in rows if r["name"].startswith("all three + leaner")}
    baseline = {r["estimate"].batch_size: r["estimate"] for r in rows if r["name"].startswith("baseline")}
    text = [
        (
            "Planner: utils.memory_plan (traced on a CPU, "
            f"{platform.processor() or platform.machine()}; no GPU needed), "
            f"{started}  "
        ),
        (
            f"Model: {first.architecture}; clips of {args.max_audio_length} samples, text at "
            f"{first.settings['text_tokens']} tokens, 6 s conditioning; grad_acumm {args.grad_acumm}; "
            f"torch {torch.__version__}  "
        ),
        f"Command: `python {' '.join(sys.argv)}`",
        "",
        (
            "Peaks include the CUDA overhead (context, kernels, workspaces); 'time' is the planner's time for that "
            "row (two traces when a configuration is first seen, a lookup after)."
        ),
        "",
        table(rows),
        "",
    ]
    for batch in args.batches:
        if batch in all_three and batch in baseline:
            text.append(
                f"- batch {batch}: all three with the leaner steps use "
                f"{all_three[batch].peak_gib / baseline[batch].peak_gib:.0%} of the baseline's peak."
            )
    for estimate in every:
        target = f" ({'under' if estimate.peak_gib < 7.0 else 'over'} 7.0 GiB)" if estimate.batch_size == 2 else ""
        text.append(
            f"- every saving (with 8-bit AdamW) at batch {estimate.batch_size}: "
            f"{estimate.peak_gib:.2f} GiB{target}; needs "
            f"{estimate.required_bytes / GIB:.2f} GiB free with the safety margin."
        )
    if args.cpu_check:
        text += ["", "Planner vs the CPU allocator (real CPU training steps of the product, FP32):", "", cpu_check()]
    output = "\n".join(text) + "\n"
    print("\n" + output)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(output, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
