"""Training data of a multi-process run: each rank loads its own shard of the rows.

coqui's `XTTSDataset` ignores the index it is asked for when training: each item is a random row drawn
(with replacement) from Python's global RNG, which coqui seeds alike on every rank, so under a
`DistributedSampler` every rank would load the same clips. `ShardedXTTSDataset` returns the row the
sampler asks for (and reports clips that fail to load, as `FineTuneXTTSDataset` does), so the sampler's
disjoint shards are what the ranks train on. One-device runs keep coqui's sampling unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from TTS.tts.layers.xtts.trainer.dataset import XTTSDataset

from utils.training.dataset import FineTuneXTTSDataset, NoLoadableClips


class _RowByIndex(XTTSDataset):
    """coqui's training item, but item `i` is row `i` (rows in coqui's seeded shuffle)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
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


class ShardedXTTSDataset(FineTuneXTTSDataset, _RowByIndex):
    """FineTuneXTTSDataset (clips that fail to load are reported) whose item `i` is row `i`."""


class ShardSampler(DistributedSampler):
    """This rank's shard of the rows, reshuffled each epoch (`set_epoch`); `skip_batches` starts the epoch
    after the batches an interrupted session already trained. Its length stays the full shard's."""

    def __init__(self, dataset: Any, batch_size: int, seed: int) -> None:
        super().__init__(dataset, shuffle=True, seed=seed, drop_last=False)
        self.batch_size = batch_size
        self.skip_batches = 0

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        return iter(indices[self.skip_batches * self.batch_size :])


def sharded_train_loader(model: Any, config: Any, samples: list[dict[str, Any]]) -> DataLoader:
    """This rank's training loader: a disjoint shard of the rows (shards padded to the same length by the
    sampler, so every rank takes the same number of steps), with the loader options of one-device runs."""
    dataset = ShardedXTTSDataset(model.config, samples, model.xtts.tokenizer, config.audio.sample_rate, False)
    workers = config.num_loader_workers
    return DataLoader(
        dataset,
        sampler=ShardSampler(dataset, config.batch_size, config.training_seed),
        shuffle=False,
        drop_last=False,
        collate_fn=dataset.collate_fn,
        batch_size=config.batch_size,
        num_workers=workers,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=workers > 0,
    )
