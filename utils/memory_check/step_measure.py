"""Measuring the real peak of a training step on the CPU, to check the planner against.

The measurement is PyTorch's own CPU allocator accounting, independent of the planner's tracker:
with the profiler's memory profiling on, c10's CPU allocator reports every allocation and free
(`[memory]` events with their byte counts). The running sum of those events over the step is what
the step allocated beyond what already existed; adding the bytes that existed before it (weights,
buffers, optimizer state, held gradients) gives the step's peak.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from utils.model.base_models import build_resized_model, ensure_base_model

SENTENCES = (
    "the quick brown fox jumps over the lazy dog",
    "she sells sea shells by the sea shore and the shells are small",
    "a voice is a sound made by a person speaking",
    "we train the model on our own speech every day",
)


@dataclass(frozen=True)
class MeasuredPeak:
    resident_bytes: int  # tensors alive before the step
    step_peak_bytes: int  # the most the step allocated on top of them at any moment

    @property
    def peak_bytes(self) -> int:
        return self.resident_bytes + self.step_peak_bytes


def resident_bytes(tensors: Iterable[Any]) -> int:
    """Bytes of the distinct storages behind `tensors` (None and non-tensors are skipped)."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
            storage = tensor.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def model_and_optimizer_tensors(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[Any]:
    """Parameters, buffers, held gradients and optimizer state: what lives between steps."""
    tensors: list[Any] = [*model.parameters(), *model.buffers()]
    tensors += [p.grad for p in model.parameters() if p.grad is not None]
    tensors += [v for state in optimizer.state.values() for v in state.values()]
    return tensors


def measure_cpu_step(step: Callable[[], Any], resident: int) -> MeasuredPeak:
    """Run `step` once with the CPU allocator's reporting on; `resident` is what existed before it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    running = peak = 0
    for _, nbytes in events:
        running += nbytes
        peak = max(peak, running)
    return MeasuredPeak(resident, peak)


def build_model_folder(
    folder: str | os.PathLike, layers: int, width: int, heads: int, models_dir: str | os.PathLike | None = None
) -> Path:
    """A base-model folder laid out like the tiny one, with a GPT of the given size (random weights), for
    checks of mid-size models that no hub provides. Returns the folder."""
    sizes = {"gpt_layers": layers, "gpt_n_model_channels": width, "gpt_n_heads": heads, "decoder_input_dim": width}
    return build_resized_model(folder, sizes, models_dir)


def write_clips(folder: Path, rows: int, seconds: float) -> Path:
    """Speech-like clips (harmonics on a wandering pitch) and a coqui-format CSV."""
    import soundfile as sf

    rate = 22050
    lines = ["audio_file|text|speaker_name"]
    for i in range(rows):
        time_axis = np.arange(int(seconds * rate)) / rate
        phase = 2 * np.pi * np.cumsum(120 + 10 * i + 15 * np.sin(2 * np.pi * 0.7 * time_axis)) / rate
        audio = 0.2 * sum(np.sin(k * phase) / k for k in range(1, 6)) * (0.6 + 0.4 * np.sin(8 * np.pi * time_axis))
        name = f"wavs/clip_{i:03d}.wav"
        (folder / "wavs").mkdir(parents=True, exist_ok=True)
        sf.write(str(folder / name), audio.astype(np.float32), rate)
        lines.append(f"{name}|{SENTENCES[i % len(SENTENCES)]}|speaker")
    csv_path = folder / "metadata.csv"
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return csv_path


@contextlib.contextmanager
def measuring_setup(
    version: str,
    work_dir: str | os.PathLike,
    batch_size: int,
    models_dir: str | os.PathLike | None,
    clip_seconds: float,
    options: dict[str, Any],
) -> Iterator[tuple[Any, Path]]:
    """train_gpt's setup (coqui's Trainer on the real model) of a one-epoch FP32 run without loader workers, batch
    `batch_size`, on 2 x batch_size + 3 synthetic clips of `clip_seconds` written under `work_dir`; `options`:
    train_gpt's keywords. Yields (setup, the clips' CSV); the setup is released after."""
    from utils.data.validation import validate_dataset
    from utils.options.arguments import TrainArguments
    from utils.text.frontend import TextFrontEnd
    from utils.training.loop.setup import build_training_setup, trainer_parts
    from utils.training.recording.metrics import MetricsLogger
    from utils.training.recording.run_record import METRICS_FILE, create_run_dir

    work_dir = Path(work_dir)
    csv_path = write_clips(work_dir / "data", 2 * batch_size + 3, clip_seconds)
    fixed = {"num_epochs": 1, "batch_size": batch_size, "grad_acumm": 1, "precision": "fp32", "num_workers": 0}
    args = TrainArguments(
        version=version,
        models_dir=str(models_dir or ""),
        train_csv=str(csv_path),
        output_path=str(work_dir / "runs"),
        **{**options, **fixed, "print_step": 1000},
    )
    base = ensure_base_model(version, models_dir)
    run_dir = create_run_dir(args.output_path, "measure")
    metrics = MetricsLogger(run_dir / METRICS_FILE, batch_size=batch_size, steps_per_epoch=1, total_steps=1)
    parts = trainer_parts(args, run_dir, metrics)
    setup = build_training_setup(args, base, validate_dataset(args.train_csv), TextFrontEnd("en"), run_dir, parts)
    try:
        yield setup, csv_path
    finally:
        setup.release()


def batch_shapes(batch: dict[str, Any]) -> dict[str, int]:
    """A collated batch's shapes, as the planner takes them."""
    return {
        "batch_size": batch["wav"].shape[0],
        "text_tokens": batch["padded_text"].shape[-1],
        "audio_samples": batch["wav"].shape[-1],
        "conditioning_samples": batch["conditioning"].shape[-1],
    }


