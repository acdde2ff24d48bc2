"""`python -m utils.training.process.worker RUN_DIR` on the tiny model: it runs the spec in the folder, settles "auto"
before any model is built, records memory and its result there, and stops at the folder's stop file with
a checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import children_working, file_growth, run_watched, wait_until, write_dataset
from utils.files import read_json, read_jsonl
from utils.options.arguments import TrainArguments
from utils.training.recording.run_record import create_run_dir, read_run
from utils.training.recording.spec import RunSpec, read_spec, request_stop

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_runs_the_folders_spec_and_stops_at_its_stop_file(tmp_path, tiny_base):
    data = tmp_path / "data"
    csv_path = write_dataset(data, n=8)
    args = TrainArguments(
        version="tiny",
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=60,
        batch_size="auto",
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=0,
        print_step=50,
    )
    run_dir = create_run_dir(tmp_path / "out", "worker")
    RunSpec.create(args, run_dir, [data]).write()
    assert not read_spec(run_dir).resolved, "the caller writes the arguments as given"
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - the worker's output for its life
    worker = subprocess.Popen(
        [sys.executable, "-m", "utils.training.process.worker", str(run_dir)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        working = (*children_working(tmp_path / "out"), file_growth(tmp_path / "worker.log"))

        def two_steps() -> bool:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            return sum(r.get("type") == "train" for r in read_jsonl(run_dir / "metrics.jsonl")) >= 2

        wait_until(two_steps, "two steps of the worker", progress=working)
        request_stop(run_dir)
        wait_until(lambda: worker.poll() is not None, "the worker to stop", progress=working)
        assert worker.returncode == 0, (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        if worker.poll() is None:
            worker.kill()
        log.close()

    spec = read_spec(run_dir)
    run = read_run(run_dir)
    assert spec.resolved and isinstance(spec.arguments["batch_size"], int), "auto settled before the model was built"
    assert spec.arguments["batch_size"] == run["arguments"]["batch_size"] == 7, "capped at the 7 training rows"
    assert spec.batch_size_auto == run["batch_size_auto"] and "batch_size auto = 7" in spec.batch_size_auto
    assert spec.audio_roots == (str(data.resolve()),)
    assert run["status"] == "stopped" and run["pid"] == worker.pid, "the worker is the run's process"
    steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "train"]
    assert 2 <= steps[-1] < 60, "stopped at a step boundary soon after the request, long before the end"
    checkpoint = Path(run["stop_checkpoint"])
    assert checkpoint.name == f"checkpoint_{steps[-1]}.pth"
    assert torch.load(checkpoint, map_location="cpu", weights_only=True)["step"] == steps[-1] - 1
    result = read_json(run_dir / "result.json")
    assert result["type"] == "result" and result["status"] == "stopped"
    assert result["result"]["run_dir"] == str(run_dir) and result["result"]["stop_checkpoint"] == str(checkpoint)
    memory = read_jsonl(run_dir / "memory.jsonl")
    assert memory and all(m["type"] == "memory" and m["process_rss_mb"] > 100 for m in memory)


def test_the_worker_records_a_refused_spec_and_exits_2(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(
        json.dumps({"version": 1, "arguments": {"train_csv": str(tmp_path / "gone.csv")}, "run_dir": str(run_dir)})
    )
    done = run_watched([sys.executable, "-m", "utils.training.process.worker", str(run_dir)], cwd=ROOT)
    assert done.returncode == 2
    result = read_json(run_dir / "result.json")
    assert result["type"] == "error" and "train_csv not found" in result["error"]
    assert "Traceback" in result["traceback"] and b"train_csv not found" in done.stderr
    assert not (run_dir / "run.json").exists(), "refused before the run began"


def test_a_result_file_that_is_a_folder_is_refused_in_one_line_before_the_run(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "result.json").mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"version": 1, "arguments": {}, "run_dir": str(run_dir)}))
    done = run_watched([sys.executable, "-m", "utils.training.process.worker", str(run_dir)], cwd=ROOT)
    assert done.returncode == 2 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    assert b"result.json is not a file" in done.stderr and b"move it away" in done.stderr
    assert not (run_dir / "run.json").exists() and (run_dir / "result.json").is_dir()
