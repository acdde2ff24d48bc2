"""The training optimizations of the XTTS GPT, switched on for real: one `configure_*` per optimization.

Each optimization is a decide-then-apply unit (`OPTIMIZATIONS`): `TrainingOptimizer.from_arguments(args).plan()`
decides all of them from a run's arguments and the device, without a model (the page's "What will be applied"
and the memory planner show that report), and `.apply(model, config)` applies those decisions to coqui's
`GPTTrainer` and `GPTTrainerConfig` (gradient checkpointing, SDPA or eager attention, mixed precision, the
cuDNN/TF32 flags, the AdamW kernel, torch.compile) and returns the report of what it applied and why it skipped
anything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from utils.device.gpu import GPUInfo, detect_gpu
from utils.device.precision import PrecisionChoice, choose_precision
from utils.files import write_json_atomic
from utils.options.arguments import OPTIMIZERS, argument_defaults

GRAD_CHECKPOINTING = "gradient checkpointing"
SDPA = "SDPA attention"
MIXED_PRECISION = "mixed precision"
TF32 = "TF32 matmuls"
CUDNN_BENCHMARK = "cuDNN benchmark"
FUSED_GELU = "fused GELU"
FUSED_ADAMW = "fused AdamW"
ADAMW_8BIT = "8-bit AdamW"
TORCH_COMPILE = "torch.compile"


@dataclass
class OptimizationReport:
    """What `TrainingOptimizer.apply` (or `.plan`) did: applied items with details, skipped ones with reasons."""

    device: dict[str, Any]
    precision: dict[str, Any]
    applied: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def add(self, name: str, detail: str) -> None:
        self.applied.append({"name": name, "detail": detail})

    def skip(self, name: str, reason: str) -> None:
        self.skipped.append({"name": name, "reason": reason})

    def is_applied(self, name: str) -> bool:
        return any(item["name"] == name for item in self.applied)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "precision": self.precision, "applied": self.applied, "skipped": self.skipped}

    def save(self, path: Any) -> Any:
        return write_json_atomic(path, self.to_dict())

    def to_markdown(self) -> str:
        lines = [f"**Device:** {self.device.get('summary', '')}", ""]
        lines += [f"- **{item['name']}**: on. {item['detail']}" for item in self.applied]
        lines += [f"- **{item['name']}**: off. {item['reason']}" for item in self.skipped]
        return "\n".join(lines)


def gpt_transformer(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers GPT2Model inside coqui's GPTTrainer, an Xtts, or the XTTS GPT wrapper."""
    found = getattr(model, "xtts", model)
    while not hasattr(found, "h"):  # GPTTrainer.xtts -> Xtts.gpt (coqui GPT) -> GPT.gpt (GPT2Model)
        found = found.gpt
    return found


def set_gradient_checkpointing(gpt2: torch.nn.Module, enable: bool) -> int:
    """Turn recompute-in-backward on or off for every GPT2 block; returns how many blocks are on.

    `gradient_checkpointing_enable()` cannot be used: after setting the flags it asks for the input
    embeddings, and XTTS deletes `wte` from its GPT2Model, so it raises AttributeError. The private
    setter it calls does the real work, with the non-reentrant checkpoint that needs no input grads.
    """
    from torch.utils.checkpoint import checkpoint

    func = functools.partial(checkpoint, use_reentrant=False)
    gpt2._set_gradient_checkpointing(enable=enable, gradient_checkpointing_func=func)
    return sum(bool(getattr(block, "gradient_checkpointing", False)) for block in gpt2.h)


def configure_gradient_checkpointing(gpt2: torch.nn.Module, enable: bool) -> None:
    blocks_on = set_gradient_checkpointing(gpt2, enable)
    if enable and blocks_on != len(gpt2.h):
        raise RuntimeError(f"Gradient checkpointing is on for {blocks_on} of {len(gpt2.h)} GPT blocks.")
    # A KV cache is never read in training; building one per step only costs memory.
    gpt2.config.use_cache = False


def _checkpointed(forward: Any, *args: Any, **kwargs: Any) -> Any:
    if torch.is_grad_enabled():
        from torch.utils.checkpoint import checkpoint

        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    return forward(*args, **kwargs)


