"""`MemoryEstimate`: what `estimate_gpt_memory` answers, per phase of the run, with its breakdown and in words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.constants import XTTS_SAMPLE_RATE
from utils.memory_plan import memory_model
from utils.memory_plan import tracker as t
from utils.memory_plan.run_phases import plan_of_phases
from utils.memory_plan.trace import StepSettings
from utils.options.arguments import TrainArguments

GIB = 1024**3
MIB = 1024**2
# CUDA context right after the first CUDA call with lazy module loading (PyTorch's default since
# 1.13): 287,047,680 bytes measured in pytorch/pytorch PR #86509 (666 MB with eager loading).
CUDA_CONTEXT_BYTES = 300 * MIB
# Kernels loaded lazily during training (cuBLAS, cuDNN, PyTorch's) and cuBLAS workspaces: an
# estimate, not a measurement (no GPU was available when this was written).
CUDA_KERNELS_AND_WORKSPACES_BYTES = 150 * MIB
# Allocator fragmentation (reserved beyond allocated) plus the planner's own error, as a fraction
# of the traced peak: a batch "fits" only with this much to spare.
SAFETY_MARGIN = 0.10
BREAKDOWN = (
    "weights",
    "gradients",
    "optimizer_state",
    "activations",
    "optimizer_temporaries",
    "frozen_models",
    "cuda_overhead",
)


@dataclass
class MemoryEstimate:
    """A plan's answer. Unpacks as `peak_gib, breakdown_gib = estimate_gpt_memory(...)`.

    `peak_gib` is the largest of `phase_peaks_gib` (GiB per phase of the run: "training step", "eval loss",
    "scored evaluation", "checkpoint save"; CUDA overhead included in each) and `peak_phase` names it."""

    peak_gib: float  # the largest phase's peak, CUDA overhead included
    breakdown_gib: dict[str, float]  # BREAKDOWN keys, of the peak phase; they sum to peak_gib
    batch_size: int
    peak_phase: str  # the phase of the run that sets the peak (run_phases.PHASES)
    settings: dict[str, Any]
    architecture: str
    traced_peak_bytes: int  # the peak phase's bytes without the CUDA overhead
    cuda_overhead_bytes: int
    safety_margin: float
    trace_seconds: float  # spent tracing for this call (0 when the fit was cached or shipped)
    detail_bytes: dict[str, int] = field(default_factory=dict)  # the tracker's categories at the step's peak
    batch_plan: str = ""  # which batch was planned (the longest the sampler can produce), in words
    # Host RAM (CPU memory), not in peak_gib: "checkpoint_copy" (a background save's CPU copy of weights and
    # optimizer state), and for a CPU run "training_step" (the step's peak, the same RAM).
    host_breakdown_gib: dict[str, float] = field(default_factory=dict)
    checkpoint_copy_bytes: int = 0  # host_breakdown_gib["checkpoint_copy"] in bytes
    step_phase: str = ""  # where in the training step its peak is: "forward" | "backward" | "optimizer step"
    phase_peaks_gib: dict[str, float] = field(default_factory=dict)
    phase_breakdown_gib: dict[str, dict[str, float]] = field(default_factory=dict)  # labelled parts per phase
    generation_batch: int = 0  # texts generated together in a scored evaluation (0: quality_eval off)
    generated_rows: int = 0  # texts each scored evaluation generates (quality_eval sentences and probe texts)
    phase_notes: list[str] = field(default_factory=list)  # what runs where, and anything over the step's peak
    source: str = ""  # where the step's figures come from: the shipped memory model, or traces

    @property
    def host_gib(self) -> float:
        """Host RAM this plan counts (beyond the Python process, libraries and the data loader)."""
        return sum(self.host_breakdown_gib.values())

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.peak_gib, self.breakdown_gib))

    @property
    def required_bytes(self) -> int:
        """Free memory this run needs: the peak plus the safety margin on the traced part; for a CPU run (RAM)
        also a background save's CPU copy, which lives beside the step."""
        copy = self.checkpoint_copy_bytes if self.settings.get("device") == "cpu" else 0
        return int(self.traced_peak_bytes * (1 + self.safety_margin)) + self.cuda_overhead_bytes + copy

    def fits(self, free_bytes: int) -> bool:
        return self.required_bytes <= free_bytes

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()} | {"required_bytes": self.required_bytes}

    def phase_table(self) -> str:
        """The run's phases as a markdown table: each phase's peak and what it holds."""
        rows = ["| phase | peak (GiB) | what it holds |", "|---|---|---|"]
        for phase, gib in self.phase_peaks_gib.items():
            parts = self.phase_breakdown_gib.get(phase, {})
            held = ", ".join(f"{name.replace('_', ' ')} {value:.2f}" for name, value in parts.items() if value >= 0.005)
            mark = " **(peak)**" if phase == self.peak_phase else ""
            rows.append(f"| {phase}{mark} | {gib:.2f} | {held} |")
        return "\n".join(rows)

    def to_markdown(self) -> str:
        where = f"{self.peak_phase}, {self.step_phase}" if self.peak_phase == "training step" else self.peak_phase
        lines = [
            (
                f"**Predicted peak: {self.peak_gib:.2f} GiB** at batch {self.batch_size} ({where}); "
                f"{self.required_bytes / GIB:.2f} GiB free needed with a {self.safety_margin:.0%} margin."
            ),
            "",
        ]
        if self.phase_peaks_gib:
            lines += [self.phase_table(), ""]
            if self.generated_rows:
                lines += [
                    f"Scored evaluation: {self.generated_rows} texts generated {self.generation_batch} at a time "
                    "(the largest batch that keeps it within the training step's peak).",
                    "",
                ]
            for note in self.phase_notes:
                lines += [note, ""]
        lines.append(f"Breakdown of the peak ({self.peak_phase}):")
        lines += [f"- {name.replace('_', ' ')}: {gib:.2f} GiB" for name, gib in self.breakdown_gib.items()]
        copy = self.host_breakdown_gib.get("checkpoint_copy")
        if copy is not None:
            where = (
                f"{self.host_gib:.2f} GiB in all with the step's {self.host_breakdown_gib['training_step']:.2f} GiB"
                if "training_step" in self.host_breakdown_gib
                else "beside the GPU figure above"
            )
            lines.append(
                f"- host RAM while a checkpoint is saved in the background: {copy:.2f} GiB (its CPU copy of the "
                f"weights and optimizer state, one save in flight at most; {where})"
            )
        if self.batch_plan:
            lines += ["", self.batch_plan]
        lines += ["", f"Architecture: {self.architecture}." + (f" {self.source}" if self.source else "")]
        return "\n".join(lines)


