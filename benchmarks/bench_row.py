"""What a benchmark row is (the settings it turns on) and how one row runs, in its own process: the product's
training setup built for the row, real batches collated, coqui's Trainer.train_step timed, its peak taken."""

from __future__ import annotations

import argparse
import importlib.util
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import bench_common as common
import torch


@dataclass(frozen=True)
class Row:
    name: str
    grad_checkpoint: bool
    sdpa: bool
    mixed_precision: bool
    leaner: bool  # TrainingOptimizer(leaner_steps=...); False also means no DVAE code cache, HiFi-GAN on the GPU
    tf32: bool = False  # train_gpt's enable_tf32
    optimizer: str = "adamw"
    extras: tuple[str, ...] = ()  # one saving alone: gelu | conditioning | fused_adamw (leaner=False) | cudnn_benchmark
    cuda_only: str = ""  # why the row means nothing without a CUDA GPU
    lora_rank: int = 0  # train_gpt's lora_rank (0: the whole GPT)
    torch_compile: bool = False  # train_gpt's torch_compile
    loader: str = ""  # "": the clips in order; random | grouped: the training loader over mixed-length clips


_ALL = (True, True, True)
DEFAULTS = "train_gpt's defaults (all three + leaner steps + TF32)"
ROWS = [
    Row("baseline (coqui's step as shipped)", False, False, False, leaner=False),
    Row("+ SDPA", False, True, False, leaner=False),
    Row("+ mixed precision", False, False, True, leaner=False),
    Row("+ checkpointing", True, False, False, leaner=False),
    Row("all three", *_ALL, leaner=False),
    Row("all three + leaner steps", *_ALL, leaner=True),
    Row(
        DEFAULTS,
        *_ALL,
        leaner=True,
        tf32=True,
        cuda_only="TF32 exists only on CUDA GPUs (Ampere+)",
    ),
    Row(
        "+ 8-bit AdamW",
        *_ALL,
        leaner=True,
        tf32=True,
        optimizer="adamw_8bit",
    ),
    Row("+ LoRA rank 16 (PEFT, c_attn/c_proj/c_fc)", *_ALL, leaner=True, tf32=True, lora_rank=16),
]
# The GPU table's rows beyond ROWS (benchmarks/gpu_table.py, bench_train.py --extra-rows).
EXTRA = [
    Row("mixed lengths (1-11.5 s), random batches", *_ALL, leaner=True, tf32=True, loader="random"),
    Row("mixed lengths (1-11.5 s), + length grouping", *_ALL, leaner=True, tf32=True, loader="grouped"),
    Row(
        "mixed lengths, length grouping + cuDNN benchmark",
        *_ALL,
        leaner=True,
        tf32=True,
        loader="grouped",
        extras=("cudnn_benchmark",),
        cuda_only="cuDNN's benchmark mode exists only on CUDA GPUs",
    ),
    Row("+ torch.compile (GPT blocks)", *_ALL, leaner=True, tf32=True, torch_compile=True),
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
    import utils.training.loop.setup as setup_module
    from utils.options import optimizations as o

    class RowOptimizer(o.TrainingOptimizer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "leaner_steps": row.leaner})

        def apply(self, model: Any, config: Any) -> o.OptimizationReport:
            report = super().apply(model, config)
            if "gelu" in row.extras:
                o.configure_activation(o.gpt_transformer(model))
            if "conditioning" in row.extras:
                o.configure_conditioning_checkpointing(model.xtts.gpt, True)
            if "fused_adamw" in row.extras and self.gpu.available:
                o.configure_optimizer(config, fused=True, eight_bit=False)
            if "cudnn_benchmark" in row.extras and self.gpu.available:  # off in the product until it wins
                config.cudnn_benchmark = True
            return report

    setup_module.TrainingOptimizer = RowOptimizer  # build_model calls TrainingOptimizer.from_arguments


