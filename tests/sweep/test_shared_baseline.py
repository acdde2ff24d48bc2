"""A baseline taken from another run (utils.training.evaluation.shared_baseline) only when it is the same
evaluation of the same starting weights; on the sweep's real trial folders."""

from __future__ import annotations

import json
import shutil

from tests.sweep.conftest import trial_runs
from utils.training.evaluation.shared_baseline import shared_baseline


def _copy(run, target):
    shutil.copytree(run, target)
    return target


def _edit(run_dir, change):
    path = run_dir / "run.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def test_the_same_evaluation_is_taken_with_its_clips(resumed_sweep, tmp_path):
    source = trial_runs(resumed_sweep["output"], 0)[0]
    target = _copy(trial_runs(resumed_sweep["output"], 2)[0], tmp_path / "target")
    shutil.rmtree(target / "evals")
    record, why = shared_baseline(source, target)
    assert why == "" and record["baseline"] and record["baseline_from"] == str(source.resolve())
    for name in record["files"] + [p["file"] for p in record["probes"]]:
        assert (target / name).read_bytes() == (source / name).read_bytes()


def test_another_evaluation_or_start_is_refused_with_the_difference(resumed_sweep, finished_run, tmp_path):
    source = trial_runs(resumed_sweep["output"], 0)[0]
    other = _copy(trial_runs(resumed_sweep["output"], 2)[0], tmp_path / "other")
    _edit(other, lambda r: r["quality"].update(seed=7, sentences=["another sentence"]))
    _edit(other, lambda r: r["arguments"].update(version="v2.0.2"))
    record, why = shared_baseline(source, other)
    assert record is None
    assert "version 'tiny' vs 'v2.0.2'" in why and "the evaluation's sentences" in why and "seed" in why
    assert shared_baseline(finished_run, other) == (None, f"{finished_run.name} has no scored baseline")
    assert shared_baseline(other, other)[1] == "it is this run"
    assert "is not a run folder" in shared_baseline(tmp_path, other)[1]


def test_clip_names_outside_the_folders_are_refused(resumed_sweep, tmp_path):
    source = _copy(trial_runs(resumed_sweep["output"], 0)[0], tmp_path / "source")
    target = _copy(trial_runs(resumed_sweep["output"], 2)[0], tmp_path / "target")
    metrics = source / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    for record in records:
        if record.get("baseline"):
            record["files"] = ["../../elsewhere.wav"]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert shared_baseline(source, target) == (None, "source's baseline names clips outside its folder")
    assert not (tmp_path.parent / "elsewhere.wav").exists()
