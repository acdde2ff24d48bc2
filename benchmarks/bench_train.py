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
+ checkpointing, all three, all three + leaner steps (train_gpt's default with TF32 off), + TF32/cuDNN
benchmark, + 8-bit AdamW. --leaner-breakdown adds each leaner saving alone on top of "all three".
Peaks: on a GPU the CUDA allocator's (max_memory_allocated, read before the metrics logger resets it);
on a CPU the CPU allocator's own accounting of one extra step (profiler memory events), with the
process's peak RSS beside it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
import torch

GIB = 1024**3


@dataclass(frozen=True)
class Row:
    name: str
    grad_checkpoint: bool
    sdpa: bool
    mixed_precision: bool
    leaner: bool  # TrainingOptimizer(leaner_steps=...); False also means no DVAE code cache, HiFi-GAN on the GPU
    tf32: bool = False  # train_gpt's enable_tf32
    optimizer: str = "adamw"
    extras: tuple[str, ...] = ()  # one leaner saving alone, on top of leaner=False: gelu | conditioning | fused_adamw
    cuda_only: str = ""  # why the row means nothing without a CUDA GPU


_ALL = (True, True, True)
ROWS = [
    Row("baseline (coqui's step as shipped)", False, False, False, leaner=False),
    Row("+ SDPA", False, True, False, leaner=False),
    Row("+ mixed precision", False, False, True, leaner=False),
    Row("+ checkpointing", True, False, False, leaner=False),
    Row("all three", *_ALL, leaner=False),
    Row("all three + leaner steps", *_ALL, leaner=True),
    Row(
        "+ TF32/cuDNN benchmark (train_gpt's default)",
        *_ALL,
        leaner=True,
        tf32=True,
        cuda_only="TF32 and cuDNN benchmark exist only on CUDA GPUs (Ampere+)",
    ),
    Row(
        "+ 8-bit AdamW",
        *_ALL,
        leaner=True,
        tf32=True,
        optimizer="adamw_8bit",
        cuda_only="bitsandbytes' 8-bit AdamW runs on CUDA only",
    ),
]
BREAKDOWN = [
    Row("all three + fused GELU only", *_ALL, leaner=False, extras=("gelu",)),
    Row("all three + checkpointed conditioning only", *_ALL, leaner=False, extras=("conditioning",)),
    Row(
        "all three + fused AdamW only",
        *_ALL,
        leaner=False,
        extras=("fused_adamw",),
        cuda_only="the fused AdamW kernel is used on CUDA only",
    ),
]


def skip_reason(row: Row, device: str) -> str:
    if row.cuda_only and device != "cuda":
        return f"skipped: no CUDA GPU here ({row.cuda_only})"
    if row.optimizer == "adamw_8bit" and importlib.util.find_spec("bitsandbytes") is None:
        return "skipped: bitsandbytes is not installed (pip install bitsandbytes==0.50.2)"
    return ""


# --- one row, in its own process -------------------------------------------------------------------------


def patch_optimizer(row: Row) -> None:
    """Make the product's build_model apply the row's TrainingOptimizer (its leaner_steps is not an argument
    of train_gpt), plus one leaner saving alone for the breakdown rows."""
    import utils.training.setup as setup_module
    from utils.training import optimizations as o

    class RowOptimizer(o.TrainingOptimizer):
        def apply(self, model: Any, config: Any) -> o.OptimizationReport:
            report = super().apply(model, config)
            if "gelu" in row.extras:
                o.configure_activation(o.gpt_transformer(model))
            if "conditioning" in row.extras:
                o.configure_conditioning_checkpointing(model.xtts.gpt, True)
            if "fused_adamw" in row.extras and self.gpu.available:
                o.configure_optimizer(config, fused=True, eight_bit=False)
            return report

    setup_module.TrainingOptimizer = lambda *a, **k: RowOptimizer(*a, **{**k, "leaner_steps": row.leaner})


def build_setup(row: Row, opts: argparse.Namespace, run_root: Path) -> Any:
    """The product's training setup for this row (train_gpt's path, minus the run record)."""
    from utils.data.validation import validate_dataset
    from utils.model.base_models import ensure_base_model
    from utils.text.frontend import TextFrontEnd
    from utils.training.arguments import TrainArguments
    from utils.training.metrics import MetricsLogger
    from utils.training.run_record import METRICS_FILE, create_run_dir
    from utils.training.setup import build_training_setup

    patch_optimizer(row)
    args = TrainArguments(
        version=opts.version,
        models_dir=str(opts.model_dir),
        train_csv=str(opts.train_csv),
        eval_csv=str(opts.eval_csv),
        output_path=str(run_root),
        num_epochs=1,
        batch_size=opts.batch,
        grad_acumm=1,
        precision=opts.precision,
        enable_tf32=row.tf32,
        optimizer=row.optimizer,
        enable_grad_checkpoint=row.grad_checkpoint,
        enable_sdpa=row.sdpa,
        enable_mixed_precision=row.mixed_precision,
        num_workers=0,
        print_step=1_000_000,
        save_step=10_000_000,
    )
    base = ensure_base_model(args.version, args.models_dir)
    report = validate_dataset(args.train_csv, args.eval_csv, "en", args.max_audio_length)
    run_dir = create_run_dir(run_root, "bench")
    steps = max(1, report.train_count // opts.batch)
    metrics = MetricsLogger(run_dir / METRICS_FILE, batch_size=opts.batch, steps_per_epoch=steps, total_steps=steps)
    return build_training_setup(args, base, report, TextFrontEnd("en"), run_dir, metrics)


def optimizer_kernel(optimizer: Any, cuda: bool) -> str:
    """AdamW's implementation: torch picks foreach on CUDA and the per-tensor loop on a CPU unless told."""
    if optimizer.defaults.get("fused"):
        return "fused"
    foreach = optimizer.defaults.get("foreach")
    return "foreach" if foreach or (foreach is None and cuda) else "for-loop"


def evidence(trainer: Any) -> dict[str, Any]:
    """What the row really runs, read back from the model, the config, torch and the optimizer."""
    from utils.training.optimizations import conditioning_modules, gpt_transformer

    model = trainer.model
    gpt2 = gpt_transformer(model)
    optimizer = trainer.optimizer[0]
    return {
        "precision": trainer.config.precision if trainer.config.mixed_precision else "fp32",
        "attention": gpt2.config._attn_implementation,
        "checkpointed_blocks": f"{sum(getattr(b, 'gradient_checkpointing', False) for b in gpt2.h)}/{len(gpt2.h)}",
        "conditioning_checkpointed": all("forward" in m.__dict__ for m in conditioning_modules(model.xtts.gpt)),
        "activation": type(gpt2.h[0].mlp.act).__name__,
        "optimizer": f"{type(optimizer).__name__} ({optimizer_kernel(optimizer, trainer.use_cuda)})",
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "hifigan_on": next(model.xtts.hifigan_decoder.parameters()).device.type,
    }


def run_row(row: Row, opts: argparse.Namespace) -> dict[str, Any]:
    """Build, warm up, time, and measure the peak of one row; a JSON-able record."""
    from utils.memory_plan.measure import measure_cpu_step, model_and_optimizer_tensors, resident_bytes
    from utils.training.run import torch_settings_restored

    load_before = common.load_average()
    with tempfile.TemporaryDirectory() as run_root, torch_settings_restored():
        started = time.perf_counter()
        setup = build_setup(row, opts, Path(run_root))
        setup_s = time.perf_counter() - started
        trainer, model = setup.trainer, setup.trainer.model
        cuda = trainer.use_cuda
        if cuda and not row.leaner:
            model.xtts.hifigan_decoder.to("cuda")  # coqui kept it on the GPU; the product moves it off
        loader = model.get_data_loader(trainer.config, is_eval=True, samples=trainer.train_samples, verbose=False)
        batches = list(loader)  # in order, one pass: distinct clips in every batch
        needed = opts.warmup + opts.steps + (0 if cuda else 1)
        if len(batches) < needed:
            raise RuntimeError(f"{len(batches)} batches collated, {needed} needed: the dataset is too small.")
        peaks: list[tuple[int, int]] = []
        if cuda:  # read each step's peak before the metrics logger resets it for its record
            trainer.callbacks.callbacks_on_train_step_end.insert(
                0, lambda _: peaks.append((torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()))
            )
        model.on_train_epoch_start(trainer)

        def step(batch: dict[str, Any]) -> tuple[float, float, float]:
            """(wall seconds, CPU seconds of all this process's threads, loss) of one train_step."""
            if not row.leaner:
                model.code_cache.clear()  # coqui's step encoded every clip with the DVAE at every epoch
            begin, cpu_begin = time.perf_counter(), time.process_time()
            _, losses = trainer.train_step(dict(batch), len(batches), 0, time.time())
            if cuda:
                torch.cuda.synchronize()
            return time.perf_counter() - begin, time.process_time() - cpu_begin, float(losses["loss"])

        for batch in batches[: opts.warmup]:
            step(batch)
        timed = batches[opts.warmup : opts.warmup + opts.steps]
        results = [step(batch) for batch in timed]
        times = [r[0] for r in results]
        record: dict[str, Any] = {
            "row": asdict(row),
            "batch": opts.batch,
            "setup_s": setup_s,
            "step_times": times,
            "step_s": sum(times) / len(times),
            "samples_per_s": opts.batch * len(times) / sum(times),
            "step_cpu_s": sum(r[1] for r in results) / len(results),
            "loss": results[-1][2],
            "evidence": evidence(trainer),
        }
        if cuda:
            timed_peaks = peaks[opts.warmup : opts.warmup + opts.steps]
            record["gpu_peak_bytes"] = max(p[0] for p in timed_peaks)
            record["gpu_reserved_bytes"] = max(p[1] for p in timed_peaks)
        if row.leaner and opts.epoch2:  # the same clips again: their DVAE codes come from the cache
            epoch2 = [step(batch) for batch in timed]
            record["epoch2_step_s"] = sum(r[0] for r in epoch2) / len(epoch2)
            record["epoch2_cpu_s"] = sum(r[1] for r in epoch2) / len(epoch2)
        measured = timed
        if not cuda:
            extra = batches[opts.warmup + opts.steps]
            resident = resident_bytes([*model_and_optimizer_tensors(model, trainer.optimizer[0]), *extra.values()])
            peak = measure_cpu_step(lambda: step(extra), resident)
            record.update(cpu_allocator_peak_bytes=peak.peak_bytes, cpu_resident_bytes=peak.resident_bytes)
            measured = [*timed, extra]
        record["shapes"] = {
            "batch_size": opts.batch,
            "audio_samples": max(b["wav"].shape[-1] for b in measured),
            "text_tokens": max(b["padded_text"].shape[-1] for b in measured),
            "conditioning_samples": max(b["conditioning"].shape[-1] for b in measured),
        }
        record["machine"] = common.machine()  # torch threads as the row ran (the product sets them for training)
        setup.release()
    record["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    record["load"] = f"{load_before} -> {common.load_average()}"
    return record


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
    from utils.training.arguments import TrainArguments

    if set(row.extras) & {"gelu", "conditioning"}:
        return {"note": "the planner models the leaner steps as one group"}
    keywords, options = planner_keywords(row, opts)
    worst = estimate_gpt_memory(**keywords, **options)
    result = {
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


def run_in_subprocess(index: int, opts: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
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
    log = log_dir / f"row-{index}.log"
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:
        code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0 or not result.is_file():
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        return {"error": f"exit {code}: {' / '.join(tail)[-300:]}"}
    record = json.loads(result.read_text(encoding="utf-8"))
    record["row_wall_s"] = time.perf_counter() - started
    return record


def all_rows(opts: argparse.Namespace) -> list[Row]:
    return ROWS + (BREAKDOWN if opts.leaner_breakdown else [])


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


def summary(record: dict[str, Any]) -> str:
    if "error" in record:
        return record["error"]
    peak = record.get("gpu_peak_bytes") or record.get("cpu_allocator_peak_bytes") or 0
    return f"{record['step_s']:.3f} s/step, {record['samples_per_s']:.2f} samples/s, peak {peak / GIB:.2f} GiB"


def measured_peak(record: dict[str, Any]) -> int | None:
    return record.get("gpu_peak_bytes") or record.get("cpu_allocator_peak_bytes")


def fmt(value: Any, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + suffix


def speed_rows(records: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The speed table: the mean of the timed steps, and the fastest one (on a shared machine the other work
    stretches some steps; the fastest is the least disturbed)."""
    header = [
        "configuration",
        "precision",
        "attention",
        "checkpointed",
        "GELU",
        "optimizer",
        "step (s)",
        "fastest step (s)",
        "samples/s",
        "speed-up",
        "epoch 2+ step (s)",
        "load avg",
    ]
    base = next((r for r in records if "step_s" in r), None)
    rows = []
    for r in records:
        if "step_s" not in r:
            rows.append([r["name"], r.get("skipped") or r.get("error", "")] + [""] * (len(header) - 2))
            continue
        e = r["evidence"]
        ckpt = e["checkpointed_blocks"] + (" + cond." if e["conditioning_checkpointed"] else "")
        rows.append(
            [
                r["name"],
                e["precision"],
                e["attention"],
                ckpt,
                e["activation"],
                e["optimizer"],
                f"{r['step_s']:.2f}",
                f"{min(r['step_times']):.2f}",
                f"{r['samples_per_s']:.3f}",
                fmt(base and base["step_s"] / r["step_s"], ".2f", "x"),
                fmt(r.get("epoch2_step_s"), ".2f"),
                r["load"],
            ]
        )
    return header, rows


def memory_rows(records: list[dict[str, Any]], gpu: bool) -> tuple[list[str], list[list[str]]]:
    header = [
        "configuration",
        "measured peak (GiB)",
        "vs baseline",
        "planner, same shapes (GiB)",
        "planner error",
        "planner, worst case (GiB)",
        "reserved (GiB)" if gpu else "process peak RSS (GiB)",
        "note",
    ]
    base = next((measured_peak(r) for r in records if measured_peak(r)), None)
    rows = []
    for r in records:
        if "step_s" not in r:
            continue
        peak, p = measured_peak(r), r.get("planner", {})
        same, worst = p.get("same_shapes_bytes"), p.get("worst_case_bytes")
        rows.append(
            [
                r["name"],
                fmt(peak and peak / GIB, ".2f"),
                fmt(peak and base and peak / base, ".0%"),
                fmt(same and same / GIB, ".2f"),
                fmt(same and peak and same / peak - 1, "+.1%"),
                fmt(worst and worst / GIB, ".2f"),
                fmt((r.get("gpu_reserved_bytes") or r.get("peak_rss_bytes")) / GIB, ".2f"),
                p.get("note", ""),
            ]
        )
    return header, rows


def tables(records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    gpu = meta["device_type"] == "cuda"
    kind = "CUDA allocator, max_memory_allocated" if gpu else "CPU allocator, profiler memory events of one step"
    return "\n".join(
        [
            f"Device: {meta['device']}  ",
            f"Model: {meta['model']}; batch {meta['batch']}, grad_acumm 1; clips {meta['clips']}  ",
            f"{meta['versions']}; {meta['warmup']} warm-up + {meta['steps']} timed steps per row, each row in its own "
            f"process; {meta['date']}  ",
            f"Command: `{meta['command']}`",
            "",
            common.markdown_table(*speed_rows(records)),
            "",
            f"Peak memory, measured ({kind}) and the planner's:",
            "",
            common.markdown_table(*memory_rows(records, gpu)),
            "",
        ]
    )


def metadata(opts: argparse.Namespace, records: list[dict[str, Any]]) -> dict[str, Any]:
    shapes = next((r["shapes"] for r in records if "shapes" in r), {})
    seconds = shapes.get("audio_samples", 0) / common.SAMPLE_RATE
    clips = (
        f"10.8-11.5 s (longest padded {seconds:.2f} s), text up to {shapes.get('text_tokens')} tokens "
        f"(tiny BPE vocab), conditioning {shapes.get('conditioning_samples', 0) / common.SAMPLE_RATE:.1f} s"
    )
    if opts.device_type == "cuda":
        device = f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    else:
        device = next((r["machine"] for r in records if "machine" in r), common.machine())
    size = (
        "full size: 30 layers, width 1024, 16 heads, 6681 text tokens, random weights"
        if opts.full_size
        else "tiny (2 layers, width 64)"
    )
    versions = ", ".join(f"{k} {v}" for k, v in common.library_versions().items())
    return {
        "device": device,
        "device_type": opts.device_type,
        "model": f"XTTS v2 GPT {size}",
        "batch": opts.batch,
        "clips": clips,
        "versions": versions,
        "warmup": opts.warmup,
        "steps": opts.steps,
        "date": common.now(),
        "command": "python " + " ".join(sys.argv),
    }


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
    parser.add_argument("--rows", type=int, nargs="+", default=None, help="Run only these rows (0-based).")
    parser.add_argument("--merge", type=Path, default=None, help="Keep the other rows from this earlier .json.")
    parser.add_argument("--no-epoch2", dest="epoch2", action="store_false", help="Skip the cached-codes timing.")
    parser.add_argument("--no-planner", dest="planner", action="store_false", help="Skip the planner's columns.")
    parser.add_argument("--out", type=Path, default=None, help="Also write the tables (and a .json beside them).")
    for internal in ("--only-row", "--result-file", "--version", "--train-csv", "--eval-csv"):
        parser.add_argument(internal, default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    gpu = opts.device == "cuda"
    if gpu and not torch.cuda.is_available():
        parser.error("no CUDA GPU: use --device cpu")
    opts.device_type = opts.device
    opts.full_size = (gpu and not opts.tiny) or opts.full_size
    opts.batch = opts.batch or (8 if gpu else 2)
    opts.warmup = opts.warmup if opts.warmup is not None else (3 if gpu else 1)
    opts.steps = opts.steps or (10 if gpu else 2)
    opts.model_dir = (opts.model_dir or common.default_model_dir()).resolve()
    return opts


def prepare(opts: argparse.Namespace) -> None:
    """The model folder and the clips (built once under --model-dir)."""
    opts.model_dir.mkdir(parents=True, exist_ok=True)
    opts.version = common.ensure_model(opts.model_dir, opts.full_size)
    batches = opts.warmup + opts.steps + 1
    folder = opts.model_dir / f"bench-clips-{batches * opts.batch}"
    opts.train_csv, opts.eval_csv = common.write_dataset(folder, batches * opts.batch, 2)


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
