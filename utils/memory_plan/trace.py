"""Tracing one training step of the product's model on fake tensors and reading its memory.

The step is the one coqui's Trainer runs for `train_gpt` (Trainer.train_step -> optimize):
`format_batch_on_device` (conditioning mels, DVAE codes, under no_grad), `GPTTrainer.train_step`
under autocast, the loss divided by the accumulation steps, backward, gradient clipping over the
optimizer's parameters, AdamW's step and `zero_grad(set_to_none=True)`. It is traced at its worst:
every clip padded to the longest clip (`audio_samples`: the longest batch the sampler can produce, see
the planner), text at the token limit, a full conditioning clip, the AdamW
state already allocated (steady state), and, with gradient accumulation, the gradients of the
previous micro-step still held (the last micro-step of a cycle, which also steps the optimizer).
FP16's GradScaler is left out: it scales the loss and unscales the gradients in place (a few scalars).

After the step the trace runs one batch of the eval-loss pass as coqui's `Trainer.eval_epoch` does (the whole
model in eval mode, `format_batch_on_device`, `eval_step` under inference mode and the run's autocast): the events
from `eval_from` on are that phase, with the weights and AdamW state still resident.

`trace_step` returns the live bytes per category after every allocation and free. `BatchModel`
turns two traces at batch sizes 2 and 3 into the peak for any batch size: every allocation is
either fixed or proportional to the batch, so the series of one is `fixed + batch x per_sample`,
at the end of each run of allocations or frees (`run_ends`), and the peak is the largest such sum (see
`BatchModel.at`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from utils.device.gpu import GPUInfo
from utils.memory_plan import tracker as t
from utils.memory_plan.architecture import Architecture
from utils.memory_plan.cuda_emulation import cuda_autocast_policy, efficient_sdpa, native_dropout
from utils.memory_plan.fake_model import apply_optimizations, build_fake_model
from utils.model.lora import LORA_TARGETS, LoraSettings, apply_lora, frozen_dtype, hold_base_layers_in
from utils.options.optimizations import TrainingOptimizer

LOWER_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}
# A trace swaps process-wide hooks (autocast kernels, F.scaled_dot_product_attention, F.dropout)
# for its duration: one trace at a time, and none while this process trains.
_TRACE_LOCK = threading.Lock()


@dataclass(frozen=True)
class StepSettings:
    """Everything that shapes the memory of one traced step."""

    architecture: Architecture
    batch_size: int
    audio_samples: int  # the longest clip a batch is padded to (the dataset's longest, else max_audio_length)
    text_tokens: int  # the longest text, in tokens
    conditioning_samples: int
    grad_checkpoint: bool
    sdpa: bool
    precision: str  # "fp32" | "bf16" | "fp16" (as TrainingOptimizer chose it)
    target: str = "cuda"  # "cuda": emulate a GPU's kernels and allocator; "cpu": trace as the CPU runs
    fused_adamw: bool = False
    optimizer: str = "adamw"  # "adamw" | "adamw_8bit" (bitsandbytes, CUDA or CPU)
    lora_rank: int = 0  # 0: full fine-tune; else LoRA adapters on the GPT blocks (utils.model.lora)
    lora_alpha: float = 0.0
    lora_targets: tuple[str, ...] = LORA_TARGETS
    new_language: bool = False  # LoRA: a new language's embedding and heads train too
    leaner_steps: bool = True  # False: coqui's step as shipped (composite GELU, HiFi-GAN on the GPU, ...)
    accumulating: bool = False  # gradients of the previous micro-step are held (grad_acumm > 1)
    grad_accum_steps: int = 1
    grad_clip: float = 1.0
    weight_decay: float = 1e-2

    def key(self) -> StepSettings:
        """The cache key of a BatchModel: without what leaves memory unchanged (batch size, how many
        micro-steps beyond the first, weight decay)."""
        return replace(self, batch_size=0, grad_accum_steps=2 if self.accumulating else 1, weight_decay=0.0)


@dataclass
class StepTrace:
    """Live bytes per category (columns: tracker.CATEGORIES) after each event of one traced step."""

    batch_size: int
    events: np.ndarray
    phases: list[str]
    seconds: float
    assumed_true: int = 0
    checkpoint_copy_bytes: int = 0  # host RAM of a background save's CPU copy (`checkpoint_copy_bytes`)
    eval_from: int | None = None  # the first event of the eval-loss pass (None: the trace has none)

    def peak(self) -> tuple[int, dict[str, int]]:
        """(event, bytes per category) at the training step's peak."""
        return self._peak(0, len(self.events) if self.eval_from is None else self.eval_from)

    def eval_peak(self) -> tuple[int, dict[str, int]] | None:
        """(event, bytes per category) at the eval-loss pass's peak, or None."""
        return None if self.eval_from is None else self._peak(self.eval_from, len(self.events))

    def _peak(self, start: int, end: int) -> tuple[int, dict[str, int]]:
        index = start + int(self.events[start:end].sum(axis=1).argmax())
        return index, dict(zip(t.CATEGORIES, (int(v) for v in self.events[index]), strict=True))


