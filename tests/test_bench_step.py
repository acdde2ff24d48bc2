"""The benchmarks' training step collates as training does: a finite loss at batch 1 on ~11 s clips.

It once collated with the eval dataset, whose conditioning slice starts at offset 0; coqui's GPT then masks the
conditioning segment of a batch's last row in the wrong units (mel frames as audio codes), which at batch 1 hid
every target of an ~11 s clip: the mel loss was NaN (benchmarks/bench_row.py)."""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks")]

import bench_common  # noqa: E402
import bench_row  # noqa: E402

pytestmark = pytest.mark.slow  # the tiny model's setup and three steps on ~11 s clips


def test_batch_one_steps_on_eleven_second_clips_have_a_finite_loss(tiny_base, tmp_path):
    train_csv, eval_csv = bench_common.write_dataset(tmp_path / "clips", 4, 2)  # 10.8-11.5 s each
    opts = argparse.Namespace(
        version="tiny",
        model_dir=Path(tiny_base.folder).parent,
        train_csv=train_csv,
        eval_csv=eval_csv,
        mixed_train_csv=None,
        batch=1,
        precision="auto",
    )
    row = bench_row.ROWS[0]  # coqui's step as shipped
    random.seed(0)  # the training slice's offsets
    setup = bench_row.build_setup(row, opts, tmp_path / "runs")
    try:
        trainer = setup.trainer
        trainer.config.batch_size = trainer.config.eval_batch_size = 1
        batches = bench_row.collate(trainer, 3, row)
        assert all(b["wav"].shape[0] == 1 and b["wav"].shape[-1] > 10.5 * 22050 for b in batches)
        trainer.model.on_train_epoch_start(trainer)
        step = bench_row.stepper(row, trainer, len(batches))
        losses = [step(batch)[2] for batch in batches[:3]]
        again = step(batches[0])[2]  # the same batch twice: its conditioning indices are not divided again
    finally:
        setup.release()
    assert all(math.isfinite(loss) for loss in losses), losses
    assert math.isfinite(again)
