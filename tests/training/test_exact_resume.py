"""A resume after a crash reproduces the uninterrupted run exactly (issue 30): the random generators and the sampler's
place are saved in every checkpoint and restored at the same step boundary. A run killed with SIGKILL mid-run (the
checkpoint writes are in the background, so the kill may land during one) and then resumed logs, step for step,
the same losses as the same run left alone: equal floats, not close ones (on main they differed from the step after
the checkpoint on, by up to 0.06). Every run is a CLI process, so all three share one thread setup."""

from __future__ import annotations

import signal

import pytest

from tests.helpers import write_dataset
from tests.training.test_faults import cli_train, wait_for_steps
from utils.files import read_jsonl
from utils.training.recording.run_record import list_runs, read_run

pytestmark = pytest.mark.slow

EPOCHS = 5
PLAN = ("--num-epochs", str(EPOCHS), "--save-step", "4", "--seed", "7")
STEPS = EPOCHS * 6  # 12 training rows: 6 steps an epoch at batch 2
ATTEMPTS = 3


def losses(run_dir) -> dict[tuple[str, int], float]:
    """(record type, step) -> loss of the run's train steps and evaluations, as metrics.jsonl logged them."""
    return {
        (r["type"], r["step"]): r["loss"]
        for r in read_jsonl(run_dir / "metrics.jsonl")
        if r["type"] in ("train", "eval") and r.get("loss") is not None
    }


def finish(process) -> str:
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output[-3000:]
    return output


@pytest.fixture(scope="module")
def alone(tmp_path_factory, tiny_base):
    """The dataset and the losses of the run left alone."""
    folder = tmp_path_factory.mktemp("exact")
    csv_path = write_dataset(folder / "data", n=14)
    finish(cli_train(csv_path, folder / "alone", *PLAN))
    (run_dir,) = list_runs(folder / "alone")
    expected = losses(run_dir)
    assert len([key for key in expected if key[0] == "train"]) == STEPS
    return csv_path, expected


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill -9", "Ctrl-C"])
def test_a_run_ended_mid_run_and_resumed_logs_the_uninterrupted_runs_losses(tmp_path, alone, how):
    """kill -9: the resume continues from the last periodic checkpoint. Ctrl-C: the run saves a checkpoint where it
    stopped, whose generators are those of the last step's end (the interrupt may come while the next batch loads)."""
    csv_path, expected = alone
    # A tiny step takes ~0.15 s: the steps after 9 leave the signal seconds to land mid-run. A run that had still
    # done its last step before it (a test process starved of CPU) is tried again in a fresh folder.
    for attempt in range(ATTEMPTS):
        output = tmp_path / f"ended-{attempt}"
        process = cli_train(csv_path, output, *PLAN)
        try:
            run_dir = wait_for_steps(output, 9, process, poll=0.05)  # past the checkpoint of step 8, mid-epoch
            process.send_signal(how)
            process.wait(120)
        finally:
            process.kill()
        record = read_run(run_dir)
        resumed_at = record.get("last_checkpoint_step") if how == signal.SIGKILL else record.get("steps_done")
        if resumed_at is not None and resumed_at < STEPS:
            break
    assert record["status"] == ("failed" if how == signal.SIGKILL else "interrupted"), record["status"]
    assert resumed_at is not None and resumed_at < STEPS, record
    finish(cli_train(csv_path, output, *PLAN, "--resume-from", str(run_dir)))

    resumed = losses(run_dir)
    assert read_run(run_dir)["status"] == "finished"
    assert sorted(resumed) == sorted(expected), "the same steps and evaluations"
    differing = {key: (expected[key], resumed[key]) for key in expected if resumed[key] != expected[key]}
    assert not differing, f"resumed at step {resumed_at}; losses that differ: {differing}"
