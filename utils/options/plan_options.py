"""The memory planner's own keywords, declared and checked the way TrainArguments' are: one place for every number.

`estimate_gpt_memory` and `fit_my_gpu` (utils.memory_plan) take train_gpt's arguments plus these. Each entry calls
`checked_plan_call` first, so a string, NaN, infinity or out-of-range value is a ValueError naming the keyword and
what it accepts (the same checks as TrainArguments: utils.options.option.checked_value), never a raw Python error or
a plan of something else. A keyword declared here is checked at every entry; one the planner takes without a
declaration here fails tests/memory_plan/test_plan_options.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.device.gpu import GPUInfo
from utils.options.arguments import TrainArguments
from utils.options.option import Option, checked_value

CARD_SIZES_GB = (4, 6, 8, 12, 16, 24, 48, 80)

# name: (a value of its type, its declaration). None always means "not given": the planner's default.
PLAN_OPTIONS: dict[str, tuple[Any, Option]] = {
    "card_gb": (
        0.0,
        Option(
            f"a GPU card's memory in GB to plan for ({', '.join(map(str, CARD_SIZES_GB))}, ...)",
            minimum=1,
            maximum=1024,
        ),
    ),
    "free_bytes": (0, Option("free GPU memory in bytes to plan for", minimum=0, maximum=1e15)),
    "train_rows": (
        0,
        Option("the dataset's training clips (a larger effective batch holds no more)", minimum=1, maximum=1e9),
    ),
    "safety_margin": (
        0.0,
        Option("the share of the traced peak kept free for the allocator (0.1 = 10%)", minimum=0, maximum=1),
    ),
    "cuda_overhead_bytes": (
        0,
        Option("CUDA context, kernels and workspaces in bytes, beside the traced peak", minimum=0, maximum=1e12),
    ),
    "device": ("cuda", Option("what to plan for: a GPU or a CPU run", choices=("cuda", "cpu"))),
    "fused_adamw": (False, Option("plan the fused AdamW kernel (True) or the foreach one (False)")),
    "leaner_steps": (True, Option("plan the run's leaner step (False: coqui's step as shipped)")),
    "frozen_models_on_gpu": (True, Option("plan the DVAE and HiFi-GAN resident on the GPU")),
    "generated_rows": (
        0,
        Option("texts generated per scored evaluation (the sentences and the probe texts)", minimum=1, maximum=10_000),
    ),
    "decoder_on_gpu": (False, Option("plan the HiFi-GAN decoder and speaker encoder on the GPU in scoring")),
    "whisper_on_gpu": (False, Option("plan Whisper on the GPU in scoring")),
}
# Keywords that are objects, not values: checked by type here, or by the planner itself (clip_seconds).
OBJECT_OPTIONS = ("gpu", "clip_seconds", "progress_callback", "stop_event", "progress")


def accepted(spec: Option, default: Any) -> str:
    """What a declared keyword takes, in words."""
    if spec.choices:
        return " or ".join(repr(choice) for choice in spec.choices)
    if isinstance(default, bool):
        return "True or False"
    kind = "a whole number" if isinstance(default, int) else "a number"
    return f"{kind} from {spec.minimum:g} to {spec.maximum:g}"


def checked_plan_option(name: str, value: Any) -> Any:
    """The value of one planner keyword (an integral float made an int), or a ValueError saying what it takes."""
    if value is None:
        return None
    if name == "gpu":
        if not isinstance(value, GPUInfo):
            raise ValueError(
                f"gpu must be a GPUInfo describing the GPU to plan for (utils.device.gpu.detect_gpu(), or "
                f"GPUInfo(available=True, capability=(8, 0), ...)); got {str(value)[:60]!r}. To plan for a card's "
                "memory, give fit_my_gpu card_gb= or free_bytes=."
            )
        return value
    if name not in PLAN_OPTIONS:
        return value
    default, spec = PLAN_OPTIONS[name]
    try:
        return checked_value(name, value, default, spec)
    except ValueError as exc:
        raise ValueError(f"{str(exc).rstrip('.')}: {name} takes {accepted(spec, default)}, {spec.help}.") from None


def checked_plan_call(args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with every planner keyword checked (None: not given) after train_gpt's arguments among `args` and
    `kwargs` were checked as TrainArguments (batch_size may be 'auto'); ValueError for the first bad one.
    Names neither declares are left to the planner, which refuses them by name."""
    checked = {name: checked_plan_option(name, value) for name, value in kwargs.items()}
    names = TrainArguments.positional_names()
    train = {**dict(zip(names, args)), **{k: v for k, v in kwargs.items() if k in TrainArguments.__dataclass_fields__}}
    TrainArguments(**train)
    return checked