def _gpu_for(settings: StepSettings) -> GPUInfo:
    if settings.target == "cpu":
        return GPUInfo(available=False)
    # Only the precision matters here; it was resolved by the caller for the planned GPU.
    capability = (8, 0) if settings.precision != "fp16" else (7, 0)
    return GPUInfo(
        available=True,
        name="planned GPU",
        capability=capability,
        architecture="planned",
        total_memory_gb=0.0,
        bf16_native=capability >= (8, 0),
    )


def _optimizer_params(settings: StepSettings) -> dict[str, Any]:
    params: dict[str, Any] = {"betas": [0.9, 0.96], "eps": 1e-8, "weight_decay": settings.weight_decay}
    if settings.fused_adamw:
        params["fused"] = True
    elif settings.target == "cuda":
        params["foreach"] = True  # what AdamW picks by default for CUDA parameters
    return params


def worst_case_batch(settings: StepSettings, use_masking: bool) -> dict[str, Any]:
    """A collated XTTSDataset batch at the longest lengths (real metadata, fake audio)."""
    b = settings.batch_size
    cond = settings.conditioning_samples
    return {
        "padded_text": torch.full((b, settings.text_tokens), 5, dtype=torch.int32),
        "text_lengths": torch.full((b,), settings.text_tokens, dtype=torch.long),
        "wav": torch.empty(b, 1, settings.audio_samples),
        "wav_lengths": torch.full((b,), settings.audio_samples, dtype=torch.long),
        "conditioning": torch.empty(b, 1, 1, cond),
        "cond_idxs": torch.tensor([[0, cond]] * b) if use_masking else None,
        "cond_lens": None if use_masking else torch.full((b,), cond, dtype=torch.long),
    }


@contextlib.contextmanager
def _emulation(settings: StepSettings) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if settings.target == "cuda":
            stack.enter_context(cuda_autocast_policy())
            stack.enter_context(native_dropout())
            if settings.sdpa:
                stack.enter_context(efficient_sdpa())
        yield


@contextlib.contextmanager
def _adapters_created_in_place() -> Iterator[None]:
    """PEFT moves each new adapter to its base layer's device with `.to()`, which cannot swap fake parameters;
    in a trace both are fake CPU tensors in FP32 already, so module moves are skipped while it injects."""
    original = torch.nn.Module.to
    torch.nn.Module.to = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.to = original  # type: ignore[method-assign]


def _optimizer(model: Any, config: Any, settings: StepSettings) -> Any:
    """The run's optimizer (coqui's AdamW parameter groups, frozen parameters left out), or the 8-bit AdamW's
    memory stand-in."""
    if settings.optimizer != "adamw_8bit":
        config.optimizer = "AdamW"
        return model.get_optimizer()
    from utils.memory_plan.eight_bit import EightBitAdamWTrace

    config.optimizer = "AdamW"
    return EightBitAdamWTrace(model.get_optimizer().param_groups, lr=config.lr)


