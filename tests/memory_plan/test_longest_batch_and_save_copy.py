"""The planner plans the longest batch the training sampler can produce, and counts the background save's CPU copy
in host RAM (the size the real checkpoint writer copies)."""

from __future__ import annotations

import time

import pytest
import torch

from tests.helpers import tiny_training_setup
from utils.constants import MAX_AUDIO_LENGTH, XTTS_SAMPLE_RATE
from utils.memory_plan.planner import GIB, estimate_gpt_memory
from utils.training.inputs.batching import LengthGroupedBatchSampler

# Without checkpointing the GPT's activations grow with the padded clip (the tiny model's are small beside the
# per-clip parts every length shares: 200 text tokens, 6 s of conditioning).
PLAN = {"version": "tiny", "batch_size": 8, "grad_acumm": 1, "device": "cpu", "enable_grad_checkpoint": False}


def _longest_padding(lengths: list[float], batch: int, grouped: bool, epochs: int = 20) -> float:
    """The longest clip any batch of the product's sampler was padded to, over many epochs."""
    sampler = LengthGroupedBatchSampler(lengths, batch, seed=3, group_by_length=grouped)
    longest = 0.0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        longest = max(longest, *(max(lengths[i] for i in b) for b in sampler))
    return longest


@pytest.mark.slow
def test_the_plan_is_the_longest_batch_the_sampler_can_produce(tiny_base):
    short = [1.5 + 0.01 * i for i in range(39)]  # 1.5-1.9 s
    one_long = [*short, 9.0]
    all_long = [9.0] * 40
    with_one_long = estimate_gpt_memory(**PLAN, clip_seconds=one_long)
    all_of_them_long = estimate_gpt_memory(**PLAN, clip_seconds=all_long)
    all_short = estimate_gpt_memory(**PLAN, clip_seconds=short)

    # One long clip pads its whole batch to it (grouped or not): the plan is the all-long one, not an average.
    for grouped in (True, False):
        assert _longest_padding(one_long, 8, grouped) == 9.0
    assert with_one_long.traced_peak_bytes == all_of_them_long.traced_peak_bytes
    assert with_one_long.settings["max_audio_length"] == round(9.0 * XTTS_SAMPLE_RATE)
    assert all_short.settings["max_audio_length"] == round(max(short) * XTTS_SAMPLE_RATE)
    # Shorter padded clips: less activation memory in the planned step.
    activations = [e.breakdown_gib["activations"] for e in (all_short, with_one_long)]
    assert activations[0] < activations[1], activations
    assert all_short.traced_peak_bytes < with_one_long.traced_peak_bytes
    # Said in the breakdown.
    text = with_one_long.to_markdown()
    assert "longest batch" in text and "8 clip(s) padded to 9.00 s" in text and "of the 40 training clips" in text

    # A clip over max_audio_length is skipped by the loader: it does not set the plan.
    with_a_skipped_clip = estimate_gpt_memory(**PLAN, clip_seconds=[*short, 30.0])
    assert with_a_skipped_clip.traced_peak_bytes == all_short.traced_peak_bytes
    # No lengths: every clip at max_audio_length, as the loader allows, and said so.
    unknown = estimate_gpt_memory(**PLAN)
    assert unknown.settings["max_audio_length"] == MAX_AUDIO_LENGTH
    assert unknown.traced_peak_bytes > with_one_long.traced_peak_bytes
    assert "no clip lengths were given" in unknown.to_markdown()


def test_clip_seconds_are_checked_before_any_trace():
    for bad in ("9.0", [1.0, "2"], [-1.0], 3.0):
        with pytest.raises(ValueError, match="clip_seconds"):
            estimate_gpt_memory(**PLAN, clip_seconds=bad)


def _tensor_bytes(state) -> int:
    if torch.is_tensor(state):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(_tensor_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_tensor_bytes(v) for v in state)
    return 0


@pytest.mark.slow
def test_host_line_is_the_cpu_copy_the_background_save_makes(tiny_base, tmp_path, monkeypatch):
    """A real training step of the tiny model (AdamW state allocated), then the run's own checkpoint writer saves
    in the background; its CPU copy is measured and compared with the planner's host line for the same run."""
    import utils.training.checkpointing.checkpoints as checkpoints

    copies: list[int] = []
    real_copy = checkpoints.cpu_copy

    def measured_copy(state):
        copy = real_copy(state)
        copies.append(_tensor_bytes(copy))
        return copy

    monkeypatch.setattr(checkpoints, "cpu_copy", measured_copy)
    setup, args = tiny_training_setup(tiny_base, tmp_path, "save", grad_acumm=1)
    try:
        trainer = setup.trainer
        loader = trainer.model.get_data_loader(trainer.config, is_eval=False, samples=trainer.train_samples)
        trainer.model.on_train_epoch_start(trainer)
        trainer.train_step(next(iter(loader)), 1, 0, time.time())  # AdamW's state exists from here on
        assert trainer.checkpoints.background
        path = trainer.checkpoints.save(trainer, 1)
        trainer.checkpoints.flush()
        assert path is not None and path.is_file()
    finally:
        setup.release()
    assert len(copies) == 1 and copies[0] > 0

    keywords = {k: v for k, v in args.to_dict().items() if k not in ("train_csv", "eval_csv", "output_path")}
    for device in ("cpu", "cuda"):
        plan = estimate_gpt_memory(**keywords, device=device)
        planned = plan.host_breakdown_gib["checkpoint_copy"] * GIB
        assert abs(planned - copies[0]) <= 0.01 * copies[0], (device, planned, copies[0])
        assert "host RAM while a checkpoint is saved in the background" in plan.to_markdown()
    # A CPU run's RAM holds the step and the copy: both are in what must fit.
    assert plan.settings["device"] == "cuda" and "training_step" not in plan.host_breakdown_gib
    cpu = estimate_gpt_memory(**keywords, device="cpu")
    assert cpu.checkpoint_copy_bytes == round(cpu.host_breakdown_gib["checkpoint_copy"] * GIB)
    assert cpu.required_bytes == cpu.traced_peak_bytes + cpu.checkpoint_copy_bytes
