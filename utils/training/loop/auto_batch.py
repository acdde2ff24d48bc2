"""batch_size="auto": the largest batch the memory planner fits in free memory, confirmed on a GPU by one step.

The plan is for the longest batch the training sampler can produce: every clip padded to the longest training
clip (the dataset's durations are given to the planner), and, on a CPU, the background save's copy of the
weights and optimizer state beside the step in RAM. On a CUDA GPU the planner's batch (with its safety margin)
is tried with one real step at the same longest lengths, with the learning rate at zero (the weights stay as
loaded; the optimizer's state is cleared afterwards), backing off on out-of-memory. On a CPU the plan is made
against the free RAM, with no probe: running out of RAM ends a process rather than raising.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import torch

from utils.device.gpu import GPUInfo, detect_gpu
from utils.options.arguments import TrainArguments
from utils.training.recording.run_record import read_run

log = logging.getLogger(__name__)
# The share of free RAM a CPU run plans for: the OS, the data loader and this process need the rest.
CPU_RAM_SHARE = 0.6


def plan_batch_size(args: TrainArguments, train_rows: int, clip_seconds: list[float] | None = None) -> tuple[int, str]:
    """(batch size, how it was chosen) for batch_size="auto", planned for the longest batch of clips of these
    durations (the training clips'; None: every clip at max_audio_length); ValueError when not even 1 fits."""
    from utils.memory_plan.planner import GIB, detected_free_bytes, estimate_gpt_memory, largest_batch_that_fits

    keywords = {k: v for k, v in args.to_dict().items() if k not in ("batch_size",)}
    if detect_gpu().available:
        free, device, where = detected_free_bytes(), "cuda", "free GPU memory"
    else:
        free, device, where = int(psutil.virtual_memory().available * CPU_RAM_SHARE), "cpu", "free RAM (60%)"
    if free is None:
        raise ValueError("batch_size='auto' could not read the GPU's free memory; give a number.")
    batch = largest_batch_that_fits(int(free), device=device, clip_seconds=clip_seconds, **keywords)
    if batch == 0:
        needed = estimate_gpt_memory(device=device, batch_size=1, clip_seconds=clip_seconds, **keywords)
        raise ValueError(
            f"batch_size='auto': not even a batch of 1 fits in {free / GIB:.2f} GiB of {where} (it needs "
            f"{needed.required_bytes / GIB:.2f} GiB). Turn on the memory savings, or free memory."
        )
    chosen = min(batch, max(1, train_rows))
    longest = f"{max(clip_seconds):.1f} s" if clip_seconds else "max_audio_length"
    return chosen, (
        f"batch_size auto = {chosen}: the planner fits {batch} clips padded to the longest ({longest}) in "
        f"{free / GIB:.2f} GiB of {where}" + (f", capped at the {train_rows} training rows" if chosen < batch else "")
    )


def resolve_batch(
    args: TrainArguments, train_rows: int, resume_dir: Path | None, clip_seconds: Sequence[float] | None = None
) -> tuple[TrainArguments, str, bool]:
    """batch_size="auto" settled before any model is built: (arguments with a number, how it was chosen, whether a
    probe step confirms it on a GPU). A new run takes the planner's batch for the longest batch of clips of these
    durations (the training clips'; None: every clip at max_audio_length); a resume the run's own, which its
    interrupted epoch, schedule and optimizer state assume. Other batch sizes pass unchanged."""
    if args.batch_size != "auto":
        return args, "", False
    if resume_dir is None:
        batch, choice = plan_batch_size(args, train_rows, None if clip_seconds is None else list(clip_seconds))
        return args.replace(batch_size=batch), choice, True
    batch = int((read_run(resume_dir).get("arguments") or {}).get("batch_size") or 0)
    if batch < 1:
        raise ValueError(f"resume_from: {resume_dir} does not record its batch size; give batch_size.")
    choice = f"batch_size auto on resume: the run's own {batch}"
    print(choice, flush=True)
    return args.replace(batch_size=batch), choice, False


def plan_generation_batch(
    args: TrainArguments, clip_seconds: list[float] | None = None, gpu: GPUInfo | None = None
) -> tuple[int, str]:
    """(rows a scored evaluation generates together, why) on a CUDA GPU: the planner's largest generation batch that
    keeps the evaluation's KV cache within the training step's peak. 0 (all rows at once) on a CPU, where it is
    host RAM, or when nothing is scored; also 0 when the planner cannot answer (the evaluation then halves its
    batch on an out-of-memory error). `gpu`: the detected one by default."""
    if args.quality_eval == 0 or not (gpu or detect_gpu()).available:
        return 0, ""
    from utils.memory_plan.planner import largest_generation_batch

    try:
        rows = largest_generation_batch(device="cuda", clip_seconds=clip_seconds, **args.to_dict())
    except Exception as exc:  # noqa: BLE001 - a plan is advice: the evaluation halves its batch on an OOM anyway
        log.warning("Could not plan the scored evaluation's generation batch: %s", exc)
        return 0, f"generation batch not planned ({type(exc).__name__}: {exc}); all rows at once"
    return rows, f"generation batch {rows}: the planner's largest that keeps the scored evaluation within the step"


def probe_batch_size(trainer: Any, planned: int) -> int:
    """On a CUDA GPU, the largest batch from `planned` down that runs one real step at the longest lengths."""
    if not trainer.use_cuda:
        return planned
    from utils.memory_plan.probe import confirm_batch_size

    def try_step(batch: int) -> None:
        _zero_lr_step(trainer, batch)

    return confirm_batch_size(
        planned,
        try_step,
        on_retry=lambda failed, smaller: log.warning(
            "batch_size auto: %d ran out of GPU memory in the probe step; trying %d.", failed, smaller
        ),
    )


def _zero_lr_step(trainer: Any, batch_size: int) -> None:
    """One forward, backward and optimizer step on the longest clips with the learning rate at zero; the
    optimizer's state and the gradients are cleared after, so training starts exactly as loaded."""
    model, optimizer = trainer.model, trainer.optimizer[0] if isinstance(trainer.optimizer, list) else trainer.optimizer
    lrs = [group["lr"] for group in optimizer.param_groups]
    try:
        for group in optimizer.param_groups:
            group["lr"] = 0.0
        batch = trainer.format_batch(_longest_batch(trainer, batch_size))
        # coqui's forward-backward-step without the step's callbacks, counters and scheduler.
        trainer.optimize(batch, optimizer, trainer.scaler, trainer.criterion[0], None)
    finally:
        for group, lr in zip(optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        optimizer.state.clear()
        model.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()


def _longest_batch(trainer: Any, batch_size: int) -> dict[str, Any]:
    """A collated batch of real clips repeated to `batch_size`, padded to the longest training clip the loader
    keeps (what the planner planned; the longest the run allows when the rows carry no duration)."""
    from utils.training.inputs.dataset import DURATION_KEY

    loader = trainer.model.get_data_loader(trainer.config, is_eval=False, samples=trainer.train_samples[:batch_size])
    items = [loader.dataset[i % len(loader.dataset)] for i in range(batch_size)]
    batch = loader.dataset.collate_fn(items)
    allowed = trainer.config.model_args.max_wav_length
    rate = trainer.config.audio.sample_rate
    lengths = [round(float(s[DURATION_KEY]) * rate) for s in trainer.train_samples if s.get(DURATION_KEY) is not None]
    kept = [n for n in lengths if n <= allowed] if len(lengths) == len(trainer.train_samples) else []
    longest = max([*kept, batch["wav"].shape[-1]]) if kept else allowed
    batch["wav"] = torch.nn.functional.pad(batch["wav"], (0, max(0, longest - batch["wav"].shape[-1])))
    batch["wav_lengths"] = torch.full_like(batch["wav_lengths"], longest)
    batch.pop("filenames", None)  # padded stand-ins: their DVAE codes must not enter the per-clip cache
    return batch
