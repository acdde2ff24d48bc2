"""The training clips as coqui's XTTS dataset serves them, with its hidden faults made visible.

coqui's `XTTSDataset` skips a clip it cannot load without a word, and when no clip loads it recurses
until Python gives up (RecursionError). `FineTuneXTTSDataset` reports every clip that fails to load
(the batch carries the failures to the main process, even from loader workers) and raises
`NoLoadableClips` when none is left. It also decodes each clip once: coqui decoded the file a second
time to cut the conditioning slice out of it.

coqui's training item ignores the index it is asked for: each item is a random row drawn with replacement
(so about a third of the rows go unseen in an epoch, and others twice). `TrainingClipsDataset` returns
the row the sampler asks for, so an epoch is what the batch sampler (utils.training.inputs.batching) makes it:
every row once, in length-grouped batches, on each rank its own share.
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
DURATION_KEY = "duration"  # seconds, set by utils.training.loop.setup.training_samples; read for length grouping
# Several datasets (utils.data.mix): a row's dataset, and the rows of it an epoch draws (None: every row once).
DATASET_KEY = "dataset"
DRAWS_KEY = "dataset_draws"


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


class _RowByIndex(XTTSDataset):
    """coqui's training item, but item `i` is row `i` (rows in coqui's seeded shuffle)."""

    def __init__(self, config: Any, samples: list[dict[str, Any]], *args: Any, **kwargs: Any) -> None:
        # coqui shuffles the list it is given in place: a copy keeps the caller's rows (and a second loader's
        # order) as they were.
        super().__init__(config, list(samples), *args, **kwargs)
        # coqui keyed the shuffled rows by language; one list gives a stable index -> row mapping.
        self.rows = [row for language in sorted(self.samples) for row in self.samples[language]]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        # A row that cannot be used is replaced by the next usable one (coqui: by a random one).
        for offset in range(len(self.rows)):
            position = (index + offset) % len(self.rows)
            key = f"row_{position}"
            if key in self.failed_samples:
                continue
            try:
                tokens, path, wav, cond, cond_len, cond_idxs = self.load_item(self.rows[position])
            except Exception:  # noqa: BLE001 - load_item recorded why; the next row is tried
                self.failed_samples.add(key)
                continue
            if wav is None or wav.shape[-1] > self.max_wav_len or tokens.shape[0] > self.max_text_len:
                self.failed_samples.add(key)
                continue
            return _item(tokens, path, wav, cond, cond_len, cond_idxs)
        raise NoLoadableClips(
            f"None of the {len(self.rows)} training clips can be loaded any more (moved, deleted "
            "or unreadable since the dataset was checked)."
        )

    def draw_groups(self) -> tuple[list[list[int]], list[int]] | None:
        """Several datasets drawn at their own rates: each dataset's row indices and the rows of it an epoch draws;
        None when every row is drawn once an epoch."""
        if all(row.get(DRAWS_KEY) is None for row in self.rows):
            return None
        groups: dict[int, list[int]] = {}
        counts: dict[int, int] = {}
        for index, row in enumerate(self.rows):
            groups.setdefault(int(row.get(DATASET_KEY) or 0), []).append(index)
            counts[int(row.get(DATASET_KEY) or 0)] = int(row.get(DRAWS_KEY) or 0)
        order = sorted(groups)
        return [groups[g] for g in order], [counts[g] for g in order]

    def row_lengths(self) -> list[float]:
        """Each row's duration in seconds (what a batch is padded by), in index order. Rows built without one
        are measured from the file's header; an unreadable file counts as 0 s (it fails when loaded)."""
        import soundfile as sf

        lengths = []
        for row in self.rows:
            duration = row.get(DURATION_KEY)
            if duration is None:
                try:
                    duration = sf.info(str(row["audio_file"])).duration
                except Exception:  # noqa: BLE001 - loading reports the clip; here it only sorts last
                    duration = 0.0
            lengths.append(float(duration))
        return lengths


def _item(
    tokens: torch.Tensor, path: str, wav: torch.Tensor, cond: torch.Tensor, cond_len: Any, cond_idxs: Any
) -> dict[str, Any]:
    """The item coqui's XTTSDataset builds, field for field."""
    return {
        "text": tokens,
        "text_lengths": torch.tensor(tokens.shape[0], dtype=torch.long),
        "wav": wav,
        "wav_lengths": torch.tensor(wav.shape[-1], dtype=torch.long),
        "filenames": path,
        "conditioning": cond.unsqueeze(1),
        "cond_lens": (
            torch.tensor(cond_len, dtype=torch.long) if cond_len is not torch.nan else torch.tensor([cond_len])
        ),
        "cond_idxs": torch.tensor(cond_idxs) if cond_idxs is not torch.nan else torch.tensor([cond_idxs]),
    }


class TrainingClipsDataset(FineTuneXTTSDataset, _RowByIndex):
    """The training rows: item `i` is row `i`, and clips that fail to load are reported (FineTuneXTTSDataset)."""