PHASES = {t.ACTIVATIONS: "forward", t.BACKWARD: "backward", t.OPTIMIZER_TEMP: "optimizer step"}


def _settings_summary(settings: StepSettings, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "device": settings.target,
        "precision": settings.precision,
        "grad_checkpoint": settings.grad_checkpoint,
        "sdpa": settings.sdpa,
        "fused_adamw": settings.fused_adamw,
        "optimizer": settings.optimizer,
        "lora_rank": settings.lora_rank,
        "leaner_steps": settings.leaner_steps,
        "grad_acumm": settings.grad_accum_steps,
        "max_audio_length": settings.audio_samples,  # the planned longest clip
        "longest_clip_seconds": settings.audio_samples / XTTS_SAMPLE_RATE,
        "clip_lengths_given": options.get("clip_seconds") is not None,
        "text_tokens": settings.text_tokens,
        "frozen_models_on_gpu": bool(options.get("frozen_models_on_gpu", True)),
    }


def make_estimate(
    fit: Any,
    settings: StepSettings,
    batch: int,
    options: dict[str, Any],
    seconds: float,
    arguments: TrainArguments,
) -> MemoryEstimate:
    phase, detail = fit.at(batch)
    evaluation = fit.at_eval(batch)
    if not options.get("frozen_models_on_gpu", True):
        detail = {**detail, t.FROZEN: 0}  # a constant category: removing it moves no other
        evaluation = None if evaluation is None else {**evaluation, t.FROZEN: 0}
    cuda = settings.target == "cuda"
    default_overhead = CUDA_CONTEXT_BYTES + CUDA_KERNELS_AND_WORKSPACES_BYTES if cuda else 0
    given = options.get("cuda_overhead_bytes")
    overhead = int(given) if given is not None else default_overhead
    phases = plan_of_phases(arguments, settings, options, detail, evaluation)
    peak_phase = max(phases.peaks, key=phases.peaks.__getitem__)  # the training step first among equals
    traced = phases.peaks[peak_phase]
    copy = int(getattr(fit, "checkpoint_copy_bytes", 0))
    host = {"checkpoint_copy": copy / GIB} if copy else {}
    if host and not cuda:
        host = {"training_step": traced / GIB, **host}
    shown = {name: _labelled(parts, overhead) for name, parts in phases.parts.items()}
    return MemoryEstimate(
        peak_gib=(traced + overhead) / GIB,
        breakdown_gib=_as_breakdown(phases.parts[peak_phase], overhead),
        batch_size=batch,
        peak_phase=peak_phase,
        settings=_settings_summary(settings, options),
        architecture=settings.architecture.source,
        traced_peak_bytes=traced,
        cuda_overhead_bytes=overhead,
        safety_margin=float(options.get("safety_margin", SAFETY_MARGIN if cuda else 0.0)),
        trace_seconds=seconds,
        detail_bytes=detail,
        batch_plan=_batch_plan(settings, batch, options.get("clip_seconds")),
        host_breakdown_gib=host,
        checkpoint_copy_bytes=copy,
        step_phase=PHASES.get(phase, phase),
        phase_peaks_gib={name: (value + overhead) / GIB for name, value in phases.peaks.items()},
        phase_breakdown_gib=shown,
        generation_batch=phases.generation_batch,
        generated_rows=phases.rows,
        phase_notes=phases.notes,
        source=(
            "Step from the shipped memory model (utils/memory_plan/memory_model.json)."
            if isinstance(fit, memory_model.ShippedFit)
            else "Step traced for these settings."
        ),
    )


