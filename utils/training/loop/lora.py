"""LoRA in a training run: the model-level pieces (utils.model.lora, also used by the memory planner) and the export
of a run's adapter from its checkpoint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from utils.files import save_torch_atomic, write_json_atomic
from utils.model.lora import (  # noqa: F401 - this module's names as before the model-level part moved
    ADAPTER_CONFIG,
    ADAPTER_DIR,
    ADAPTER_WEIGHTS,
    LORA,
    LORA_TARGETS,
    NEW_LANGUAGE_TRAINABLE,
    SCALING_KEY,
    TARGET_CHOICES,
    LoraSettings,
    adapter_state,
    apply_lora,
    frozen_dtype,
    hold_base_layers_in,
    is_lora_state,
    merge_lora_state,
    parse_targets,
    read_adapter_config,
)
from utils.model.ready import load_checkpoint_state


def export_adapter(run_dir: str | os.PathLike, checkpoint_path: str | os.PathLike, info: dict[str, Any]) -> Path:
    """Write `run_dir/adapter/`: the adapter's tensors from a run's checkpoint (tens of MB, not the whole GPT)
    and `adapter_config.json` (rank, alpha, targets, base model: `info`), each atomically."""
    checkpoint = load_checkpoint_state(checkpoint_path)
    state = adapter_state(checkpoint.get("model", checkpoint), bool(info.get("new_language")))
    folder = Path(run_dir) / ADAPTER_DIR
    folder.mkdir(parents=True, exist_ok=True)
    save_torch_atomic({"model": state}, folder / ADAPTER_WEIGHTS)
    write_json_atomic(folder / ADAPTER_CONFIG, {**info, "checkpoint": str(checkpoint_path), "tensors": len(state)})
    return folder
