"""The training data loader of every run: each rank its own share of the rows, every row once per epoch (several
datasets: as their weights draw them, utils.data.mix).

coqui's `XTTSDataset` ignores the index it is asked for when training (a random row, drawn with replacement
from Python's global RNG, which coqui seeds alike on every rank). `TrainingClipsDataset` returns the row it is
asked for, and `LengthGroupedBatchSampler` decides the epoch: every row once, in length-grouped batches
(or plain shuffled ones), dealt to the ranks so that each takes the same number of steps.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader

from utils.training.inputs import batching
from utils.training.inputs.batching import LengthGroupedBatchSampler
from utils.training.inputs.dataset import TrainingClipsDataset
from utils.training.ranks import distributed


def steps_per_epoch(rows: int, batch_size: int) -> int:
    """Steps of one epoch on each rank of this run (batching.steps_per_epoch for its world size)."""
    return batching.steps_per_epoch(rows, batch_size, distributed.world_size())


def train_loader(model: Any, config: Any, samples: list[dict[str, Any]], group_by_length: bool = True) -> DataLoader:
    """This rank's training loader; the trainer sets the sampler's epoch (and a resumed epoch's start)."""
    dataset = TrainingClipsDataset(model.config, samples, model.xtts.tokenizer, config.audio.sample_rate, False)
    sampler = LengthGroupedBatchSampler(
        dataset.row_lengths(),
        config.batch_size,
        config.training_seed,
        group_by_length=group_by_length,
        rank=distributed.rank(),
        world_size=distributed.world_size(),
        draws=dataset.draw_groups(),
    )
    workers = config.num_loader_workers
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=dataset.collate_fn,
        num_workers=workers,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=workers > 0,
    )