def conditioning_modules(xtts_gpt: torch.nn.Module) -> list[torch.nn.Module]:
    """The conditioning path's blocks (the attention blocks of the conditioning encoder, the perceiver resampler)."""
    blocks = list(getattr(getattr(xtts_gpt, "conditioning_encoder", None), "attn", []))
    perceiver = getattr(xtts_gpt, "conditioning_perceiver", None)
    return blocks + ([perceiver] if perceiver is not None else [])


def configure_conditioning_checkpointing(xtts_gpt: torch.nn.Module, enable: bool) -> int:
    """Recompute the conditioning path in backward too (its activations grow with the batch like the GPT's).
    The forward is wrapped per instance, so module names and checkpoints are unchanged. Returns blocks on."""
    modules = conditioning_modules(xtts_gpt)
    for module in modules:
        module.__dict__.pop("forward", None)  # back to the class's forward
        if enable:
            module.forward = functools.partial(_checkpointed, module.forward)
    return len(modules) if enable else 0


def configure_activation(gpt2: torch.nn.Module) -> None:
    """GPT-2's `gelu_new` is a Python composite that keeps several intermediates for backward; the fused tanh
    GELU computes the same function (within 1e-7) in one kernel."""
    from transformers.activations import ACT2FN

    gpt2.config.activation_function = "gelu_pytorch_tanh"
    for block in gpt2.h:
        block.mlp.act = ACT2FN["gelu_pytorch_tanh"]


def configure_attention(gpt2: torch.nn.Module, enable_sdpa: bool) -> None:
    wanted = "sdpa" if enable_sdpa else "eager"
    gpt2.set_attn_implementation(wanted)
    if gpt2.config._attn_implementation != wanted:
        raise RuntimeError(f"GPT attention is {gpt2.config._attn_implementation!r}, expected {wanted!r}.")


def configure_mixed_precision(config: Any, choice: PrecisionChoice) -> None:
    # coqui's trainer builds autocast and the GradScaler from these two fields.
    config.mixed_precision = choice.mixed_precision
    config.precision = choice.precision if choice.mixed_precision else "fp32"


# A run's batches vary in length (clips of 1-11 s, length grouping or not) and cuDNN's benchmark mode autotunes
# again for every new input shape: it costs time and memory at each new length before it can save any. Off until
# the GPU record (docs/benchmarks.md, the mixed-length rows with and without it) shows that it wins.
CUDNN_BENCHMARK_WINS = False


def configure_tensor_cores(config: Any, enable: bool, cudnn_benchmark: bool = False) -> None:
    # The coqui trainer sets the torch flags from its config when it starts; the run restores them after.
    config.allow_tf32 = enable
    config.cudnn_benchmark = cudnn_benchmark


def fused_adamw_available(device: str) -> bool:
    """Whether this torch has the fused AdamW kernel for the device type ('cuda', 'cpu'; torch 2.11 has both)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return device in _get_fused_kernels_supported_devices()
    except ImportError:  # a torch that moved the helper: ask the optimizer itself
        try:
            torch.optim.AdamW([torch.zeros(1, device=device, requires_grad=True)], fused=True)
        except (RuntimeError, ValueError):
            return False
        return True


def default_adamw_kernel(device: str) -> str:
    """The AdamW implementation torch picks when none is asked for (coqui asks for none): foreach on CUDA,
    the per-parameter for-loop on a CPU."""
    return "foreach" if device == "cuda" else "for-loop"


def configure_optimizer(config: Any, fused: bool, eight_bit: bool) -> None:
    """AdamW as fused kernels (one kernel per step, no foreach temporaries; on CUDA and, since torch 2.4, on a
    CPU), or bitsandbytes' 8-bit AdamW (a quarter of the optimizer state) when asked for (CUDA or CPU)."""
    config.optimizer = "AdamW8bit" if eight_bit else "AdamW"
    params = dict(config.optimizer_params or {})
    params.pop("fused", None)
    if fused and not eight_bit:
        params.pop("foreach", None)  # torch refuses both at once
        params["fused"] = True
    config.optimizer_params = params


