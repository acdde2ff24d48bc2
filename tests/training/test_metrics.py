"""metrics.jsonl records and the divergence guard, fed the way coqui's trainer feeds them."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from utils.files import read_jsonl
from utils.training.loop.trainer import DivergenceGuard, TrainingDiverged
from utils.training.recording.metrics import MetricsLogger


def logger_for(tmp_path, events=None) -> MetricsLogger:
    return MetricsLogger(
        tmp_path / "metrics.jsonl",
        batch_size=4,
        steps_per_epoch=3,
        total_steps=6,
        on_event=events.append if events is not None else None,
    )


def one_step(logger: MetricsLogger, step: int, text: float, mel: float, scaled_loss: float) -> None:
    trainer = SimpleNamespace(epochs_done=0, model=None)
    logger.log_for(trainer)
    logger.on_train_step_start()
    logger.train_step_stats(
        step,
        {
            "loss": torch.tensor(scaled_loss),
            "loss_text_ce": torch.tensor(text),
            "loss_mel_ce": torch.tensor(mel),
            "current_lr": 5e-6,
            "grad_norm": 1.5,
        },
    )
    logger.on_train_step_end()


def test_records_are_written_and_flushed_per_step(tmp_path):
    events: list[dict] = []
    logger = logger_for(tmp_path, events)
    one_step(logger, 0, 0.07, 7.0, 3.535)  # the trainer logs loss / grad_accum_steps
    logger.eval_stats(1, {"avg_loss": 7.2, "avg_loss_text_ce": 0.07, "avg_loss_mel_ce": 7.13})
    logger.status("finished", step=1)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["type"] for r in records] == ["train", "eval", "status"] and events == records
    train = records[0]
    assert train["step"] == 1 and train["epoch"] == 1 and train["total_steps"] == 6
    assert train["loss"] == pytest.approx(7.07), "the unscaled loss, comparable with the eval loss"
    assert train["lr"] == 5e-6 and train["grad_norm"] == 1.5
    assert train["step_time"] >= 0 and train["samples_per_sec"] > 0 and train["process_rss_mb"] > 0
    assert records[1]["eval_loss"] == 7.2


def test_non_finite_losses_are_recorded_as_null_and_stop_the_run_when_they_persist(tmp_path):
    logger = logger_for(tmp_path)
    guard = DivergenceGuard(logger, limit=3)
    one_step(logger, 0, 0.07, 7.0, 7.0)
    for step in (1, 2):
        one_step(logger, step, math.nan, math.inf, math.nan)
        guard()  # two in a row: FP16's scaler skips a few, so this is not yet divergence
    one_step(logger, 3, math.nan, math.nan, math.nan)
    with pytest.raises(TrainingDiverged, match="3 steps in a row"):
        guard()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines), "strict JSON: no NaN literals"
    assert [json.loads(line)["loss"] for line in lines][1:] == [None, None, None]
    one_step(logger, 4, 0.07, 7.0, 7.0)
    guard()  # a finite loss resets the streak
