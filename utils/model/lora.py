"""LoRA fine-tuning of the XTTS GPT with PEFT: the adapted blocks, what stays trainable, the merge and the adapter.

`apply_lora` injects PEFT's LoRA layers into the GPT2 blocks of `model.xtts.gpt.gpt` (attention and MLP
projections by default) and freezes everything else of the GPT, except, for a new language, the text
embedding and the output heads (the new tokens' rows must be learnt). Frozen base weights of the adapted
layers are held in the run's half precision where autocast computes in it anyway (a CUDA run with mixed
precision); on a CPU they stay in FP32.

The scaling (alpha / rank) is kept as a buffer in the GPT (`lora_scaling`), so every checkpoint of a LoRA
run says how to merge itself: `merge_lora_state` turns such a state dict into plain XTTS weights, which
`ready/` holds and coqui's `Xtts.load_checkpoint` loads as it is. `adapter_state` is the adapter alone.

A model-level module (below training and the memory planner, which both adapt the GPT); a run's export of its
adapter is `utils.training.loop.lora.export_adapter`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

LORA = "LoRA"  # its name in the optimization report
LORA_TARGETS = ("c_attn", "c_proj", "c_fc")  # GPT2 block: attention in/out projections, MLP in/out
TARGET_CHOICES = ("c_attn", "c_proj", "c_fc", "attn.c_proj", "mlp.c_proj")
SCALING_KEY = "lora_scaling"  # the buffer in the GPT2Model; its state-dict key ends with this
ADAPTER_DIR = "adapter"
ADAPTER_WEIGHTS = "adapter_model.pth"
ADAPTER_CONFIG = "adapter_config.json"
# Trained with the adapter when the run adds a language: the rows of its new tokens live there.
NEW_LANGUAGE_TRAINABLE = ("text_embedding", "text_head", "mel_head")


@dataclass(frozen=True)
class LoraSettings:
    rank: int
    alpha: float
    targets: tuple[str, ...] = LORA_TARGETS

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank

    @classmethod
    def from_args(cls, args: Any) -> LoraSettings | None:
        """From TrainArguments; None for a full fine-tune (lora_rank 0). lora_alpha 0 means twice the rank."""
        if not args.lora_rank:
            return None
        alpha = float(args.lora_alpha or 2 * args.lora_rank)
        return cls(int(args.lora_rank), alpha, parse_targets(args.lora_targets))


def parse_targets(text: str) -> tuple[str, ...]:
    """'c_attn, c_fc' -> ('c_attn', 'c_fc'); a ValueError names what is not a GPT2 block projection."""
    names = tuple(dict.fromkeys(part.strip() for part in str(text).split(",") if part.strip()))
    if not names:
        raise ValueError(f"lora_targets is empty: name GPT2 block projections, e.g. {','.join(LORA_TARGETS)}.")
    unknown = [name for name in names if name not in TARGET_CHOICES]
    if unknown:
        raise ValueError(f"lora_targets: {', '.join(unknown)} not known; choose from {', '.join(TARGET_CHOICES)}.")
    return names


def frozen_dtype(precision: dict[str, Any], cuda: bool) -> torch.dtype | None:
    """The dtype frozen base weights are held in: the run's autocast dtype on CUDA, else None (unchanged)."""
    if not cuda or not precision.get("mixed_precision"):
        return None
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision.get("precision", ""))


def apply_lora(
    model: torch.nn.Module, settings: LoraSettings, *, new_language: bool, dtype: torch.dtype | None = None
) -> dict[str, Any]:
    """Inject LoRA into the GPT2 blocks of coqui's GPTTrainer (or an Xtts) and freeze the rest of the GPT.
    Returns what was done: trainable and frozen parameter counts, targets, the frozen dtype."""
    from peft import LoraConfig, inject_adapter_in_model

    xtts = getattr(model, "xtts", model)
    gpt2 = xtts.gpt.gpt
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        target_modules=list(settings.targets),
        lora_dropout=0.0,
        bias="none",
        fan_in_fan_out=True,  # GPT2's Conv1D holds its weight as (in, out)
    )
    inject_adapter_in_model(config, gpt2)
    gpt2.register_buffer(SCALING_KEY, torch.tensor(settings.scaling, dtype=torch.float32))
    for name, parameter in xtts.gpt.named_parameters():
        parameter.requires_grad_(".lora_" in f".{name}")
    if new_language:
        for attribute in NEW_LANGUAGE_TRAINABLE:
            for parameter in getattr(xtts.gpt, attribute).parameters():
                parameter.requires_grad_(True)
    if dtype is not None:
        hold_base_layers_in(gpt2, dtype)
    trainable = sum(p.numel() for p in xtts.gpt.parameters() if p.requires_grad)
    total = sum(p.numel() for p in xtts.gpt.parameters())
    return {
        "rank": settings.rank,
        "alpha": settings.alpha,
        "targets": list(settings.targets),
        "trainable_parameters": trainable,
        "frozen_parameters": total - trainable,
        "frozen_dtype": str(dtype).removeprefix("torch.") if dtype is not None else "float32",
        "new_language_trainable": list(NEW_LANGUAGE_TRAINABLE) if new_language else [],
    }


