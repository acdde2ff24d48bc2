"""`estimate_gpt_memory`: the peak GPU memory of each phase of a `train_gpt` run, with a breakdown, before training.

It takes the same keywords as `train_gpt`, builds the model those keywords would build (no weights:
fake tensors) and traces the training step and one batch of the eval pass (see `utils.memory_plan.trace`).
Traces are taken at two batch sizes and fitted per allocation, so every batch size is then known at once; fits
are cached per architecture and settings for the life of the process (a full-size fit takes 1-3 minutes on a
CPU, the tiny model's a few seconds). For the published architecture and Fit my GPU's option sets the fit is
shipped (`memory_model`): no trace. The scored evaluation and the checkpoint save are planned from the step's
resident memory (`run_phases`); the largest phase is the peak.

The peak is what PyTorch's allocator would hand out (`torch.cuda.max_memory_allocated`) plus the
CUDA overhead that never shows in it: the CUDA context, lazily loaded kernels and the cuBLAS
workspaces. Whether it fits is judged with a safety margin for the allocator's fragmentation.

The step planned is the longest batch the training sampler can produce. A batch is padded to its longest
clip, grouped by length or not, so the worst batch is `batch_size` clips padded to the longest training clip
(with length grouping that batch is full of clips that long; without it, any batch holding it is padded alike):
the longest of `clip_seconds` that the loader keeps (clips over `max_audio_length` are skipped), or, without
clip lengths, `max_audio_length` itself. Text is planned at the dataset's token limit, conditioning at 6 s.

Host RAM: while a checkpoint is written in the background, the writer holds a CPU copy of the saved state
(weights and optimizer state; at most one save in flight). It is planned beside the GPU figure
(`host_breakdown_gib`), and for a CPU run, whose step lives in the same RAM, it is part of what must fit.
"""

from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from utils.constants import XTTS_SAMPLE_RATE
from utils.device.gpu import GPUInfo, detect_gpu
from utils.device.memory import get_memory_stats
from utils.memory_plan import memory_model
from utils.memory_plan import tracker as t
from utils.memory_plan.architecture import resolve_architecture
from utils.memory_plan.estimate import (  # noqa: F401 - BREAKDOWN, GIB and the constants: imported from here too
    BREAKDOWN,
    CUDA_CONTEXT_BYTES,
    CUDA_KERNELS_AND_WORKSPACES_BYTES,
    GIB,
    MIB,
    SAFETY_MARGIN,
    MemoryEstimate,
    make_estimate,
)
from utils.memory_plan.trace import BatchModel, DirectTraces, StepSettings
from utils.model.base_models import check_version_name
from utils.model.lora import parse_targets
from utils.options.arguments import TrainArguments, fold_precision_alias, option_of
from utils.options.input_files import check_input_files
from utils.options.optimizations import FUSED_ADAMW, TrainingOptimizer
from utils.options.plan_options import checked_plan_call
from utils.text.languages import canonical_language

MAX_BATCH = int(option_of("batch_size").maximum or 512)
PLANNER_OPTIONS = (
    "device",
    "clip_seconds",
    "fused_adamw",
    "leaner_steps",
    "frozen_models_on_gpu",
    "gpu",
    "free_bytes",
    "cuda_overhead_bytes",
    "safety_margin",
    "progress_callback",
    "stop_event",
    "progress",  # a callable given a message while a configuration is traced (not shipped)
    "generated_rows",  # texts per scored evaluation (default run_phases.generated_rows(quality_eval))
    "decoder_on_gpu",  # the HiFi-GAN decoder and speaker encoder on the GPU in scored evaluations
    "whisper_on_gpu",
)
_FITS: OrderedDict[StepSettings, BatchModel | DirectTraces] = OrderedDict()
_FITS_LOCK = threading.Lock()
_FITS_KEPT = 32


