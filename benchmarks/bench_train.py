"""Training-step benchmark of the product: train_gpt's own setup and coqui's Trainer.train_step, one row per setting.

Each row builds what `train_gpt` builds (`build_training_setup`: coqui's GPTTrainer with the DVAE, the
conditioning encoder and the frozen HiFi-GAN, the optimizations applied by `TrainingOptimizer`, coqui's
Trainer with the run's AdamW and callbacks) on a model folder, collates real batches of synthetic ~11 s clips
with long sentences through the product's data loader, and times `Trainer.train_step` (mels and DVAE codes,
forward, backward, clipping, optimizer step). Every row runs in its own process, so its peak is its own.
Beside each measured peak stands the memory planner's prediction for the same settings.

    python benchmarks/bench_train.py                          # a CUDA GPU: full size, batch 8
    python benchmarks/bench_train.py --leaner-breakdown --out docs/bench-gpu.md
    python benchmarks/bench_train.py --device cpu             # CPU: the tiny model, a quick check
    python benchmarks/bench_train.py --device cpu --full-size --precision bf16   # CPU, full size (slow)

Rows: the baseline (coqui's step as shipped: TrainingOptimizer(leaner_steps=False), no DVAE code cache, the
HiFi-GAN on the GPU, FP32, eager attention, no checkpointing, TF32 off), + SDPA, + mixed precision,
+ checkpointing, all three, all three + leaner steps (train_gpt's default with TF32 off), train_gpt's
defaults (+ TF32), + 8-bit AdamW (bitsandbytes; CUDA or CPU), + LoRA rank 16 instead of a full fine-tune (PEFT).
--leaner-breakdown adds each leaner saving alone on top of "all three".
Peaks: on a GPU the CUDA allocator's (max_memory_allocated, read before the metrics logger resets it);
on a CPU the CPU allocator's own accounting of one extra step (profiler memory events), with the
process's peak RSS beside it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
import torch
from bench_row import BREAKDOWN, EXTRA, ROWS, Row, run_row, skip_reason
from bench_tables import metadata, summary, tables

# --- the planner's predictions (in the parent, after the rows) -------------------------------------------


def planner_keywords(row: Row, opts: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    keywords = {
        "version": opts.version,
        "models_dir": str(opts.model_dir),
        "batch_size": opts.batch,
        "grad_acumm": 1,
        "precision": opts.precision,
        "enable_tf32": row.tf32,
        "optimizer": row.optimizer,
        "lora_rank": row.lora_rank,
        "enable_grad_checkpoint": row.grad_checkpoint,
        "enable_sdpa": row.sdpa,
        "enable_mixed_precision": row.mixed_precision,
    }
    options: dict[str, Any] = {"device": opts.device_type, "leaner_steps": row.leaner}
    if "fused_adamw" in row.extras:
        options["fused_adamw"] = True
    return keywords, options


def plan(row: Row, opts: argparse.Namespace, shapes: dict[str, int] | None) -> dict[str, Any]:
    """The planner for this row: its worst case (what estimate_gpt_memory tells a user) and the same step at the
    shapes the row measured (longest clip, text and conditioning of its batches)."""
    from utils.memory_plan.planner import estimate_gpt_memory, step_settings
    from utils.memory_plan.trace import trace_step
    from utils.options.arguments import TrainArguments

    if set(row.extras) & {"gelu", "conditioning"}:
        return {"note": "the planner models the leaner steps as one group"}
    note = {"note": "planned as the eager step (the planner does not model torch.compile)"} if row.torch_compile else {}
    keywords, options = planner_keywords(row, opts)
    worst = estimate_gpt_memory(**keywords, **options)
    result = {
        **note,
        "worst_case_bytes": worst.traced_peak_bytes,
        "worst_case_peak_gib": worst.peak_gib,
        "worst_case_shapes": {k: worst.settings[k] for k in ("max_audio_length", "text_tokens")},
    }
    if shapes:
        settings = step_settings(TrainArguments(**keywords), options)
        settings = replace(
            settings,
            batch_size=shapes["batch_size"],
            audio_samples=shapes["audio_samples"],
            text_tokens=shapes["text_tokens"],
            conditioning_samples=shapes["conditioning_samples"],
        )
        result["same_shapes_bytes"] = sum(trace_step(settings).peak()[1].values())
    return result


# --- the parent: rows, planner, table ------------------------------------------------------------------


def run_in_subprocess(
    index: int, opts: argparse.Namespace, log_dir: Path, timeout: float | None = None
) -> dict[str, Any]:
    """One row in its own process (its peak is its own); past `timeout` seconds it is killed, an error row."""
    result = log_dir / f"row-{index}.json"
    command = [
        sys.executable,
        __file__,
        "--only-row",
        str(index),
        "--result-file",
        str(result),
        "--device",
        opts.device,
        "--batch",
        str(opts.batch),
        "--warmup",
        str(opts.warmup),
        "--steps",
        str(opts.steps),
        "--precision",
        opts.precision,
        "--model-dir",
        str(opts.model_dir),
        "--version",
        opts.version,
        "--train-csv",
        str(opts.train_csv),
        "--eval-csv",
        str(opts.eval_csv),
    ]
    command += (["--no-epoch2"] if not opts.epoch2 else []) + (["--leaner-breakdown"] if opts.leaner_breakdown else [])
    command += ["--extra-rows"] if opts.extra_rows else []
    command += ["--flops"] if opts.flops else []
    command += ["--batches", *map(str, opts.batches)] if opts.batches else []
    command += ["--mixed-train-csv", str(opts.mixed_train_csv)] if opts.mixed_train_csv else []
    log = log_dir / f"row-{index}.log"
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:
        try:
            code = subprocess.run(
                command, stdout=handle, stderr=subprocess.STDOUT, check=False, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s (its time budget)"}
    if code != 0 or not result.is_file():
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        return {"error": f"exit {code}: {' / '.join(tail)[-300:]}"}
    record = json.loads(result.read_text(encoding="utf-8"))
    record["row_wall_s"] = time.perf_counter() - started
    return record


def all_rows(opts: argparse.Namespace) -> list[Row]:
    return ROWS + (BREAKDOWN if opts.leaner_breakdown else []) + (EXTRA if opts.extra_rows else [])


def measure_rows(opts: argparse.Namespace) -> list[dict[str, Any]]:
    rows = all_rows(opts)
    chosen = set(opts.rows) if opts.rows else set(range(len(rows)))
    previous = {r["name"]: r for r in json.loads(opts.merge.read_text())["rows"]} if opts.merge else {}
    records = []
    with tempfile.TemporaryDirectory() as logs:
        for index, row in enumerate(rows):
            if index not in chosen and row.name in previous:
                records.append(previous[row.name])
                continue
            reason = skip_reason(row, opts.device_type)
            if index not in chosen or reason:
                records.append({"name": row.name, "row": asdict(row), "skipped": reason or "not run (--rows)"})
                continue
            print(f"... {row.name} (batch {opts.batch}); load {common.load_average()}", flush=True)
            record = {"name": row.name, "row": asdict(row), **run_in_subprocess(index, opts, Path(logs))}
            earlier = previous.get(row.name, {})
            if "planner" in earlier and earlier.get("shapes") == record.get("shapes"):
                record["planner"] = earlier["planner"]  # the same settings and shapes: the same plan
            print(f"    {summary(record)}", flush=True)
            records.append(record)
    if opts.planner:
        for row, record in zip(rows, records):
            if "skipped" not in record and "planner" not in record:
                print(f"... planner: {row.name}", flush=True)
                record["planner"] = plan(row, opts, record.get("shapes"))
    return records


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    parser.add_argument("--full-size", action="store_true", help="CPU: the full-size model (slow). GPU: the default.")
    parser.add_argument("--tiny", action="store_true", help="GPU: the tiny model (a quick check).")
    parser.add_argument("--batch", type=int, default=None, help="Clips per step (default 8 on a GPU, 2 on a CPU).")
    parser.add_argument("--warmup", type=int, default=None, help="Untimed steps first (default 3 GPU, 1 CPU).")
    parser.add_argument("--steps", type=int, default=None, help="Timed steps (default 10 GPU, 2 CPU).")
    parser.add_argument(
        "--precision",
        default="auto",
        choices=("auto", "bf16", "fp16"),
        help="For the mixed-precision rows (auto: BF16 on Ampere+, FP32 on a CPU).",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help=f"Where the model and clips are built once (default {common.default_model_dir()}).",
    )
    parser.add_argument("--leaner-breakdown", action="store_true", help="Also each leaner saving alone.")
    parser.add_argument("--extra-rows", action="store_true", help="Also LoRA, length grouping, torch.compile.")
    parser.add_argument("--flops", action="store_true", help="Count each row's FLOPs on one more step.")
    parser.add_argument("--batches", type=int, nargs="+", default=None, help="Several batch sizes per row process.")
    parser.add_argument("--rows", type=int, nargs="+", default=None, help="Run only these rows (0-based).")
    parser.add_argument("--merge", type=Path, default=None, help="Keep the other rows from this earlier .json.")
    parser.add_argument("--no-epoch2", dest="epoch2", action="store_false", help="Skip the cached-codes timing.")
    parser.add_argument("--no-planner", dest="planner", action="store_false", help="Skip the planner's columns.")
    parser.add_argument("--out", type=Path, default=None, help="Also write the tables (and a .json beside them).")
    for internal in ("--only-row", "--result-file", "--version", "--train-csv", "--eval-csv", "--mixed-train-csv"):
        parser.add_argument(internal, default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    gpu = opts.device == "cuda"
    if gpu and not torch.cuda.is_available():
        parser.error("no CUDA GPU: use --device cpu")
    opts.device_type = opts.device
    opts.full_size = (gpu and not opts.tiny) or opts.full_size
    opts.batch = (opts.batches or [None])[0] or opts.batch or (8 if gpu else 2)
    opts.warmup = opts.warmup if opts.warmup is not None else (3 if gpu else 1)
    opts.steps = opts.steps or (10 if gpu else 2)
    opts.model_dir = (opts.model_dir or common.default_model_dir()).resolve()
    return opts


def prepare(opts: argparse.Namespace) -> None:
    """The model folder and the clips (built once under --model-dir)."""
    opts.model_dir.mkdir(parents=True, exist_ok=True)
    opts.version = common.ensure_model(opts.model_dir, opts.full_size)
    batches = opts.warmup + opts.steps + 1
    clips = batches * max(opts.batches or [opts.batch])
    folder = opts.model_dir / f"bench-clips-{clips}"
    opts.train_csv, opts.eval_csv = common.write_dataset(folder, clips, 2)
    if opts.extra_rows:  # the length-grouping rows: LJSpeech-like spread of lengths, twice the clips (epoch's end)
        mixed = opts.model_dir / f"bench-mixed-clips-{2 * clips}"
        opts.mixed_train_csv, _ = common.write_dataset(mixed, 2 * clips, 2, seconds=(1.0, 11.5))


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    if opts.only_row is not None:
        record = run_row(all_rows(opts)[int(opts.only_row)], opts)
        Path(opts.result_file).write_text(json.dumps(record), encoding="utf-8")
        return 0
    prepare(opts)
    records = measure_rows(opts)
    meta = metadata(opts, records)
    text = tables(records, meta)
    print("\n" + text)
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text, encoding="utf-8")
        opts.out.with_suffix(".json").write_text(
            json.dumps({"meta": meta, "rows": records}, indent=2), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
