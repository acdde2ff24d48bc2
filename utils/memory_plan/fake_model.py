"""The product's training model (coqui GPTTrainer, our subclass) built without weights, on fake tensors.

Construction runs coqui's own `__init__`: every large tensor is created on the meta device (no
memory, no random init), the few small ones that construction computes with (mel filter banks)
stay real, and then everything is swapped for fake CPU tensors of the same shapes and dtypes. The
full-size model is ready in about a second and takes no RAM for weights.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from utils.memory_plan.architecture import Architecture

# Tensors of at least this many elements are created on the meta device while building.
_META_NUMEL = 1 << 16


class _LargeOnMeta(TorchFunctionMode):
    """Sends large tensor constructors without an explicit device to the meta device."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func in _device_constructors() and kwargs.get("device") is None:
            shape = args[0] if args and isinstance(args[0], (tuple, list, torch.Size)) else args
            sizes = [s for s in shape if isinstance(s, int)]
            if sizes and len(sizes) == len(shape) and math.prod(sizes) >= _META_NUMEL:
                kwargs["device"] = "meta"
        return func(*args, **kwargs)


def gpt_config(
    arch: Architecture,
    max_audio_length: int,
    files: dict[str, str],
    optimizer_params: dict[str, Any],
    learning_rate: float = 5e-6,
) -> Any:
    """coqui's GPTTrainerConfig as `utils.model_setup.make_gpt_config` builds it, for the fields that
    shape memory (model, lengths, optimizer); paths point at placeholder files."""
    from TTS.tts.configs.xtts_config import XttsAudioConfig
    from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTArgs, GPTTrainerConfig

    from utils.constants import MAX_CONDITIONING_SAMPLES, MAX_TEXT_TOKENS, MIN_CONDITIONING_SAMPLES

    args = GPTArgs(**{k: v for k, v in arch.args().items() if k in GPTArgs.__dataclass_fields__})
    args.min_conditioning_length = MIN_CONDITIONING_SAMPLES
    args.max_conditioning_length = MAX_CONDITIONING_SAMPLES
    args.max_wav_length = max_audio_length
    args.max_text_length = MAX_TEXT_TOKENS
    args.tokenizer_file = arch.vocab_file  # None: sizes from model_args
    args.dvae_checkpoint = files["dvae"]
    args.mel_norm_file = files["mel_stats"]
    args.xtts_checkpoint = ""
    args.gpt_checkpoint = ""
    return GPTTrainerConfig(
        model_args=args,
        audio=XttsAudioConfig(**dict(arch.audio)),
        optimizer="AdamW",
        optimizer_wd_only_on_weights=True,
        optimizer_params=optimizer_params,
        lr=learning_rate,
    )


@contextlib.contextmanager
def _placeholder_files() -> Iterator[dict[str, str]]:
    """An empty DVAE state (coqui insists on a file; strict=False loads nothing) and unit mel stats."""
    with tempfile.TemporaryDirectory(prefix="memory-plan-") as folder:
        files = {"dvae": str(Path(folder) / "dvae.pth"), "mel_stats": str(Path(folder) / "mel_stats.pth")}
        torch.save({}, files["dvae"])
        torch.save(torch.ones(80), files["mel_stats"])
        yield files


def build_fake_model(
    arch: Architecture, max_audio_length: int, optimizer_params: dict[str, Any], fake_mode: Any
) -> tuple[Any, Any]:
    """(model, config): our XttsGPTTrainer (a run's model and step) with fake parameters, in training mode as
    the trainer sets it."""
    from utils.model.gpt_trainer import XttsGPTTrainer

    with _placeholder_files() as files:
        config = gpt_config(arch, max_audio_length, files, optimizer_params)
        with _LargeOnMeta():
            model = XttsGPTTrainer(config)
    with fake_mode:
        model.to_empty(device="cpu")
    model.train()
    model.on_train_epoch_start(SimpleNamespace(model=model))  # all eval, GPT train: as the Trainer does
    return model, config


_TORCH_FLAGS = (
    (torch.backends.cuda.matmul, "allow_tf32"),
    (torch.backends.cudnn, "allow_tf32"),
    (torch.backends.cudnn, "benchmark"),
)


def apply_optimizations(model: Any, config: Any, optimizer: Any) -> Any:
    """Run the product's TrainingOptimizer on the model, leaving this process's torch flags as they were."""
    saved = [(owner, name, getattr(owner, name)) for owner, name in _TORCH_FLAGS]
    try:
        return optimizer.apply(model, config)
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