def batch_model(
    settings: StepSettings, progress: Any = None
) -> tuple[BatchModel | DirectTraces | memory_model.ShippedFit, float]:
    """The batch fit for these settings (batch size ignored), and the seconds spent tracing now: the shipped memory
    model's when it has them (at once), else a traced fit, cached for the process. `progress(message)` hears of
    a trace before it starts (a full-size fit takes a minute or two on a CPU)."""
    shipped = memory_model.lookup(settings)
    if shipped is not None:
        return shipped, 0.0
    key = settings.key()
    with _FITS_LOCK:
        if key in _FITS:
            _FITS.move_to_end(key)
            return _FITS[key], 0.0
    if progress is not None:
        progress(
            f"Tracing the training step of {settings.architecture.layers} layers x {settings.architecture.width} "
            "at batch 2 and 3 (no shipped memory model for these settings; a full-size fit takes 1-3 minutes)"
        )
    try:
        fit: BatchModel | DirectTraces = BatchModel.calibrate(settings)
        fit.traces = []  # keep only the fitted series
    except t.PlanningError:
        fit = DirectTraces(settings)  # exact, one trace per batch size asked for
    with _FITS_LOCK:
        _FITS[key] = fit
        while len(_FITS) > _FITS_KEPT:
            _FITS.popitem(last=False)
    return fit, fit.seconds


def planned_gpu(gpu: GPUInfo | None = None) -> GPUInfo:
    """The GPU a plan is for: the one given, the detected one, else an assumed Ampere-or-newer GPU."""
    if gpu is not None:
        return gpu
    detected = detect_gpu()
    if detected.available:
        return detected
    return GPUInfo(
        available=True,
        name="a CUDA GPU (assumed: Ampere or newer)",
        capability=(8, 0),
        architecture="Ampere",
        total_memory_gb=0.0,
        bf16_native=True,
    )


def detected_free_bytes() -> int | None:
    """Free memory of the first GPU (all processes counted, via NVML: no CUDA context), or None."""
    stats = get_memory_stats()
    if stats.get("gpu_total_mb") is None or stats.get("gpu_used_mb") is None:
        return None
    return int((stats["gpu_total_mb"] - stats["gpu_used_mb"]) * MIB)


def _arguments(args: tuple, kwargs: dict[str, Any]) -> tuple[TrainArguments, dict[str, Any], Any]:
    """TrainArguments from train_gpt's positional and keyword arguments; planner options apart."""
    names = TrainArguments.positional_names()
    if len(args) > len(names):
        raise ValueError(f"At most {len(names)} positional arguments (as train_gpt); got {len(args)}.")
    given = dict(zip(names, args)) | kwargs
    options = {k: given.pop(k) for k in PLANNER_OPTIONS if k in given}
    unknown = sorted(set(given) - set(TrainArguments.__dataclass_fields__))
    if unknown:
        raise ValueError(
            f"Unknown option(s) {', '.join(unknown)}. Known: train_gpt's keywords "
            f"(utils.options.arguments.TrainArguments) and {', '.join(PLANNER_OPTIONS)}."
        )
    batch = given.get("batch_size", TrainArguments.batch_size)
    if batch == "auto":
        given["batch_size"] = 1
    arguments = TrainArguments(**given)
    check_input_files(arguments)
    check_version_name(arguments.version, arguments.models_dir or None)
    _check_clip_seconds(options.get("clip_seconds"))
    if options.get("device", "cuda") not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' (plan for a GPU) or 'cpu'; got {options['device']!r}.")
    return arguments, options, batch


def longest_clip_samples(max_audio_length: int, clip_seconds: Sequence[float] | None) -> int:
    """The longest clip a training batch can be padded to: the longest of `clip_seconds` (the training clips'
    durations) that the loader keeps (it skips clips over `max_audio_length`); `max_audio_length` when no
    lengths are given or none is kept."""
    if clip_seconds is None or isinstance(clip_seconds, (str, bytes)):
        return max_audio_length
    # A clip's duration is its frame count over the rate: round() recovers the frames.
    kept = [n for n in (round(float(s) * XTTS_SAMPLE_RATE) for s in clip_seconds) if 0 < n <= max_audio_length]
    return max(kept) if kept else max_audio_length


def _check_clip_seconds(value: Any) -> None:
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"clip_seconds must be a list of clip durations in seconds; got {type(value).__name__}.")
    bad = [v for v in value if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < 1e6]
    if bad:
        raise ValueError(f"clip_seconds must hold durations in seconds (numbers >= 0); got {bad[0]!r}.")