def _register_resident(tracker: t.MemoryTracker, model: Any, optimizer: Any, settings: StepSettings) -> list:
    from torch._subclasses.fake_tensor import FakeTensor

    trainable = {id(p) for group in optimizer.param_groups for p in group["params"]}
    # coqui's Trainer moves the whole model to the GPU: the frozen DVAE too; train_gpt then takes the HiFi-GAN
    # decoder back to the CPU, since no training step uses it.
    for name, p in model.named_parameters():
        if name.startswith("xtts.hifigan_decoder.") and settings.target == "cuda" and settings.leaner_steps:
            continue
        tracker.track(p, t.WEIGHTS if id(p) in trainable else t.FROZEN)
    for b in model.buffers():
        tracker.track(b, t.FROZEN)
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, FakeTensor):
                tracker.track(value, t.OPTIMIZER_STATE)
    handles = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                tracker.track(p.grad, t.GRADIENTS)
            handles.append(p.register_post_accumulate_grad_hook(lambda p: tracker.track(p.grad, t.GRADIENTS)))
    return handles


def _tensors(state: Any) -> Iterator[torch.Tensor]:
    if torch.is_tensor(state):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from _tensors(value)
    elif isinstance(state, (list, tuple)):
        for value in state:
            yield from _tensors(value)


def checkpoint_copy_bytes(model: Any, optimizer: Any) -> int:
    """Host RAM held while a checkpoint is written in the background: the writer copies the saved state to the
    CPU first (the next optimizer step changes weights and moments in place), every tensor into its own
    storage. The saved state is the model's state_dict as the product saves it (frozen DVAE and HiFi-GAN left
    out) and the optimizer's state_dict (AdamW's moments and step counts, or the 8-bit state)."""
    state = {"model": model.state_dict(), "optimizer": [optimizer.state_dict()]}
    return sum(tensor.numel() * tensor.element_size() for tensor in _tensors(state))


def _step(model: Any, optimizer: Any, batch: dict[str, Any], settings: StepSettings, tracker: t.MemoryTracker) -> None:
    """coqui Trainer.train_step -> optimize, for one batch (no logging)."""
    tracker.phase = t.ACTIVATIONS
    batch = model.format_batch_on_device(model.format_batch(batch))
    lower = LOWER_PRECISION.get(settings.precision, torch.bfloat16)
    with torch.autocast("cpu", dtype=lower, enabled=settings.precision in LOWER_PRECISION):
        _, loss_dict = model.train_step(batch, None)
    loss = loss_dict["loss"] / float(settings.grad_accum_steps)
    tracker.phase = t.BACKWARD
    loss.backward()
    del loss, loss_dict
    tracker.phase = t.OPTIMIZER_TEMP
    if settings.grad_clip > 0:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, settings.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _eval_step(model: Any, batch: dict[str, Any], settings: StepSettings, tracker: t.MemoryTracker) -> None:
    """One batch of coqui's Trainer.eval_epoch: the whole model in eval mode, the batch formatted, then eval_step
    inside the run's autocast (FineTuneTrainer.eval_step); training mode again after. coqui runs it under
    inference_mode; no_grad keeps the same tensors (no graph either way), and a fake trace's one branch on a value
    (coqui's stop-token assert) is only answered outside inference mode."""
    tracker.phase = t.ACTIVATIONS
    model.eval()
    try:
        batch = model.format_batch_on_device(model.format_batch(batch))
        lower = LOWER_PRECISION.get(settings.precision, torch.bfloat16)
        with torch.autocast("cpu", dtype=lower, enabled=settings.precision in LOWER_PRECISION), torch.no_grad():
            model.eval_step(batch, None)
    finally:
        model.train()
        model.on_train_epoch_start(SimpleNamespace(model=model))