def build_setup(row: Row, opts: argparse.Namespace, run_root: Path) -> Any:
    """The product's training setup for this row (train_gpt's path, minus the run record)."""
    from utils.data.validation import validate_dataset
    from utils.model.base_models import ensure_base_model
    from utils.options.arguments import TrainArguments
    from utils.text.frontend import TextFrontEnd
    from utils.training.loop.setup import build_training_setup, trainer_parts
    from utils.training.recording.metrics import MetricsLogger
    from utils.training.recording.run_record import METRICS_FILE, create_run_dir

    patch_optimizer(row)
    args = TrainArguments(
        version=opts.version,
        models_dir=str(opts.model_dir),
        train_csv=str(opts.mixed_train_csv if row.loader else opts.train_csv),
        eval_csv=str(opts.eval_csv),
        output_path=str(run_root),
        num_epochs=1,
        batch_size=opts.batch,
        grad_acumm=1,
        precision=opts.precision,
        enable_tf32=row.tf32,
        optimizer=row.optimizer,
        lora_rank=row.lora_rank,
        enable_grad_checkpoint=row.grad_checkpoint,
        enable_sdpa=row.sdpa,
        enable_mixed_precision=row.mixed_precision,
        num_workers=0,
        print_step=1_000_000,
        save_step=10_000_000,
        torch_compile=row.torch_compile,
        length_grouping=row.loader == "grouped",
    )
    base = ensure_base_model(args.version, args.models_dir)
    report = validate_dataset(args.train_csv, args.eval_csv, "en", args.max_audio_length)
    run_dir = create_run_dir(run_root, "bench")
    steps = max(1, report.train_count // opts.batch)
    metrics = MetricsLogger(run_dir / METRICS_FILE, batch_size=opts.batch, steps_per_epoch=steps, total_steps=steps)
    return build_training_setup(args, base, report, TextFrontEnd("en"), run_dir, trainer_parts(args, run_dir, metrics))


def optimizer_kernel(optimizer: Any, cuda: bool) -> str:
    """AdamW's implementation: torch picks foreach on CUDA and the per-tensor loop on a CPU unless told."""
    if optimizer.defaults.get("fused"):
        return "fused"
    foreach = optimizer.defaults.get("foreach")
    return "foreach" if foreach or (foreach is None and cuda) else "for-loop"


def evidence(trainer: Any) -> dict[str, Any]:
    """What the row really runs, read back from the model, the config, torch and the optimizer."""
    from utils.options.optimizations import conditioning_modules, gpt_transformer

    model = trainer.model
    gpt2 = gpt_transformer(model)
    optimizer = trainer.optimizer[0]
    return {
        "precision": trainer.config.precision if trainer.config.mixed_precision else "fp32",
        "attention": gpt2.config._attn_implementation,
        "checkpointed_blocks": f"{sum(getattr(b, 'gradient_checkpointing', False) for b in gpt2.h)}/{len(gpt2.h)}",
        "conditioning_checkpointed": all("forward" in m.__dict__ for m in conditioning_modules(model.xtts.gpt)),
        "activation": type(gpt2.h[0].mlp.act).__name__,
        "compiled_blocks": f"{sum(b._compiled_call_impl is not None for b in gpt2.h)}/{len(gpt2.h)}",
        "optimizer": f"{type(optimizer).__name__} ({optimizer_kernel(optimizer, trainer.use_cuda)})",
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "hifigan_on": next(model.xtts.hifigan_decoder.parameters()).device.type,
    }


def collate(trainer: Any, needed: int, row: Row | None = None) -> list[dict[str, Any]]:
    """The run's training clips collated as training collates them: the product's training loader, one epoch's
    batches (every clip once, so distinct clips in every batch; random batches, or length-grouped ones for a
    grouping row). Its dataset cuts each clip's conditioning slice at a random offset, as every step of a run
    sees it; the eval dataset's slice starts at offset 0, where coqui's mask of the conditioning segment (in
    the wrong units, on a batch's last row) covers a whole ~11 s clip: a NaN mel loss at batch 1."""
    model = trainer.model  # its group_by_length is the row's length_grouping (build_setup)
    loader = model.get_data_loader(trainer.config, is_eval=False, samples=trainer.train_samples, verbose=False)
    batches = list(loader)
    if len(batches) < needed:
        raise RuntimeError(f"{len(batches)} batches collated, {needed} needed: the dataset is too small.")
    return batches


def stepper(row: Row, trainer: Any, batches: int) -> Callable[[dict[str, Any]], tuple[float, float, float]]:
    """One train_step of a batch: (wall seconds, CPU seconds of all this process's threads, loss)."""
    model, cuda = trainer.model, trainer.use_cuda

    def step(batch: dict[str, Any]) -> tuple[float, float, float]:
        # coqui's GPT divides cond_idxs in place (on a CPU, in the loader's own tensor): a batch timed twice
        # (epoch 2, FLOPs) gets a fresh copy each time.
        batch = {**batch, "cond_idxs": batch["cond_idxs"].clone()}
        if not row.leaner:
            model.code_cache.clear()  # coqui's step encoded every clip with the DVAE at every epoch
        begin, cpu_begin = time.perf_counter(), time.process_time()
        _, losses = trainer.train_step(batch, batches, 0, time.time())
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - begin, time.process_time() - cpu_begin, float(losses["loss"])

    return step


def timing(results: list[tuple[float, float, float]], batch: int) -> dict[str, Any]:
    times = [r[0] for r in results]
    ordered = sorted(times)
    return {
        "step_times": times,
        "step_s": sum(times) / len(times),
        # A single slow step (an allocator segment grown, a new shape's kernels) moves the mean of a few steps.
        "median_step_s": (ordered[(len(times) - 1) // 2] + ordered[len(times) // 2]) / 2,
        "samples_per_s": batch * len(times) / sum(times),
        "step_cpu_s": sum(r[1] for r in results) / len(results),
        "loss": results[-1][2],
    }


def shapes(batch: int, measured: list[dict[str, Any]]) -> dict[str, int]:
    """The longest audio, text and conditioning of the measured batches (what the planner is asked for)."""
    return {
        "batch_size": batch,
        "audio_samples": max(b["wav"].shape[-1] for b in measured),
        "text_tokens": max(b["padded_text"].shape[-1] for b in measured),
        "conditioning_samples": max(b["conditioning"].shape[-1] for b in measured),
    }


def count_flops(step: Callable[[dict[str, Any]], Any], batch: dict[str, Any]) -> int:
    """The FLOPs one training step executes (torch's FlopCounterMode: matmuls, convolutions, attention; the
    recompute of checkpointed blocks included)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step(batch)
    return int(counter.get_total_flops())


def measure(row: Row, opts: argparse.Namespace, setup: Any, batch_size: int | None = None) -> dict[str, Any]:
    """Warm up, time, and take the peak of one row's built setup (at `batch_size` clips, default opts.batch)."""
    from utils.memory_check.step_measure import measure_cpu_step, model_and_optimizer_tensors, resident_bytes

    trainer, model = setup.trainer, setup.trainer.model
    cuda = trainer.use_cuda
    batch_size = batch_size or opts.batch
    trainer.config.batch_size = trainer.config.eval_batch_size = batch_size  # the training and the in-order loader
    if cuda and not row.leaner:
        model.xtts.hifigan_decoder.to("cuda")  # coqui kept it on the GPU; the product moves it off
    batches = collate(trainer, opts.warmup + opts.steps + (0 if cuda else 1), row)
    peaks: list[tuple[int, int]] = []
    callbacks = trainer.callbacks.callbacks_on_train_step_end
    callbacks[:] = [c for c in callbacks if not getattr(c, "bench_peak", False)]  # one per measure() call
    if cuda:  # each step's own peak: read at the step's end, then reset for the next step

        def read_peak(_: Any) -> None:
            peaks.append((torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()))
            torch.cuda.reset_peak_memory_stats()

        read_peak.bench_peak = True  # type: ignore[attr-defined]
        callbacks.insert(0, read_peak)
    model.on_train_epoch_start(trainer)
    step = stepper(row, trainer, len(batches))
    warmup_times = [step(batch)[0] for batch in batches[: opts.warmup]]
    timed = batches[opts.warmup : opts.warmup + opts.steps]
    record: dict[str, Any] = {**timing([step(batch) for batch in timed], batch_size), "evidence": evidence(trainer)}
    record["warmup_times"] = warmup_times
    if row.torch_compile:  # what the warm-up steps took beyond ordinary steps: compiling (and recompiling)
        record["compile_s"] = sum(warmup_times) - len(warmup_times) * record["step_s"]
    if cuda:
        timed_peaks = peaks[opts.warmup : opts.warmup + opts.steps]
        record["gpu_peak_bytes"] = max(p[0] for p in timed_peaks)
        record["gpu_reserved_bytes"] = max(p[1] for p in timed_peaks)
    if getattr(opts, "flops", False) and not row.torch_compile:  # the compiled step does the same math
        record["step_flops"] = count_flops(step, timed[0])
    if row.leaner and opts.epoch2:  # the same clips again: their DVAE codes come from the cache
        epoch2 = timing([step(batch) for batch in timed], batch_size)
        record["epoch2_step_s"], record["epoch2_cpu_s"] = epoch2["step_s"], epoch2["step_cpu_s"]
    measured = timed
    if not cuda:
        extra = batches[opts.warmup + opts.steps]
        resident = resident_bytes([*model_and_optimizer_tensors(model, trainer.optimizer[0]), *extra.values()])
        peak = measure_cpu_step(lambda: step(extra), resident)
        record.update(cpu_allocator_peak_bytes=peak.peak_bytes, cpu_resident_bytes=peak.resident_bytes)
        measured = [*timed, extra]
    record["shapes"] = shapes(batch_size, measured)
    return record


def measure_or_error(row: Row, opts: argparse.Namespace, setup: Any, batch_size: int) -> dict[str, Any]:
    """measure(); a batch that does not fit the GPU is an error of its own, the next batch size still runs."""
    try:
        return measure(row, opts, setup, batch_size)
    except torch.OutOfMemoryError as exc:
        setup.trainer.optimizer[0].zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return {"error": f"out of memory at batch {batch_size}: {str(exc)[:160]}"}


def run_row(row: Row, opts: argparse.Namespace) -> dict[str, Any]:
    """Build, warm up, time, and measure the peak of one row; a JSON-able record."""
    from utils.training.run import torch_settings_restored

    load_before = common.load_average()
    with tempfile.TemporaryDirectory() as run_root, torch_settings_restored():
        started = time.perf_counter()
        setup = build_setup(row, opts, Path(run_root))
        setup_s = time.perf_counter() - started
        batch_sizes = getattr(opts, "batches", None) or [opts.batch]
        results = {size: measure_or_error(row, opts, setup, size) for size in batch_sizes}
        record = {"row": asdict(row), "batch": batch_sizes[0], "setup_s": setup_s, **results[batch_sizes[0]]}
        if len(batch_sizes) > 1:  # one setup, several batch sizes (the GPU table): each with its own peak
            record["by_batch"] = {str(size): {"batch": size, **result} for size, result in results.items()}
        record["machine"] = common.machine()  # torch threads as the row ran (the product sets them for training)
        setup.release()
    record["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    record["load"] = f"{load_before} -> {common.load_average()}"
    return record
