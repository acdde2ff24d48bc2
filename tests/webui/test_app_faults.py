"""The web app killed (kill -9) during a run and started again: the training process notices it is orphaned, stops
at a step boundary with a checkpoint, and the new app shows the run's true status and resumes it to the end."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.helpers import cpu_seconds, folder_growth, wait_until
from tests.webui.app_server import AppServer
from tests.webui.test_client import absolute_path_csv, form, wait_for
from utils.files import read_json
from utils.training.recording.run_record import list_runs, read_run
from utils.training.recording.spec import WORKER_FILE

pytestmark = pytest.mark.slow

# 3 steps an epoch (12 rows, 2 held out: 10 in batches of 4). The orphaned worker stops at the first step boundary
# after the kill, which lands after step 2: 12 steps leave it most of the run to stop in, and the resume most to do.
EPOCHS = 4
STEPS = EPOCHS * 3


def test_kill_9_of_the_app_mid_run_then_restart_and_resume(tmp_path, tiny_base):

    csv_path = absolute_path_csv(tmp_path / "data")
    output = tmp_path / "output"
    first = AppServer(output, tmp_path / "app1.log", data_dirs=(tmp_path / "data",))
    try:
        first.wait_ready()
        client = first.client()
        assert client.predict(**form(str(csv_path), EPOCHS), api_name="/start_training") == "Training started."
        wait_for(client, lambda s: s["status"] == "running" and s["step"] >= 2, 180, "two steps")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(30)
    finally:
        first.close()

    run_dir = wait_until(lambda: next(iter(list_runs(output)), None), "the run folder", stall=10)
    # With no app, the orphaned worker alone shows progress: its run folder and its CPU time.
    worker_pid = lambda: read_json(run_dir / WORKER_FILE)["pid"]
    progress = (folder_growth(output), cpu_seconds(worker_pid))

    # The orphaned training process stops by itself at the next step, saving a checkpoint, and says so.
    def ended():
        record = read_run(run_dir)
        return record if record.get("status") not in (None, "starting", "running") else None

    record = wait_until(ended, "the orphaned run to stop", progress=progress, stall=120)
    assert record["status"] == "stopped", record
    assert Path(record["stop_checkpoint"]).is_file()

    second = AppServer(output, tmp_path / "app2.log", data_dirs=(tmp_path / "data",))
    try:
        second.wait_ready()
        client = second.client()
        assert client.predict(api_name="/training_status")["status"] == "idle"
        resumed_form = form(str(csv_path), EPOCHS, resume_from=run_dir.name)
        assert client.predict(**resumed_form, api_name="/start_training") == "Training started."
        done = wait_for(client, lambda s: s["status"] not in ("starting", "running"), 240, "the resumed run")
        assert done["status"] == "finished" and done["run_dir"] == str(run_dir) and done["step"] == STEPS
    finally:
        second.close()
    steps = [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").open() if json.loads(line)["type"] == "train"
    ]
    assert sorted(set(steps)) == list(range(1, STEPS + 1)), "no step lost or repeated across the crash"
