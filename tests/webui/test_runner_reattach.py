"""The web runner follows the run folder only, so a runner created after the web server restarted re-attaches to
the worker still training, shows its progress and memory, and stops it through the folder's stop file."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tests.helpers import children_working, wait_until, write_dataset
from utils.files import read_json
from utils.options.arguments import TrainArguments
from utils.training.process.runner import TrainingRunner
from utils.training.recording.run_record import process_alive, read_run

pytestmark = pytest.mark.slow


def test_a_new_runner_reattaches_to_a_running_worker_and_stops_it(tmp_path, tiny_base):
    data = tmp_path / "data"
    csv_path = write_dataset(data, n=8)
    arguments = TrainArguments(
        version="tiny",
        train_csv=str(csv_path),
        num_epochs=60,
        batch_size=2,
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=0,
        print_step=50,
    )
    first = TrainingRunner(tmp_path / "output")
    assert first.start({**arguments.to_dict(), "audio_roots": [str(data)]})[0]
    working = children_working(tmp_path / "output")

    def first_step() -> bool:
        assert first.poll().active, f"{first.state.message}\n{first.log_tail()}"
        return any(r.get("type") == "train" for r in first.metrics())

    wait_until(first_step, "the first step", progress=working, describe=first.log_tail)
    assert first.poll().status.value == "running"
    run_dir, log_path = first.state.run_dir, first.state.log_path
    worker_pid = read_json(Path(run_dir) / "worker.json")["pid"]
    assert psutil.Process(worker_pid).ppid() == psutil.Process().pid, "a subprocess of the web side"

    # The web server restarts: a new runner on the same output folder finds the worker by its folder.
    second = TrainingRunner(tmp_path / "output")
    state = second.poll()
    assert state.active and state.status.value == "running" and state.run_dir == run_dir
    assert state.log_path == log_path and state.arguments["num_epochs"] == 60
    wait_until(lambda: second.poll().memory_history, "a memory sample", progress=working)  # one a second
    state = second.poll()
    assert state.memory_history and state.memory["process_rss_mb"] > 100, "the worker's memory, from memory.jsonl"
    assert any(r.get("type") == "train" for r in second.metrics())
    # Another start is refused while the worker trains, though this runner did not start it.
    assert not second.start(arguments.to_dict())[0]

    assert second.stop().startswith("Stopping")
    assert (Path(run_dir) / "stop").is_file()
    wait_until(lambda: not second.poll().active, "the stop", progress=working, describe=second.log_tail)
    state = second.poll()
    assert state.status.value == "stopped", (state.error, second.log_tail())
    checkpoint = read_run(run_dir)["stop_checkpoint"]
    assert Path(checkpoint).is_file() and state.message.startswith(f"Stopped. Checkpoint saved: `{checkpoint}`")
    assert read_run(run_dir)["status"] == "stopped"
    assert process_alive(read_json(Path(run_dir) / "worker.json")) is False, "the worker has ended"
    # The first runner reaps its child once the kernel has torn it down (psutil calls it a zombie a moment earlier).
    wait_until(lambda: not first.poll().active, "the first runner to see the end", progress=working, stall=30)
    assert first.poll().status.value == "stopped", "the first runner reads the same ending from the folder"
    assert "Stopped at step" in second.log_tail(), "the worker's output is in the run's log"
    # A third runner (another restart) finds nothing to follow: the worker has ended.
    assert TrainingRunner(tmp_path / "output").poll().status.value == "idle"