def step_settings(arguments: TrainArguments, options: dict[str, Any]) -> StepSettings:
    """The traced step for these arguments (batch size as given): the longest batch the sampler can produce,
    every clip padded to the longest training clip (`clip_seconds`, else max_audio_length), text at its limit."""
    from utils.constants import MAX_CONDITIONING_SAMPLES, MAX_TEXT_TOKENS, XTTS_LANGUAGES

    device = options.get("device", "cuda")
    gpu = planned_gpu(options.get("gpu")) if device == "cuda" else GPUInfo(available=False)
    leaner = bool(options.get("leaner_steps", True))
    planned = TrainingOptimizer.from_arguments(arguments, gpu=gpu, leaner_steps=leaner)
    choice = planned.precision_choice()
    arch = resolve_architecture(
        arguments.version,
        arguments.models_dir or None,
        arguments.custom_model,
        arguments.language,
        arguments.vocab_new_tokens,
    )
    return StepSettings(
        architecture=arch,
        batch_size=arguments.batch_size,
        audio_samples=longest_clip_samples(arguments.max_audio_length, options.get("clip_seconds")),
        text_tokens=MAX_TEXT_TOKENS,
        conditioning_samples=MAX_CONDITIONING_SAMPLES,
        grad_checkpoint=arguments.enable_grad_checkpoint,
        sdpa=arguments.enable_sdpa,
        precision=choice.precision if choice.mixed_precision else "fp32",
        target=device,
        fused_adamw=bool(options.get("fused_adamw", planned.plan().is_applied(FUSED_ADAMW))),
        optimizer=arguments.optimizer,
        lora_rank=arguments.lora_rank,
        lora_alpha=arguments.lora_alpha,
        lora_targets=parse_targets(arguments.lora_targets),
        new_language=canonical_language(arguments.language) not in XTTS_LANGUAGES,
        leaner_steps=leaner,
        accumulating=arguments.grad_acumm > 1,
        grad_accum_steps=arguments.grad_acumm,
        grad_clip=arguments.grad_clip,
        weight_decay=arguments.weight_decay,
    )


def largest_batch_that_fits(free_bytes: int, *args: Any, **kwargs: Any) -> int:
    """The largest batch size whose step fits in `free_bytes` with the safety margin; 0 if none does.

    `free_bytes`: free GPU memory before training starts (e.g. NVML's free, as `detected_free_bytes`).
    Other arguments: as `train_gpt` (batch_size is ignored) plus the planner options of
    `estimate_gpt_memory`. The peak never shrinks as the batch grows, so a bisection finds it.
    """
    if not isinstance(free_bytes, int) or free_bytes < 0:
        raise ValueError(f"free_bytes must be a whole number of bytes >= 0; got {free_bytes!r}.")
    kwargs = checked_plan_call(args, kwargs)  # every number checked where train_gpt's are (utils.options)
    arguments, options, _ = _arguments(args, {**kwargs, "batch_size": 1})
    settings = step_settings(arguments, options)
    fit, seconds = batch_model(settings, options.get("progress"))

    def fits(batch: int) -> bool:
        return make_estimate(fit, settings, batch, options, seconds, arguments).fits(free_bytes)

    if not fits(1):
        return 0
    good, bad = 1, MAX_BATCH + 1
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def estimate_gpt_memory(*args: Any, **kwargs: Any) -> MemoryEstimate:
    """Predict the peak GPU memory of a `train_gpt` training step, with its breakdown.

    Takes `train_gpt`'s arguments (positional or keyword; dataset paths and callbacks are not needed
    and are ignored) plus planner options:
      device="cuda" (plan for a GPU; "cpu" plans the tensors of a CPU run), fused_adamw (default: what
      train_gpt does, fused on a GPU; False plans the foreach kernel), leaner_steps=True (False: coqui's step
      as shipped, without the fused GELU, fused AdamW and a CPU-side HiFi-GAN), frozen_models_on_gpu=True
      (False: without the DVAE and HiFi-GAN resident), gpu (a GPUInfo; default the detected GPU, else an
      assumed Ampere-or-newer one: it decides BF16/FP16/FP32), free_bytes (for batch_size="auto"; default
      the detected GPU's free memory), cuda_overhead_bytes, safety_margin.
    batch_size="auto" picks `largest_batch_that_fits` for the free memory.
    No weights are read: a published version that is not downloaded uses its known architecture.
    Raises ValueError for a bad argument, or for batch_size="auto" when nothing fits or no free memory is known.
    """
    kwargs = checked_plan_call(args, kwargs)  # every number checked where train_gpt's are (utils.options)
    arguments, options, batch = _arguments(args, kwargs)
    if batch == "auto":
        free = options.get("free_bytes")
        free = free if free is not None else detected_free_bytes()
        if free is None:
            raise ValueError("batch_size='auto' needs a GPU to measure, or free_bytes=<free GPU memory in bytes>.")
        rest = {k: v for k, v in kwargs.items() if k != "free_bytes"}
        batch = largest_batch_that_fits(int(free), *args, **{**rest, "batch_size": 1})
        if batch == 0:
            smallest = estimate_gpt_memory(*args, **{**rest, "batch_size": 1})
            raise ValueError(
                f"Not even batch_size=1 fits in {int(free) / GIB:.2f} GiB free: it needs "
                f"{smallest.required_bytes / GIB:.2f} GiB. {' '.join(fit_advice(smallest))}"
            )
        arguments = replace(arguments, batch_size=batch)
    settings = step_settings(arguments, options)
    fit, seconds = batch_model(settings, options.get("progress"))
    return make_estimate(fit, settings, arguments.batch_size, options, seconds, arguments)


