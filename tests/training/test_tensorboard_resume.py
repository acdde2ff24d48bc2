"""A kill -9 between a step's line in metrics.jsonl and its TensorBoard mirror (seen in CI: the curve lacked step 6
after a resume from checkpoint 6): the resumed run writes that step again, and draws each step once."""

from __future__ import annotations

from tests.helpers import tensorboard_scalars
from utils.files import append_jsonl
from utils.training.recording.tensorboard_log import TensorBoardMirror


def step_record(step: int) -> dict:
    return {"type": "train", "step": step, "loss": 10.0 - step}


def test_the_step_a_kill_left_unmirrored_is_written_by_the_resume(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    killed = TensorBoardMirror(tmp_path)
    for step in (1, 2, 3):
        append_jsonl(metrics, step_record(step))
        killed(step_record(step))
    append_jsonl(metrics, step_record(4))  # killed here: step 4 in metrics.jsonl, not yet in TensorBoard
    killed.close()

    resumed = TensorBoardMirror(tmp_path, resumed=True)  # from checkpoint 4
    for step in (5, 6):
        append_jsonl(metrics, step_record(step))
        resumed(step_record(step))
    resumed.close()

    assert tensorboard_scalars(tmp_path, "train/loss") == [(s, 10.0 - s) for s in range(1, 7)]


def test_a_resume_after_a_clean_stop_draws_each_step_once(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    stopped = TensorBoardMirror(tmp_path)
    for step in (1, 2, 3):
        append_jsonl(metrics, step_record(step))
        stopped(step_record(step))
    stopped.close()
    resumed = TensorBoardMirror(tmp_path, resumed=True)
    append_jsonl(metrics, step_record(4))
    resumed(step_record(4))
    resumed.close()
    assert [s for s, _ in tensorboard_scalars(tmp_path, "train/loss")] == [1, 2, 3, 4]