def compile_unavailable(cuda: bool) -> str:
    """Why torch.compile cannot run here ('' when it can): TorchDynamo on this Python, and the code generator
    Inductor needs (Triton on a CUDA GPU, a C++ compiler on a CPU)."""
    import shutil

    from torch._dynamo import is_dynamo_supported

    if not is_dynamo_supported():
        return "TorchDynamo does not support this Python or platform"
    if cuda:
        from torch.utils._triton import has_triton

        return "" if has_triton() else "Triton is not installed (Inductor generates the GPU kernels with it)"
    return "" if shutil.which("g++") or shutil.which("c++") else "no C++ compiler (Inductor builds CPU code with one)"


def configure_compile(gpt2: torch.nn.Module, enable: bool, backend: str = "inductor") -> int:
    """Compile each GPT2 block in place (`Module.compile`: the block keeps its class and its state-dict names, so
    checkpoints, LoRA and gradient checkpointing see the same model). Compilation happens at the first step;
    `dynamic=True` because every batch has other lengths (one graph for all of them, not one per length).
    Returns the blocks compiled."""
    for block in gpt2.h:
        if enable:
            block.compile(backend=backend, dynamic=True)
        else:
            block._compiled_call_impl = None  # back to eager
    return len(gpt2.h) if enable else 0


_DECLARED = argument_defaults()  # the constructor's defaults are TrainArguments' own


@dataclass(frozen=True)
class Optimization:
    """One optimization as a unit: `decide` records on `report` whether it is on, and why, from what the arguments
    ask for and the device (no model needed: the page and the planner show it); `apply` does to a model and its
    trainer config exactly what the report says. `TrainingOptimizer` runs the units in order."""

    decide: Callable[[TrainingOptimizer, OptimizationReport], None]
    apply: Callable[[TrainingOptimizer, OptimizationReport, torch.nn.Module, Any], None]