def trace_step(settings: StepSettings) -> StepTrace:
    """Trace one steady-state training step; the live bytes after every event."""
    with _TRACE_LOCK:
        # Frees then follow reference counts only, in program order: two traces of the same step
        # have their events in the same order (the cyclic collector would free at random points).
        gc.collect()
        enabled = gc.isenabled()
        gc.disable()
        try:
            return _trace_step(settings)
        finally:
            if enabled:
                gc.enable()


def _trace_step(settings: StepSettings) -> StepTrace:
    started = time.perf_counter()
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    model, config = build_fake_model(
        settings.architecture, settings.audio_samples, _optimizer_params(settings), fake_mode
    )
    planned = TrainingOptimizer(
        enable_grad_checkpoint=settings.grad_checkpoint,
        enable_sdpa=settings.sdpa,
        precision=settings.precision,  # as the run's TrainingOptimizer decided it: "fp32" is no mixed precision
        gpu=_gpu_for(settings),
        leaner_steps=settings.leaner_steps,
    )
    apply_optimizations(model, config, planned)
    # The planned AdamW kernel, as asked, on both configs (GPTTrainer builds its optimizer from its own copy).
    for target in {id(config): config, id(getattr(model, "config", config)): getattr(model, "config", config)}.values():
        target.optimizer_params = _optimizer_params(settings)
    metadata = t.RealMetadata()
    tracker = t.MemoryTracker(t.CUDA_BLOCK_BYTES if settings.target == "cuda" else 1)
    with fake_mode, metadata, _emulation(settings):
        if settings.lora_rank:
            alpha = settings.lora_alpha or 2.0 * settings.lora_rank
            lora = LoraSettings(settings.lora_rank, alpha, settings.lora_targets)
            precision = {"mixed_precision": settings.precision != "fp32", "precision": settings.precision}
            dtype = frozen_dtype(precision, settings.target == "cuda")
            with _adapters_created_in_place():
                apply_lora(model, lora, new_language=settings.new_language)
            if dtype is not None:
                hold_base_layers_in(model.xtts.gpt.gpt, dtype)
        optimizer = _optimizer(model, config, settings)
        trainable = [p for group in optimizer.param_groups for p in group["params"]]
        for p in trainable:  # one step without data allocates AdamW's state: the steady state
            p.grad = torch.zeros_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=not settings.accumulating)
        saved = checkpoint_copy_bytes(model, optimizer)
        handles = _register_resident(tracker, model, optimizer, settings)
        try:
            with tracker:
                masking = model.args.gpt_use_masking_gt_prompt_approach
                batch = worst_case_batch(settings, masking)
                _step(model, optimizer, batch, settings, tracker)
                del batch  # the loader's next batch replaces it
                eval_from = len(tracker.events)
                _eval_step(model, worst_case_batch(settings, masking), settings, tracker)
        finally:
            for handle in handles:
                handle.remove()
    return StepTrace(
        settings.batch_size,
        np.array(tracker.events, dtype=np.int64),
        list(tracker.event_phases),
        time.perf_counter() - started,
        metadata.assumed_true,
        saved,
        eval_from,
    )


def _aligned(a: StepTrace, b: StepTrace) -> bool:
    """Same events in the same order: same phases, and every event changes the same categories the
    same way (an allocation in one trace is an allocation of the same kind in the other)."""
    if a.events.shape != b.events.shape or a.phases != b.phases:
        return False
    return bool((np.sign(np.diff(a.events, axis=0)) == np.sign(np.diff(b.events, axis=0))).all())


def run_ends(events: np.ndarray) -> np.ndarray:
    """Indices of the last event of each run of allocations or of frees (by the total's change).

    The peak of a step is always at the end of a run of allocations, and the total at the end of a run does not
    depend on the order of the run's events. That order is not stable: autograd frees a node's saved tensors,
    and Python releases a container's items, in an order that differs between processes and batch sizes (the
    same frees, in another order). Fitting event by event then paired different tensors and gave per-sample
    slopes that varied from process to process; fitting the run ends gives the same fit every time.
    """
    totals = events.sum(axis=1)
    signs = np.sign(np.diff(totals, prepend=0))
    return np.flatnonzero(np.append(signs[1:] != signs[:-1], True))