def hold_base_layers_in(gpt2: torch.nn.Module, dtype: torch.dtype) -> None:
    """The frozen base weights of the adapted layers in `dtype` (parameters replaced, not converted in place:
    the same code serves the planner's fake tensors). Outside autocast (the scored evaluations speak without
    it) their input is cast to `dtype` and their output back, so the rest of the GPT sees its own dtype."""
    for module in gpt2.modules():
        base = getattr(module, "base_layer", None)
        if base is None:
            continue
        for name, parameter in list(base._parameters.items()):
            if parameter is not None:
                base._parameters[name] = torch.nn.Parameter(parameter.detach().to(dtype), requires_grad=False)
        if not getattr(base, "_lora_casts", False):
            base.register_forward_pre_hook(_input_to_weight_dtype)
            base.register_forward_hook(_output_to_caller_dtype)
            base._lora_casts = True


def _input_to_weight_dtype(module: torch.nn.Module, args: tuple) -> tuple | None:
    x = args[0]
    if torch.is_autocast_enabled(x.device.type) or x.dtype == module.weight.dtype:
        return None
    module.__dict__["_caller_dtype"] = x.dtype
    return (x.to(module.weight.dtype), *args[1:])


def _output_to_caller_dtype(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor | None:
    dtype = module.__dict__.pop("_caller_dtype", None)
    return output.to(dtype) if dtype is not None else None


def is_lora_state(state: dict[str, Any]) -> bool:
    return any(key.endswith(SCALING_KEY) for key in state)


def merge_lora_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Plain XTTS weights from the state dict of a LoRA model: W + scaling * (B @ A)^T for each adapted Conv1D
    (in float32, back in the weight's original dtype if that is float32, else float32), base layers renamed
    back, the LoRA tensors and the scaling buffer dropped. A state without LoRA comes back unchanged."""
    scalings = {key[: -len(SCALING_KEY)]: float(value) for key, value in state.items() if key.endswith(SCALING_KEY)}
    if not scalings:
        return state
    merged: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.endswith(SCALING_KEY) or ".lora_A." in key or ".lora_B." in key:
            continue
        if ".base_layer." not in key:
            merged[key] = value
            continue
        layer, leaf = key.split(".base_layer.")
        plain = f"{layer}.{leaf}"
        if leaf != "weight":
            merged[plain] = value.float()
            continue
        a = state[f"{layer}.lora_A.default.weight"].float()  # (rank, in)
        b = state[f"{layer}.lora_B.default.weight"].float()  # (out, rank)
        scaling = next(s for prefix, s in scalings.items() if layer.startswith(prefix))
        merged[plain] = value.float() + scaling * (b @ a).T  # Conv1D weight is (in, out)
    return merged


def adapter_state(state: dict[str, torch.Tensor], new_language: bool) -> dict[str, torch.Tensor]:
    """The adapter alone: the LoRA tensors and the scaling, and for a new language the embedding and heads."""
    extra = tuple(f"gpt.{name}." for name in NEW_LANGUAGE_TRAINABLE) if new_language else ()
    return {
        key: value
        for key, value in state.items()
        if ".lora_A." in key
        or ".lora_B." in key
        or key.endswith(SCALING_KEY)
        or (bool(extra) and key.removeprefix("xtts.").startswith(extra))
    }


def read_adapter_config(folder: str | os.PathLike) -> dict[str, Any]:
    return json.loads((Path(folder) / ADAPTER_CONFIG).read_text(encoding="utf-8"))