def _decide_checkpointing(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    if not wanted.enable_grad_checkpoint:
        report.skip(GRAD_CHECKPOINTING, "turned off by the user")
    elif wanted.leaner_steps:
        report.add(
            GRAD_CHECKPOINTING, "every GPT block and the conditioning encoder recompute their activations in backward"
        )
    else:
        report.add(
            GRAD_CHECKPOINTING, "every GPT block recomputes its activations in backward (coqui's conditioning path)"
        )


def _apply_checkpointing(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    on = report.is_applied(GRAD_CHECKPOINTING)
    configure_gradient_checkpointing(gpt_transformer(model), on)
    xtts_gpt = getattr(getattr(model, "xtts", None), "gpt", None)
    if xtts_gpt is not None:
        configure_conditioning_checkpointing(xtts_gpt, on and wanted.leaner_steps)


def _decide_attention(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    if wanted.enable_sdpa:
        report.add(SDPA, "GPT attention uses torch scaled_dot_product_attention (fused kernels)")
    else:
        report.skip(SDPA, "turned off by the user: eager attention (the baseline)")


def _apply_attention(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    configure_attention(gpt_transformer(model), report.is_applied(SDPA))


def _decide_precision(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    choice = PrecisionChoice(**report.precision)
    if choice.mixed_precision:
        scaler = " with a GradScaler" if choice.grad_scaler else ""
        report.add(MIXED_PRECISION, f"{choice.precision.upper()} autocast{scaler}. {choice.reason}")
    elif wanted.mixed_precision_requested:
        report.skip(MIXED_PRECISION, choice.reason)
    else:
        report.skip(MIXED_PRECISION, "turned off by the user (precision='fp32'): FP32")


def _apply_precision(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    configure_mixed_precision(config, PrecisionChoice(**report.precision))


def _decide_tensor_cores(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    for name, detail in (
        (TF32, "FP32 matmuls and convolutions use TF32 tensor cores"),
        (CUDNN_BENCHMARK, "cuDNN picks the fastest convolution kernels"),
    ):
        if not wanted.enable_tf32:
            report.skip(name, "turned off by the user (enable_tf32=False): exact FP32 math")
        elif not wanted.gpu.ampere_or_newer:
            report.skip(name, "needs an Ampere or newer GPU" if wanted.gpu.available else "no CUDA GPU")
        elif name == CUDNN_BENCHMARK and not CUDNN_BENCHMARK_WINS:
            report.skip(
                name,
                "batches vary in length and cuDNN would autotune again at each new one: off until "
                "measured to win on a GPU (docs/benchmarks.md)",
            )
        else:
            report.add(name, detail)


def _apply_tensor_cores(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    configure_tensor_cores(config, report.is_applied(TF32), report.is_applied(CUDNN_BENCHMARK))


def _decide_activation(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    if wanted.leaner_steps:
        report.add(FUSED_GELU, "GPT-2's gelu_new composite replaced by the fused tanh GELU (same values)")
    else:
        report.skip(FUSED_GELU, "leaner steps off: coqui's step as shipped")


def _apply_activation(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    if report.is_applied(FUSED_GELU):
        configure_activation(gpt_transformer(model))


def _decide_optimizer(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    eight_bit, why_not = wanted.eight_bit_adamw()
    if eight_bit:
        where = "" if wanted.gpu.available else " (bitsandbytes' CPU kernels)"
        report.add(ADAMW_8BIT, f"bitsandbytes AdamW8bit: optimizer state in 8 bits (a quarter of the memory){where}")
    else:
        report.skip(ADAMW_8BIT, why_not)
    device = "cuda" if wanted.gpu.available else "cpu"
    where = "CUDA" if wanted.gpu.available else "CPU"
    if eight_bit:
        report.skip(FUSED_ADAMW, "8-bit AdamW is used instead")
    elif not wanted.leaner_steps:
        report.skip(FUSED_ADAMW, f"leaner steps off: coqui's AdamW, torch's {default_adamw_kernel(device)} kernel")
    elif fused_adamw_available(device):
        report.add(
            FUSED_ADAMW,
            f"one fused {where} kernel per optimizer step (torch's default would be the "
            f"{default_adamw_kernel(device)} AdamW)",
        )
    else:
        report.skip(
            FUSED_ADAMW, f"this torch has no fused AdamW on the {where}: its {default_adamw_kernel(device)} AdamW"
        )


def _apply_optimizer(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    # The model builds its optimizer from its own config, which coqui copied from `config` at construction
    # (TTSTokenizer.init_from_config): both must say which AdamW, or the choice never reaches the step.
    for target in {id(config): config, id(getattr(model, "config", config)): getattr(model, "config", config)}.values():
        configure_optimizer(target, report.is_applied(FUSED_ADAMW), report.is_applied(ADAMW_8BIT))


def _decide_compile(wanted: TrainingOptimizer, report: OptimizationReport) -> None:
    if not wanted.torch_compile:
        report.skip(TORCH_COMPILE, "off by default: not yet measured on a GPU (torch_compile=True turns it on)")
    elif why_not := compile_unavailable(wanted.gpu.available):
        report.skip(TORCH_COMPILE, why_not)
    else:
        report.add(
            TORCH_COMPILE,
            "each GPT block compiled by TorchInductor (dynamic shapes) at the first step: that step takes "
            "minutes longer; unmeasured on a GPU, no faster on a CPU (1.01x)",
        )


def _apply_compile(wanted: TrainingOptimizer, report: OptimizationReport, model: Any, config: Any) -> None:
    configure_compile(gpt_transformer(model), report.is_applied(TORCH_COMPILE))


# In the order they are decided (and listed) and applied; compile last, once the blocks are as they will train.
OPTIMIZATIONS = (
    Optimization(_decide_checkpointing, _apply_checkpointing),
    Optimization(_decide_attention, _apply_attention),
    Optimization(_decide_precision, _apply_precision),
    Optimization(_decide_tensor_cores, _apply_tensor_cores),
    Optimization(_decide_activation, _apply_activation),
    Optimization(_decide_optimizer, _apply_optimizer),
    Optimization(_decide_compile, _apply_compile),
)


class TrainingOptimizer:
    """What a run's arguments ask for, on this device: `plan()` decides every optimization (`OPTIMIZATIONS`) and
    `apply(model, config)` applies those decisions to a coqui GPTTrainer. Built by `from_arguments` in the run, the
    page's "What will be applied" and the memory planner, so all three show the same decisions."""

    def __init__(
        self,
        enable_grad_checkpoint: bool = _DECLARED["enable_grad_checkpoint"],
        enable_sdpa: bool = _DECLARED["enable_sdpa"],
        enable_mixed_precision: bool = _DECLARED["enable_mixed_precision"],  # alias: False is precision='fp32'
        precision: str = _DECLARED["precision"],
        gpu: GPUInfo | None = None,
        *,
        enable_tf32: bool = _DECLARED["enable_tf32"],
        optimizer: str = _DECLARED["optimizer"],
        leaner_steps: bool = True,
        torch_compile: bool = _DECLARED["torch_compile"],
    ) -> None:
        choose_precision(None, precision)  # validates the name
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {optimizer!r}.")
        self.enable_grad_checkpoint = enable_grad_checkpoint
        self.enable_sdpa = enable_sdpa
        self.enable_mixed_precision = enable_mixed_precision
        self.precision = precision
        self.gpu = gpu if gpu is not None else detect_gpu()
        self.enable_tf32 = enable_tf32
        self.optimizer = optimizer
        # False reproduces coqui's step as shipped (composite GELU, torch's default AdamW kernel, conditioning path
        # kept): the benchmark and the planner measure each saving on and off.
        self.leaner_steps = leaner_steps
        self.torch_compile = torch_compile

    @classmethod
    def from_arguments(cls, args: Any, gpu: GPUInfo | None = None, **overrides: Any) -> TrainingOptimizer:
        """The optimizations a run's TrainArguments ask for: the one place they are read from it (the run, the
        form's "What will be applied" and the planner build it here, so no option is left out)."""
        return cls(
            enable_grad_checkpoint=args.enable_grad_checkpoint,
            enable_sdpa=args.enable_sdpa,
            precision=args.precision,  # TrainArguments folds the enable_mixed_precision alias into it
            gpu=gpu,
            enable_tf32=args.enable_tf32,
            optimizer=args.optimizer,
            torch_compile=args.torch_compile,
            **overrides,
        )

    @property
    def mixed_precision_requested(self) -> bool:
        return self.enable_mixed_precision is not False and self.precision != "fp32"

    def eight_bit_adamw(self) -> tuple[bool, str]:
        """(on, why not) for bitsandbytes' 8-bit AdamW: it needs the package (pinned in requirements.txt);
        bitsandbytes >= 0.48 runs AdamW8bit on CUDA and on a CPU alike."""
        if self.optimizer != "adamw_8bit":
            return False, "not requested (optimizer='adamw_8bit' turns it on)"
        import importlib.util

        if importlib.util.find_spec("bitsandbytes") is None:
            return False, "bitsandbytes is not installed (pip install bitsandbytes==0.50.2): regular AdamW"
        return True, ""

    def precision_choice(self) -> PrecisionChoice:
        if not self.mixed_precision_requested:
            return PrecisionChoice(self.precision, "fp32", False, False, "Mixed precision is off: FP32.")
        return choose_precision(self.gpu.capability if self.gpu.available else None, self.precision)

    def plan(self) -> OptimizationReport:
        """Every optimization decided for this machine, without a model (shown in the UI before Start)."""
        report = OptimizationReport(
            device={**self.gpu.to_dict(), "summary": self.gpu.summary()}, precision=asdict(self.precision_choice())
        )
        for unit in OPTIMIZATIONS:
            unit.decide(self, report)
        return report

    def apply(
        self, model: torch.nn.Module, config: Any, decisions: OptimizationReport | None = None
    ) -> OptimizationReport:
        """Apply the decisions (`plan()` unless given) to a coqui `GPTTrainer` and its `GPTTrainerConfig`; return
        them."""
        report = decisions if decisions is not None else self.plan()
        for unit in OPTIMIZATIONS:
            unit.apply(self, report, model, config)
        return report
