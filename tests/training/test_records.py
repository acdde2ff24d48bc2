"""The records of a run folder (utils/training/recording/records.py): a real run's run.json and every metrics.jsonl line
read strictly through their declarations, and the format of earlier versions still read."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers import write_dataset
from utils.device.memory import get_memory_stats
from utils.files import read_jsonl
from utils.training.recording.records import (
    METRIC_RECORDS,
    EarlyStopState,
    MemoryRecord,
    QualityRecord,
    RecordError,
    RunRecord,
    StatusRecord,
    TrainRecord,
    metric_from_json,
    page_fields,
)
from utils.training.recording.run_record import load_run, read_run, update_run, write_run


@pytest.mark.slow
def test_every_record_of_a_real_run_reads_strictly(tmp_path, tiny_base):
    """3 epochs of 3 steps with a scored evaluation each; a learning rate of 1e-30 leaves the eval loss unchanged,
    so patience 1 stops the run early after the second evaluation: train, eval, quality and status records, a
    best checkpoint and an early stop, each with every field it declares and nothing else."""
    from utils.gpt_train import train_gpt
    from utils.quality.asr import bundled_whisper_dir

    seen: list[dict] = []
    result = train_gpt(
        train_csv=str(write_dataset(tmp_path / "data", n=12)),
        output_path=str(tmp_path / "out"),
        version="tiny",
        language="en",
        num_epochs=3,
        batch_size=4,
        grad_acumm=1,
        learning_rate=1e-30,
        enable_mixed_precision=False,
        num_workers=0,
        print_step=50,
        quality_eval=1,
        quality_max_audio_tokens=10,
        quality_eval_share=1.0,
        retention_languages="",  # tested on its own run (test_several_datasets.py)
        inference_search=1,  # the model's own settings measured: run.json `inference` and ready/ record them
        reference_search=0,  # the reference choice is measured in test_voice_run.py
        best_by="eval_loss",
        early_stop_patience=1,
        whisper_model=str(bundled_whisper_dir()),
        progress_callback=seen.append,
    )
    run_dir = Path(result.run_dir)
    lines = read_jsonl(run_dir / "metrics.jsonl")
    records = [metric_from_json(line, strict=True) for line in lines]
    assert [type(r).TYPE for r in records] == [line["type"] for line in lines]
    assert {type(r) for r in records} == set(METRIC_RECORDS), "every kind of record was written"
    assert [r.to_json() for r in records] == lines, "a record reads back to the same line"
    assert [metric_from_json(event, strict=True).to_json() for event in seen] == lines, "the callback got them all"
    statuses = [r.status for r in records if isinstance(r, StatusRecord)]
    assert statuses == ["starting", "running", "stopped"]
    quality = [r for r in records if isinstance(r, QualityRecord)]
    assert [q.step for q in quality] == [0, 3, 6] and quality[0].baseline and not quality[0].is_best
    assert quality[1].is_best and not quality[2].is_best and len(quality[2].probes) == 4

    raw = json.loads((run_dir / "run.json").read_text())
    run = RunRecord.from_json(raw, strict=True)
    assert run.to_json() == raw and run.extra == {}
    assert run.status == result.status == "stopped" and run.best is not None and run.best.step == 3
    assert run.early_stop == EarlyStopState(
        rule="eval_loss",
        patience=1,
        evals_without_improvement=1,
        step=6,
        best_step=3,
        message=run.early_stop.message,
    )
    assert run.message.startswith("Stopped early at step 6") and run.message.startswith(run.early_stop.message)
    assert run.quality is not None and len(run.quality.sentences) == 1
    assert run.ready_dir == str(result.ready_dir) and run.steps_done == 6 and run.arguments["num_epochs"] == 3
    assert run.verdict["step"] == 3 and run.inference["settings"]["temperature"] == 0.75


def test_a_record_of_the_previous_format_still_reads(tmp_path):
    """Before the records module the early-stopping count was `early_stopping` and the stop `early_stop`; a run
    of that version reads as one record, keeps what this version does not know, and resumes from its count."""
    from utils.training.evaluation.best_checkpoint import CheckpointChoice

    best = {"rule": "cer", "step": 3, "value": 0.5, "by": "cer", "why": "first", "metrics": {"cer": 0.5}}
    best["checkpoint"] = str(tmp_path / "best_model.pth")
    old = {
        "status": "stopped",
        "arguments": {"best_by": "cer", "batch_size": 4},
        "best": best,
        "early_stopping": {"rule": "cer", "patience": 2, "evals_without_improvement": 1},
        "early_stop": {"step": 9, "rule": "cer", "patience": 2, "best_step": 3, "message": "Stopped early at step 9"},
        "from_a_newer_version": {"kept": True},
    }
    write_run(tmp_path, old)
    (tmp_path / "best_model.pth").write_bytes(b"weights")

    record = load_run(tmp_path)
    assert record.early_stop == EarlyStopState(
        rule="cer", patience=2, evals_without_improvement=1, step=9, best_step=3, message="Stopped early at step 9"
    )
    assert record.early_stop.stopped and record.best.value == 0.5 and record.best.checkpoint == best["checkpoint"]
    assert record.extra == {"from_a_newer_version": {"kept": True}}
    assert "early_stopping" not in read_run(tmp_path) and read_run(tmp_path)["early_stop"]["step"] == 9
    with pytest.raises(RecordError, match="unknown field 'from_a_newer_version'"):
        RunRecord.from_json(old, strict=True)
    choice = CheckpointChoice("cer", 2, tmp_path, None)
    assert choice.best["step"] == 3 and choice.stopper.evals_without_improvement == 1

    # A writer keeps what it does not declare, and writes the old name as today's.
    update_run(tmp_path, status="running")
    on_disk = json.loads((tmp_path / "run.json").read_text())
    assert on_disk["from_a_newer_version"] == {"kept": True} and "early_stopping" not in on_disk
    assert on_disk["early_stop"]["evals_without_improvement"] == 1 and on_disk["status"] == "running"
    # Only the count of an older count-only record.
    write_run(tmp_path, {"early_stopping": {"rule": "cer", "evals_without_improvement": 2}})
    assert load_run(tmp_path).early_stop == EarlyStopState(rule="cer", evals_without_improvement=2)
    assert not load_run(tmp_path).early_stop.stopped


def test_strict_reading_refuses_what_a_record_does_not_declare(tmp_path):
    line = TrainRecord(step=1, epoch=1, time=time.time(), elapsed_s=0.1, **get_memory_stats()).to_json()
    assert metric_from_json(line, strict=True).step == 1
    with pytest.raises(RecordError, match="unknown field 'lost_key'"):
        metric_from_json({**line, "lost_key": 1}, strict=True)
    missing = {k: v for k, v in line.items() if k != "loss"}
    with pytest.raises(RecordError, match="missing field 'loss'"):
        metric_from_json(missing, strict=True)
    with pytest.raises(RecordError, match="step: '1' is not"):
        metric_from_json({**line, "step": "1"}, strict=True)
    with pytest.raises(RecordError, match="unknown metrics record type 'debug'"):
        metric_from_json({**line, "type": "debug"}, strict=True)
    assert metric_from_json({**line, "type": "debug"}) is None, "a reader skips a type it does not know"
    assert metric_from_json(missing).loss is None and metric_from_json({**line, "lost_key": 1}).extra == {"lost_key": 1}
    # A writer cannot name a field the record does not declare.
    with pytest.raises(RecordError, match="RunRecord has no field 'early_stopping'"):
        update_run(tmp_path, early_stopping={"rule": "cer"})
    with pytest.raises(TypeError):
        StatusRecord(status="running", progress=3)
    sample = MemoryRecord(time=time.time(), **get_memory_stats()).to_json()
    assert sample["type"] == "memory" and MemoryRecord.from_json(sample, strict=True).process_rss_mb > 0


def test_the_page_follows_the_fields_it_shows():
    """The runner keeps these fields of each line (runner.py used to list them by hand): the same set."""
    assert set(page_fields()) == {
        *("type", "step", "epoch", "total_steps", "loss", "eval_loss", "step_time", "loader_time"),
        *("samples_per_sec", "clips_failed", "status", "message", "error", "run_dir", "files", "texts", "cer"),
        *("wer", "similarity", "duration_ratio", "combined", "reasons", "rule", "is_best", "best_step"),
        *("naturalness", "naturalness_real", "babble_rate", "probes", "baseline"),
        *("voices", "speaker_rule", "retention"),  # each voice's scores and the retention rows (webui.quality_view)
    }


def test_the_tensorboard_mirror_names_only_declared_fields():
    from utils.training.recording.records import metric_class
    from utils.training.recording.tensorboard_log import _SCALARS

    for kind, tags in _SCALARS.items():
        cls = metric_class({"type": kind})
        assert cls is not None and set(tags) <= cls.field_names(), kind
