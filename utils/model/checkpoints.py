"""Loading XTTS checkpoint files without ever writing to them."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from utils.files import save_torch_atomic


def _loads_with_weights_only(path: Path) -> bool:
    try:
        torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)  # mmap: no full read
        return True
    except pickle.UnpicklingError:
        return False
    except RuntimeError:  # a pre-zip file: mmap is not possible, read it whole
        try:
            torch.load(str(path), map_location="cpu", weights_only=True)
            return True
        except pickle.UnpicklingError:
            return False


def loadable_checkpoint(path: Path, cache_dir: Path) -> Path:
    """A path coqui can load without rewriting it.

    Old XTTS files pickle config classes, which `weights_only` loading refuses; coqui then loads them
    under an allow-list and saves the converted file over the original. To leave the user's file
    untouched, the converted copy is written to `cache_dir` instead, once.
    """
    if _loads_with_weights_only(path):
        return path
    stat = path.stat()
    converted = cache_dir / f"{path.stem}-{stat.st_size}-{stat.st_mtime_ns}.pth"
    if converted.is_file():
        return converted
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import _legacy_safe_globals

    with _legacy_safe_globals():  # weights_only loading with coqui's config classes allowed, nothing else
        checkpoint = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(checkpoint.get("config"), XttsConfig):
        checkpoint["config"] = checkpoint["config"].to_dict()
    cache_dir.mkdir(parents=True, exist_ok=True)
    return save_torch_atomic(checkpoint, converted)  # a unique temporary name: two runs may convert at once