def largest_generation_batch(*args: Any, generated_rows: int | None = None, **kwargs: Any) -> int:
    """How many texts a scored evaluation should generate at once for `train_gpt(*args, **kwargs)`: the largest
    generation batch (1 to the texts per evaluation) that keeps the evaluation's peak (weights, AdamW state, the
    KV cache at the length cap) at or below the training step's. At least 1: where even one text raises the
    run's peak, `estimate_gpt_memory(...).phase_notes` says so. 0 when quality_eval is 0.

    `generated_rows`: texts per scored evaluation (default `run_phases.generated_rows(quality_eval)`: the
    sentences and the probe texts). Other arguments and planner options as `estimate_gpt_memory` (give the run's
    batch size, and device="cpu" for a CPU run). Answered from the shipped memory model for the published
    architecture and Fit my GPU's option sets; other settings are traced, which patches torch for the process
    meanwhile: call it before the run builds its model, as batch_size="auto" is planned.
    """
    return estimate_gpt_memory(*args, generated_rows=generated_rows, **kwargs).generation_batch


def fit_advice(estimate: MemoryEstimate) -> list[str]:
    """What would lower this estimate's peak, cheapest first (settings still off, then the batch)."""
    advice = []
    s = estimate.settings
    if not s["grad_checkpoint"]:
        advice.append("Turn on gradient checkpointing (enable_grad_checkpoint=True): it shrinks activations most.")
    if s["precision"] == "fp32":
        advice.append("Turn on mixed precision (precision='auto') on a Volta or newer GPU.")
    if not s["sdpa"]:
        advice.append("Turn on SDPA attention (enable_sdpa=True): no attention matrices are kept.")
    if not s["fused_adamw"] and s["optimizer"] == "adamw" and estimate.step_phase == "optimizer step":
        advice.append("The optimizer step sets the peak: a fused AdamW would avoid its temporary copy of the weights.")
    if s["optimizer"] == "adamw" and estimate.breakdown_gib.get("optimizer_state", 0) > 1.0:
        advice.append("Use optimizer='adamw_8bit' (bitsandbytes): AdamW's state in a quarter of the memory.")
    if s.get("lora_rank", 0) == 0 and estimate.breakdown_gib.get("optimizer_state", 0) > 1.0:
        advice.append("Use LoRA (lora_rank=16): the GPT is frozen in half precision and only adapters train.")
    if s["grad_acumm"] > 1 and estimate.breakdown_gib.get("gradients", 0) > 0.5:
        advice.append("Use grad_acumm=1: gradients are then not held between micro-steps.")
    if estimate.batch_size > 1:
        effective = estimate.batch_size * s["grad_acumm"]
        advice.append(f"Use a smaller batch_size with a larger grad_acumm (same effective batch {effective}).")
    # Only where activations, which grow with the clip, are a real part of the peak.
    if s["max_audio_length"] > 220500 and estimate.breakdown_gib.get("activations", 0) > 0.25 * estimate.peak_gib:
        advice.append("Lower max_audio_length (e.g. 220500 = 10 s): memory grows with the longest clip.")
    return advice


