"""Steps per epoch have one formula (utils.training.inputs.batching.steps_per_epoch): the sampler's length, the run's
count (batching.rank_steps_per_epoch), the learning-rate milestones and the page's effective-batch line agree
with it."""

from __future__ import annotations

import math
import re

import pytest

from utils.options.arguments import TrainArguments
from utils.training.inputs import batching
from utils.training.inputs.batching import LengthGroupedBatchSampler, optimizer_steps_per_epoch, steps_per_epoch
from utils.training.loop.setup import lr_milestones
from webui.plan_view import batch_markdown


@pytest.mark.parametrize("rows, batch, ranks", [(10, 4, 1), (10, 4, 2), (7, 3, 3), (1, 8, 1), (100, 1, 4)])
def test_every_count_of_steps_is_the_one_formula(rows, batch, ranks):
    steps = steps_per_epoch(rows, batch, ranks)
    assert steps == math.ceil(math.ceil(rows / ranks) / batch)
    for rank in range(ranks):
        sampler = LengthGroupedBatchSampler([1.0 + i for i in range(rows)], batch, 1, rank=rank, world_size=ranks)
        assert len(sampler) == steps == len(sampler.epoch_batches()), "the sampler yields what it counts"
    if ranks == 1:
        assert batching.rank_steps_per_epoch(rows, batch) == steps, "a plain run is one rank"
    devices = ",".join(str(i) for i in range(ranks)) if ranks > 1 else None
    line = batch_markdown(rows, batch, 2, 3, devices)
    shown = re.search(r"→ (\d+) steps? and (\d+) optimizer steps? per epoch", line)
    assert shown and (int(shown[1]), int(shown[2])) == (steps, optimizer_steps_per_epoch(steps, 2)), line


def test_the_milestones_count_optimizer_steps_the_same_way():
    args = TrainArguments(num_epochs=4, grad_acumm=3, lr_milestones=(0.5,))
    assert lr_milestones(args, steps_per_epoch=10) == [round(0.5 * 4 * optimizer_steps_per_epoch(10, 3))] == [8]
