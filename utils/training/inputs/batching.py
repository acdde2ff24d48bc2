"""The order in which an epoch visits the training rows: every row once, in batches of similar length.

`LengthGroupedBatchSampler` is the field's bucketing sampler: shuffle the rows, sort them by length within
large windows, cut the windows into batches, and shuffle the batches. A batch is padded to its longest
clip, so batches of similar clips carry little padding (on LJSpeech-like durations at batch 8, about a
quarter of the GPT's positions are padding when batches are drawn at random; see
benchmarks/bench_length_grouping.py). Off, it yields plain shuffled batches.

- Every row once per epoch; with several ranks the rows are padded (repeating the first ones, as torch's
  DistributedSampler does) to a multiple of the ranks, and each step's group of `batch_size x ranks`
  similar rows is dealt round-robin, so every rank takes the same number of steps on similar lengths.
- Several datasets drawn at their own rates (`draws`: each dataset's rows and how many of them an epoch takes,
  utils.data.mix): the epoch's rows are drawn first (whole copies, then a fresh random part), then batched alike.
- The order is a function of (seed, epoch) only: a resumed run computes the same epoch and, with
  `skip_batches`, starts after the batches the interrupted session trained. `len()` stays the full epoch's.

The loader (`train_loader`) of every run: each rank its own share of the rows, every row once per epoch (several
datasets: as their weights draw them, utils.data.mix).

coqui's `XTTSDataset` ignores the index it is asked for when training (a random row, drawn with replacement
from Python's global RNG, which coqui seeds alike on every rank). `TrainingClipsDataset` returns the row it is
asked for, and `LengthGroupedBatchSampler` decides the epoch: every row once, in length-grouped batches
(or plain shuffled ones), dealt to the ranks so that each takes the same number of steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler

from utils.data.mix import epoch_draw
from utils.training.inputs.dataset import TrainingClipsDataset
from utils.training.ranks import distributed

# Rows sorted together: this many batches' worth (Hugging Face's LengthGroupedSampler uses 50). Large
# enough that a batch finds similar neighbours, small enough that the epoch's order stays random.
WINDOW_BATCHES = 50


def steps_per_epoch(rows: int, batch_size: int, ranks: int = 1) -> int:
    """Steps of one epoch on each of `ranks` processes: each takes ceil(rows / ranks) rows (the shards are padded to
    equal length) in batches of `batch_size`. The one formula: the sampler, the run, its setup and the page use it."""
    return max(1, math.ceil(math.ceil(rows / ranks) / batch_size))


def optimizer_steps_per_epoch(steps: int, grad_acumm: int) -> int:
    """Optimizer updates in an epoch of `steps` steps: one per `grad_acumm` steps, and one for a partial rest."""
    return math.ceil(steps / grad_acumm)


class LengthGroupedBatchSampler(Sampler[list[int]]):
    """Batches of row indices for one rank; see the module docstring. `lengths[i]` is row i's length
    (seconds, or any measure of the padded work); `set_epoch` picks the epoch's order."""

    def __init__(
        self,
        lengths: Sequence[float],
        batch_size: int,
        seed: int,
        *,
        group_by_length: bool = True,
        rank: int = 0,
        world_size: int = 1,
        window_batches: int = WINDOW_BATCHES,
        draws: tuple[Sequence[Sequence[int]], Sequence[int]] | None = None,
    ) -> None:
        if not lengths:
            raise ValueError("No training rows to batch.")
        if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"batch_size {batch_size}, rank {rank} of {world_size}: not a valid split.")
        self.lengths = [float(value) for value in lengths]
        self.batch_size = batch_size
        self.seed = seed
        self.group_by_length = group_by_length
        self.rank = rank
        self.world_size = world_size
        self.window_batches = max(1, window_batches)
        self.epoch = 0
        self.skip_batches = 0  # batches of this epoch already trained (a resumed epoch)
        self.draws = draws
        self.epoch_rows = sum(draws[1]) if draws else len(self.lengths)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return steps_per_epoch(self.epoch_rows, self.batch_size, self.world_size)

    def epoch_batches(self) -> list[list[int]]:
        """This rank's batches of the whole epoch, in training order (skip_batches not applied)."""
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        if self.draws is None:
            rows = len(self.lengths)
            order = torch.randperm(rows, generator=generator).tolist()
        else:
            drawn = epoch_draw(*self.draws, lambda n: torch.randperm(n, generator=generator).tolist())
            rows = len(drawn)
            order = [drawn[i] for i in torch.randperm(rows, generator=generator).tolist()]
        total = math.ceil(rows / self.world_size) * self.world_size
        order = (order * math.ceil(total / rows))[:total]  # shards of equal length
        group = self.batch_size * self.world_size  # the rows of one step on all ranks
        if self.group_by_length:
            window = group * self.window_batches
            order = [
                index
                for start in range(0, total, window)
                for index in sorted(order[start : start + window], key=lambda i: self.lengths[i], reverse=True)
            ]
        groups = [order[start : start + group] for start in range(0, total, group)]
        shuffled = torch.randperm(len(groups), generator=generator).tolist()
        # A group's length is a multiple of the ranks (total is, and so is every full group).
        return [groups[g][self.rank :: self.world_size] for g in shuffled]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.epoch_batches()[self.skip_batches :])


def padding_share(batches: Sequence[Sequence[int]], lengths: Sequence[float]) -> float:
    """The share of the padded positions that are padding, over batches padded to their longest row."""
    padded = sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)
    real = sum(lengths[i] for batch in batches for i in batch)
    return 1.0 - real / padded if padded else 0.0


def rank_steps_per_epoch(rows: int, batch_size: int) -> int:
    """Steps of one epoch on each rank of this run (steps_per_epoch for its world size)."""
    return steps_per_epoch(rows, batch_size, distributed.world_size())


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