# (the option, its value when on, the name): each optimization a plan may still turn on.
_OPTIMIZATIONS = (
    ("enable_grad_checkpoint", True, "gradient checkpointing"),
    ("precision", "auto", "mixed precision"),  # off is precision='fp32'
    ("enable_sdpa", True, "SDPA attention"),
)


def ways_to_fit(free_bytes: int, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Changes to train_gpt's arguments, each with its planned peak and whether it fits in `free_bytes`.

    Tried: each optimization still off, all of them, a smaller batch with more accumulation (the same
    effective batch), a 10 s longest clip (kept only where it lowers the peak), 8-bit AdamW, grad_acumm=1, LoRA,
    and gradient checkpointing off (kept only where it fits: it is faster, not smaller). Each new setting costs
    one fit the first time (a few seconds for the tiny model, ~20-30 s at full size). Items: change, keywords,
    peak_gib, required_gib, fits.
    """
    kwargs = checked_plan_call(args, kwargs)  # every number checked where train_gpt's are (utils.options)
    arguments, _, _ = _arguments(args, kwargs)
    given = fold_precision_alias(dict(zip(TrainArguments.positional_names(), args)) | kwargs)
    off = {flag: on for flag, on, _ in _OPTIMIZATIONS if getattr(arguments, flag) in (False, "fp32")}
    candidates = [(f"turn on {name}", {flag: on}) for flag, on, name in _OPTIMIZATIONS if flag in off]
    if len(off) > 1:
        candidates.append(("turn on all three optimizations", off))
    # Accumulating keeps the gradients between micro-steps: plan the batch with that in mind.
    batch = largest_batch_that_fits(free_bytes, **{**given, "grad_acumm": max(2, arguments.grad_acumm)})
    if 0 < batch < arguments.batch_size:
        accumulation = -(-arguments.batch_size * arguments.grad_acumm // batch)
        candidates.append(
            (f"batch_size={batch} with grad_acumm={accumulation}", {"batch_size": batch, "grad_acumm": accumulation})
        )
    if arguments.max_audio_length > 220500:
        candidates.append(("max_audio_length=220500 (10 s clips at most)", {"max_audio_length": 220500}))
    if arguments.optimizer == "adamw":
        candidates.append(("optimizer='adamw_8bit' (bitsandbytes)", {"optimizer": "adamw_8bit"}))
    if arguments.grad_acumm > 1:
        candidates.append(("grad_acumm=1 (no gradients held between micro-steps)", {"grad_acumm": 1}))
    if arguments.lora_rank == 0:
        candidates.append(("LoRA rank 16 (lora_rank=16: frozen GPT, adapters trained)", {"lora_rank": 16}))
    if arguments.enable_grad_checkpoint:
        # Faster, not smaller: offered only where it still fits (~1.37x faster steps without recomputation).
        candidates.append(("turn off gradient checkpointing (~1.37x faster)", {"enable_grad_checkpoint": False}))
    current = estimate_gpt_memory(**given).peak_gib
    ways = []
    for change, keywords in candidates:
        estimate = estimate_gpt_memory(**{**given, **keywords})
        if "max_audio_length" in keywords and estimate.peak_gib > 0.98 * current:
            continue  # a shorter longest clip that does not lower the peak is no advice
        if keywords == {"enable_grad_checkpoint": False} and not estimate.fits(free_bytes):
            continue
        ways.append(
            {
                "change": change,
                "keywords": keywords,
                "peak_gib": estimate.peak_gib,
                "required_gib": estimate.required_bytes / GIB,
                "fits": estimate.fits(free_bytes),
            }
        )
    return ways
