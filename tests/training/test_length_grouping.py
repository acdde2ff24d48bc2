"""Every clip once per epoch, in length-grouped batches: the batch sampler alone, then through train_gpt's real
coqui Trainer on the tiny model (a run stopped in the middle of its second epoch and resumed)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import write_dataset
from utils.gpt_train import train_gpt
from utils.training.inputs.batching import LengthGroupedBatchSampler, padding_share
from utils.training.loop.gpt_model import FineTuneGPTTrainer


def ljspeech_like(rows: int, seed: int = 0) -> list[float]:
    """Clip durations shaped like LJSpeech's: 1-10.1 s, skewed long, mean about 6.9 s."""
    return list(1.0 + 9.1 * np.random.default_rng(seed).beta(3.0, 1.6, rows))


def test_every_row_once_per_epoch_and_the_order_is_a_function_of_seed_and_epoch():
    lengths = ljspeech_like(103)
    sampler = LengthGroupedBatchSampler(lengths, 8, seed=7)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler) == 13
        assert sorted(i for b in batches for i in b) == list(range(103)), f"epoch {epoch}: not every row once"
        epochs.append(batches)
    assert epochs[0] != epochs[1], "each epoch is shuffled anew"
    again = LengthGroupedBatchSampler(lengths, 8, seed=7)
    again.set_epoch(1)
    assert list(again) == epochs[1], "a new process (a resume) computes the same epoch"
    again.skip_batches = 5
    assert list(again) == epochs[1][5:], "a resumed epoch starts after the batches already trained"
    assert len(again) == 13, "the epoch's length stays the full one"


def test_grouping_cuts_the_padding_of_random_batches():
    lengths = ljspeech_like(2000)
    for batch in (4, 8):
        shares = {}
        for grouped in (False, True):
            sampler = LengthGroupedBatchSampler(lengths, batch, seed=1, group_by_length=grouped)
            shares[grouped] = padding_share(list(sampler), lengths)
        assert shares[False] > 0.12, shares  # random batches: a sizeable share is padding
        assert shares[True] < shares[False] / 4, shares


def test_ranks_share_the_rows_and_take_the_same_number_of_steps():
    lengths = ljspeech_like(50)
    ranks = [LengthGroupedBatchSampler(lengths, 4, seed=3, rank=r, world_size=3) for r in range(3)]
    for sampler in ranks:
        sampler.set_epoch(2)
    epoch = [list(sampler) for sampler in ranks]
    assert {len(batches) for batches in epoch} == {len(ranks[0])} == {5}, "ceil(ceil(50 / 3) / 4) steps each"
    seen = Counter(i for batches in epoch for b in batches for i in b)
    assert set(seen) == set(range(50)) and sum(seen.values()) == 51, "every row, one repeated to pad the shards"
    for step in range(5):  # at each step the ranks train clips of similar length
        longest = [max(lengths[i] for i in epoch[r][step]) for r in range(3)]
        assert max(longest) - min(longest) < 1.5


@pytest.fixture
def trained_clips(monkeypatch):
    """The clip files of each training batch the real trainer formats, in order (a spy on the model's hook)."""
    batches: list[list[str]] = []
    original = FineTuneGPTTrainer.format_batch

    def spy(self, batch):
        if self.xtts.gpt.training:  # coqui puts only the GPT in training mode for a training epoch
            batches.append([Path(f).name for f in batch["filenames"]])
        return original(self, batch)

    monkeypatch.setattr(FineTuneGPTTrainer, "format_batch", spy)
    return batches


FAST = dict(version="tiny", language="en", enable_mixed_precision=False, num_workers=0, print_step=50, quality_eval=0)


@pytest.mark.slow
def test_the_trainer_sees_every_clip_once_per_epoch_also_across_a_resume(tmp_path, tiny_base, trained_clips):
    csv_path = write_dataset(tmp_path / "data", n=14)
    seen: list[dict] = []
    common = dict(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=2,
        batch_size=3,
        grad_acumm=1,
        save_step=100,
        **FAST,
    )
    stopped = train_gpt(
        **common, progress_callback=seen.append, stop_event=lambda: sum(r["type"] == "train" for r in seen) >= 6
    )
    assert stopped.status == "stopped" and len(trained_clips) == 6  # epoch 1 and half of epoch 2
    first_session = list(trained_clips)
    first_epoch = sorted(f for b in first_session[:4] for f in b)
    assert len(set(first_epoch)) == 12, "every training clip once in the first epoch"
    trained_clips.clear()
    resumed = train_gpt(**common, resume_from=stopped.run_dir)
    assert resumed.status == "finished" and len(trained_clips) == 2
    second_epoch = first_session[4:] + trained_clips
    files = [f for b in second_epoch for f in b]
    assert sorted(files) == first_epoch, "every clip once in the epoch stopped and resumed in the middle"
    assert second_epoch != first_session[:4], "the second epoch is ordered anew"