@dataclass
class BatchModel:
    """The step's memory as `fixed + batch x per_sample`, event by event, from traces at two batch sizes."""

    fixed: np.ndarray
    per_sample: np.ndarray
    phases: list[str]
    seconds: float
    traces: list[StepTrace] = field(default_factory=list)
    checkpoint_copy_bytes: int = 0  # the same at every batch size
    eval_from: int | None = None  # the first run end of the eval-loss pass (None: no eval pass traced)

    @classmethod
    def calibrate(cls, settings: StepSettings, sizes: tuple[int, int] = (2, 3)) -> BatchModel:
        """Trace at two batch sizes (2 and 3: a batch of 1 lets some copies be skipped) and fit.

        Raises PlanningError when the two traces do not have the same events.
        """
        small, large = (trace_step(replace(settings, batch_size=b)) for b in sizes)
        if not _aligned(small, large) or small.eval_from != large.eval_from:
            raise t.PlanningError("The traces at two batch sizes differ in their events; cannot fit a batch model.")
        ends = run_ends(small.events)
        if not np.array_equal(ends, run_ends(large.events)):
            raise t.PlanningError("The traces at two batch sizes differ in their events; cannot fit a batch model.")
        per_sample = (large.events[ends] - small.events[ends]) / (sizes[1] - sizes[0])
        fixed = small.events[ends] - sizes[0] * per_sample
        phases = [small.phases[i] for i in ends]
        seconds = small.seconds + large.seconds
        eval_from = None if small.eval_from is None else int(np.searchsorted(ends, small.eval_from))
        return cls(fixed, per_sample, phases, seconds, [small, large], small.checkpoint_copy_bytes, eval_from)

    def at(self, batch_size: int) -> tuple[str, dict[str, int]]:
        """(phase, bytes per category) at the step's peak for `batch_size`."""
        return self._at(batch_size, 0, len(self.phases) if self.eval_from is None else self.eval_from)

    def at_eval(self, batch_size: int) -> dict[str, int] | None:
        """Bytes per category at the eval-loss pass's peak for an eval batch of `batch_size`, or None."""
        return None if self.eval_from is None else self._at(batch_size, self.eval_from, len(self.phases))[1]

    def _at(self, batch_size: int, start: int, end: int) -> tuple[str, dict[str, int]]:
        series = self.fixed[start:end] + batch_size * self.per_sample[start:end]
        index = int(series.sum(axis=1).argmax())
        return self.phases[start + index], dict(zip(t.CATEGORIES, (round(v) for v in series[index]), strict=True))


class DirectTraces:
    """The fallback when two traces cannot be aligned: one trace per batch size, on demand."""

    def __init__(self, settings: StepSettings) -> None:
        self.settings = settings
        self.seconds = 0.0
        self.checkpoint_copy_bytes = 0
        self._peaks: dict[int, tuple[str, dict[str, int], dict[str, int] | None]] = {}

    def _traced(self, batch_size: int) -> tuple[str, dict[str, int], dict[str, int] | None]:
        if batch_size not in self._peaks:
            trace = trace_step(replace(self.settings, batch_size=batch_size))
            self.seconds += trace.seconds
            self.checkpoint_copy_bytes = trace.checkpoint_copy_bytes
            index, peak = trace.peak()
            evaluation = trace.eval_peak()
            self._peaks[batch_size] = (trace.phases[index], peak, None if evaluation is None else evaluation[1])
        return self._peaks[batch_size]

    def at(self, batch_size: int) -> tuple[str, dict[str, int]]:
        phase, peak, _ = self._traced(batch_size)
        return phase, peak

    def at_eval(self, batch_size: int) -> dict[str, int] | None:
        return self._traced(batch_size)[2]