# The tracker's categories under the breakdown's names (backward temporaries are activations of the step).
_BREAKDOWN_OF = {
    t.WEIGHTS: "weights",
    t.GRADIENTS: "gradients",
    t.OPTIMIZER_STATE: "optimizer_state",
    t.ACTIVATIONS: "activations",
    t.BACKWARD: "activations",
    t.OPTIMIZER_TEMP: "optimizer_temporaries",
    t.FROZEN: "frozen_models",
}


def _as_breakdown(parts: dict[str, int], overhead: int) -> dict[str, float]:
    """A phase's parts under the BREAKDOWN keys: models kept for scoring are frozen models, anything a phase
    allocates for a while (KV cache, decoding) activations."""
    out = dict.fromkeys(BREAKDOWN, 0.0)
    for name, value in parts.items():
        frozen = name == "hifigan_decoder" or name.startswith("whisper")
        out[_BREAKDOWN_OF.get(name, "frozen_models" if frozen else "activations")] += value / GIB
    out["cuda_overhead"] = overhead / GIB
    return out


def _labelled(parts: dict[str, int], overhead: int) -> dict[str, float]:
    """A phase's parts for the page: the tracker's categories by their breakdown names, other parts by label."""
    out: dict[str, float] = {}
    for name, value in parts.items():
        label = _BREAKDOWN_OF.get(name, name)
        out[label] = out.get(label, 0.0) + value / GIB
    return {**{k: v for k, v in out.items() if v}, **({"cuda_overhead": overhead / GIB} if overhead else {})}


def _batch_plan(settings: StepSettings, batch: int, clip_seconds: Sequence[float] | None) -> str:
    """The planned batch in words: the longest the training sampler can produce, and where its length comes from."""
    seconds, conditioning = settings.audio_samples / XTTS_SAMPLE_RATE, settings.conditioning_samples / XTTS_SAMPLE_RATE
    if clip_seconds is None:
        source = "max_audio_length: no clip lengths were given; pass clip_seconds to plan the dataset's own"
    else:
        kept = sum(1 for s in clip_seconds if 0 < round(float(s) * XTTS_SAMPLE_RATE) <= settings.audio_samples)
        source = (
            f"the longest of the {kept} training clips the loader keeps"
            if kept
            else "max_audio_length: none of the given clips is within it"
        )
    return (
        f"Planned for the longest batch the training sampler can produce: {batch} clip(s) padded to {seconds:.2f} s "
        f"({source}), text padded to {settings.text_tokens} tokens (the limit), {conditioning:.0f} s "
        "of conditioning. A batch is padded to its longest clip with or without length grouping; with it, the "
        "longest batch is full of clips that long."
    )
