"""The tiny GPTTrainer built as a run builds it, synthetic batches for it, and counters of what runs."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from utils.options.arguments import TrainArguments
from utils.training.loop.gpt_model import FineTuneGPTTrainer
from utils.training.loop.setup import make_gpt_config


def build_model(base, tmp_path: Path, checkpoint: Path | None = None):
    """coqui's GPTTrainer as a run builds it, from the base model (or another checkpoint), and its config."""
    base_config = json.loads(base.config.read_text())
    args = TrainArguments(version="tiny", train_csv="unused.csv", output_path=str(tmp_path))
    config, _ = make_gpt_config(
        args,
        base,
        checkpoint=checkpoint or base.model,
        base_config=base_config,
        vocab_path=base.vocab,
        languages=base_config["languages"],
        language="en",
        steps_per_epoch=1,
        output_path=tmp_path,
        run_name="t",
    )
    return FineTuneGPTTrainer(config), config


def synthetic_batch(batch: int = 2, text_len: int = 12, codes: int = 40, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "text_inputs": torch.randint(5, 200, (batch, text_len), generator=g),
        "text_lengths": torch.tensor([text_len, text_len - 3][:batch]),
        "audio_codes": torch.randint(0, 1024, (batch, codes), generator=g),
        "wav_lengths": torch.tensor([codes * 1024 - 500, (codes - 6) * 1024][:batch]),
        "cond_mels": torch.randn(batch, 1, 80, 120, generator=g),
        "cond_idxs": None,
        "cond_lens": None,
    }


def without_dropout(model: torch.nn.Module) -> None:
    # Exact gradient comparisons need a deterministic forward.
    for module in model.modules():
        if isinstance(module, (torch.nn.Dropout, torch.nn.Dropout1d)):
            module.p = 0.0


def count_mlp_calls(gpt2: torch.nn.Module) -> list[int]:
    """Wrap each block's MLP forward with a counter (module hooks do not fire on the recompute)."""
    counts = [0] * len(gpt2.h)
    for i, block in enumerate(gpt2.h):
        original = block.mlp.forward

        def counted(*args, _i=i, _original=original, **kwargs):
            counts[_i] += 1
            return _original(*args, **kwargs)

        block.mlp.forward = counted
    return counts


def count_forward_calls(modules: list[torch.nn.Module]) -> list[int]:
    """Count each module's forward calls, the recompute in backward included (wrapped per instance)."""
    counts = [0] * len(modules)
    for i, module in enumerate(modules):
        original = module.forward

        def counted(*args, _i=i, _original=original, **kwargs):
            counts[_i] += 1
            return _original(*args, **kwargs)

        module.forward = counted
    return counts
