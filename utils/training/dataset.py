"""The training clips as coqui's XTTS dataset serves them, with its hidden faults made visible.

coqui's `XTTSDataset` skips a clip it cannot load without a word, and when no clip loads it recurses
until Python gives up (RecursionError). `FineTuneXTTSDataset` reports every clip that fails to load
(the batch carries the failures to the main process, even from loader workers) and raises
`NoLoadableClips` when none is left. It also decodes each clip once: coqui decoded the file a second
time to cut the conditioning slice out of it.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from TTS.tts.layers.xtts.trainer.dataset import XTTSDataset, get_prompt_slice

from utils.audio.io import load_audio

FAILURES_KEY = "load_failures"


class NoLoadableClips(RuntimeError):
    """Every training clip failed to load (moved, deleted or unreadable since the dataset was checked)."""


def prompt_slice(wav: torch.Tensor, max_length: int, min_length: int, is_eval: bool) -> tuple[torch.Tensor, int, list]:
    """coqui's conditioning slice (get_prompt_slice), cut from samples already decoded."""
    length = (min_length + max_length) // 2 if is_eval else random.randint(min_length, max_length)
    if wav.shape[-1] - length < 0:
        length = wav.shape[-1] // 2
    start = 0 if is_eval else random.randint(0, wav.shape[-1] - length)
    clip = F.pad(wav[:, start : start + length], pad=(0, max_length - length))
    return clip, clip.shape[-1], [start, start + length]


class FineTuneXTTSDataset(XTTSDataset):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._new_failures: list[str] = []  # since the last item was handed out, in this process
        super().__init__(*args, **kwargs)
        self.clip_count = len(self)

    def load_item(self, sample: dict[str, Any]) -> tuple:
        try:
            return self._load(sample)
        except Exception as exc:
            self._new_failures.append(f"{sample['audio_file']}: {type(exc).__name__}: {str(exc)[:160]}")
            raise

    def _load(self, sample: dict[str, Any]) -> tuple:
        text = str(sample["text"])
        tokens = self.get_text(text, sample["language"])
        path = sample["audio_file"]
        samples, _ = load_audio(path, self.sample_rate)
        wav = torch.from_numpy(np.clip(samples, -1.0, 1.0)).unsqueeze(0)
        if not text.strip() or wav.shape[-1] < 0.5 * self.sample_rate:
            raise ValueError("empty text, or a clip shorter than 0.5 s")
        if self.use_masking_gt_prompt_approach:
            cond, _, cond_idxs = prompt_slice(
                wav, self.max_conditioning_length, self.min_conditioning_length, self.is_eval
            )
            return tokens, path, wav, cond, torch.nan, cond_idxs
        # Conditioning on another clip (a reference_path): coqui reads that one itself.
        reference = sample.get("reference_path") or path
        cond, cond_len, _ = get_prompt_slice(
            reference, self.max_conditioning_length, self.min_conditioning_length, self.sample_rate, self.is_eval
        )
        return tokens, path, wav, cond, cond_len, torch.nan

    def __getitem__(self, index: int) -> dict[str, Any]:
        if len(self.failed_samples) >= self.clip_count:
            kind = "evaluation" if self.is_eval else "training"
            raise NoLoadableClips(
                f"None of the {self.clip_count} {kind} clips can be loaded any more (moved, "
                f"deleted or unreadable since the dataset was checked). Last: "
                f"{'; '.join(self._new_failures[-3:]) or 'see the log'}"
            )
        item = super().__getitem__(index)  # coqui retries another clip through self[...] on a failure
        item[FAILURES_KEY] = item.get(FAILURES_KEY, []) + self._new_failures
        self._new_failures = []
        return item

    def collate_fn(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        failures = [failure for item in batch for failure in item.pop(FAILURES_KEY, [])]
        collated = super().collate_fn(batch)
        collated[FAILURES_KEY] = failures
        return collated