def real_cpu_step(
    version: str,
    work_dir: str | os.PathLike,
    batch_size: int,
    *,
    models_dir: str | os.PathLike | None = None,
    clip_seconds: float = 3.0,
    **options: Any,
) -> tuple[MeasuredPeak, dict[str, int]]:
    """One real CPU training step of the product (train_gpt's setup and coqui's Trainer.train_step),
    measured by the CPU allocator after a warm-up step; and the batch's shapes (batch, text_tokens,
    audio_samples, conditioning_samples) for planning the same step. `options`: train_gpt's keywords
    (enable_grad_checkpoint, enable_sdpa, optimizer, lora_rank, ...; defaults as TrainArguments declares them);
    the step is FP32, one epoch of one accumulation step."""
    with measuring_setup(version, work_dir, batch_size, models_dir, clip_seconds, options) as (setup, _):
        trainer, model = setup.trainer, setup.trainer.model
        loader = model.get_data_loader(trainer.config, is_eval=False, samples=trainer.train_samples, verbose=False)
        batches = iter(loader)
        warm_up, batch = next(batches), next(batches)
        model.on_train_epoch_start(trainer)
        trainer.train_step(warm_up, 1, 0, time.time())  # allocates AdamW's state
        # The collated batch exists before the step; on a GPU its copy is made inside the step.
        resident = resident_bytes([*model_and_optimizer_tensors(model, trainer.optimizer[0]), *batch.values()])
        measured = measure_cpu_step(lambda: trainer.train_step(batch, 1, 0, time.time()), resident)
        return measured, batch_shapes(batch)


def cpu_step_settings(
    version: str,
    shapes: dict[str, int],
    grad_checkpoint: bool,
    sdpa: bool,
    models_dir: str | os.PathLike | None,
    optimizer: str = "adamw",
    lora_rank: int = 0,
) -> Any:
    """The planner's StepSettings for the FP32 CPU step that `real_cpu_step` measured at these shapes."""
    from utils.memory_plan.architecture import resolve_architecture
    from utils.memory_plan.trace import StepSettings

    return StepSettings(
        resolve_architecture(version, str(models_dir) if models_dir else None),
        shapes["batch_size"],
        shapes["audio_samples"],
        shapes["text_tokens"],
        shapes["conditioning_samples"],
        grad_checkpoint,
        sdpa,
        "fp32",
        target="cpu",
        optimizer=optimizer,
        lora_rank=lora_rank,
    )
