"""Runs under faults, on the tiny model with coqui's real trainer: kill -9, two runs at once, a full disk, a NaN
loss, clips deleted mid-run. Each checks the run folder afterwards: a true status, a finite and loadable last
checkpoint, and a resume that finishes."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import cpu_seconds, file_growth, folder_growth, tensorboard_scalars, wait_until, write_dataset
from utils.data.validation import validate_dataset
from utils.files import read_jsonl, save_torch_atomic
from utils.gpt_train import train_gpt
from utils.training.checkpointing.checkpoints import newest_checkpoint, non_finite_tensors
from utils.training.recording.checkpoint_files import checkpoint_path, checkpoints
from utils.training.recording.run_record import list_runs, process_identity, read_run, write_run

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# quality_eval=0: measured quality has its own tests (test_quality_training.py).
FAST = dict(version="tiny", language="en", enable_mixed_precision=False, num_workers=0, print_step=50, quality_eval=0)


def steps(run_dir: str | Path) -> list[int]:
    return [r["step"] for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if r["type"] == "train"]


def assert_resumable(run_dir: str | Path, csv_path: Path, **common) -> None:
    """The newest checkpoint is finite and loads; a resume from the folder finishes the plan."""
    newest = newest_checkpoint(Path(run_dir))
    assert newest is not None, f"no checkpoint in {run_dir}"
    state = torch.load(newest, map_location="cpu", weights_only=True)
    assert not non_finite_tensors(state["model"]), f"{newest.name} holds NaN/inf weights"
    resumed = train_gpt(train_csv=str(csv_path), resume_from=str(run_dir), **{**FAST, **common})
    assert resumed.status == "finished" and resumed.run_dir == str(run_dir)
    # A kill -9 in the middle of a checkpoint write leaves its temporary file; the resume removes it.
    assert not list(Path(run_dir).glob("*.tmp")) and not list(Path(run_dir).glob(".*.tmp")), "temporary files left"
    train_rows = validate_dataset(csv_path).train_count
    assert max(steps(run_dir)) == common["num_epochs"] * -(-train_rows // common["batch_size"]), "the plan, exactly"


def cli_train(csv_path: Path, output: Path, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "utils.cli",
        "train",
        "--version",
        "tiny",
        "--train-csv",
        str(csv_path),
        "--output-path",
        str(output),
        "--no-enable-mixed-precision",
        "--num-workers",
        "0",
        "--batch-size",
        "2",
        "--grad-acumm",
        "1",
        "--quality-eval",
        "0",
        *extra,
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Its output goes to a file beside the output folder: a pipe nobody reads would block it, and the file's
    # growth tells a wait that it works.
    log = output.parent / f"cli-{time.monotonic_ns()}.log"
    with open(log, "w") as handle:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, text=True)
    process.log = log  # type: ignore[attr-defined]
    return process


def cli_output(process: subprocess.Popen) -> str:
    return process.log.read_text(errors="replace")  # type: ignore[attr-defined]


def cli_progress(output: Path, *processes: subprocess.Popen) -> tuple:
    """Signs that CLI runs work: their run folders, their output, their CPU time (see tests.helpers.wait_until)."""
    return (folder_growth(output), *(file_growth(p.log) for p in processes), *(cpu_seconds(p) for p in processes))


def wait_for_steps(output: Path, count: int, process: subprocess.Popen, poll: float = 0.5) -> Path:
    def reached() -> Path | None:
        for run_dir in list_runs(output):
            if len(steps(run_dir)) >= count:
                return run_dir
        if process.poll() is not None:
            raise AssertionError(f"the run ended early:\n{cli_output(process)[-3000:]}")
        return None

    return wait_until(reached, f"a run to reach {count} steps", progress=cli_progress(output, process), poll=poll)


def test_a_checkpoint_that_landed_after_the_last_record_is_what_the_dead_run_names(tmp_path):
    """A background save lands (renamed into place) before the training thread records it at the next step
    boundary: a kill in between left run.json naming the older checkpoint while a resume continues from the newer
    one (seen in CI). The reader that finds the process gone names the newest checkpoint on disk."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for steps_done in (4, 6):
        save_torch_atomic({"step": steps_done - 1}, checkpoint_path(run_dir, steps_done))
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = {"pid": int(finished.stdout), "pid_started": time.time() - 5, "host": socket.gethostname()}
    recorded = {"last_checkpoint": str(checkpoint_path(run_dir, 4)), "last_checkpoint_step": 4}
    write_run(run_dir, {"status": "running", **dead, **recorded})

    record = read_run(run_dir)
    assert record["status"] == "failed"
    assert record["last_checkpoint_step"] == 6 and record["last_checkpoint"] == str(checkpoint_path(run_dir, 6))
    assert "checkpoint_6.pth" in record["error"]
    assert json.loads((run_dir / "run.json").read_text())["last_checkpoint_step"] == 6

    # A record already naming the newest checkpoint keeps it; so does a run still alive.
    other = tmp_path / "other"
    other.mkdir()
    save_torch_atomic({"step": 3}, checkpoint_path(other, 4))
    write_run(other, {"status": "running", **process_identity(), **recorded, "last_checkpoint": "kept"})
    save_torch_atomic({"step": 5}, checkpoint_path(other, 6))
    assert read_run(other)["last_checkpoint"] == "kept"


def test_kill_9_of_the_training_process_is_recorded_and_the_run_resumes(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=14)
    process = cli_train(csv_path, tmp_path / "out", "--num-epochs", "40", "--save-step", "2")
    try:
        run_dir = wait_for_steps(tmp_path / "out", 5, process)
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        process.kill()
    record = read_run(run_dir)  # the reader finds the process gone and says so, on disk too
    assert record["status"] == "failed" and "ended without recording how" in record["error"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    assert record["last_checkpoint"] and Path(record["last_checkpoint"]).is_file()
    logged = steps(run_dir)
    assert_resumable(run_dir, csv_path, num_epochs=2, batch_size=2, grad_acumm=1, save_step=2)
    # Issue 17: the steps after the checkpoint were logged twice. They are trained again, so they are logged once;
    # what the killed process had logged of them is kept aside.
    assert steps(run_dir) == list(range(1, max(steps(run_dir)) + 1)), "each step once, in order"
    resumed_at = record["last_checkpoint_step"]
    aside = [r["step"] for r in read_jsonl(run_dir / "metrics.superseded.jsonl") if r["type"] == "train"]
    assert aside == [s for s in logged if s > resumed_at], "the killed leg's later steps are set aside"
    # TensorBoard draws each step once: the steps the killed leg wrote after its checkpoint were purged.
    curve = [step for step, _ in tensorboard_scalars(run_dir, "train/loss")]
    assert curve == list(range(1, max(steps(run_dir)) + 1))


def test_two_runs_started_at_once_on_one_output_folder_never_share_a_folder(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)
    first = cli_train(csv_path, tmp_path / "out", "--num-epochs", "2", "--run-name", "same")
    second = cli_train(csv_path, tmp_path / "out", "--num-epochs", "2", "--run-name", "same")
    wait_until(
        lambda: first.poll() is not None and second.poll() is not None,
        "both runs to end",
        progress=cli_progress(tmp_path / "out", first, second),
    )
    outputs = [cli_output(p) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, "\n".join(o[-2000:] for o in outputs)
    runs = list_runs(tmp_path / "out")
    assert len(runs) == 2 and len({r.name for r in runs}) == 2
    for run_dir in runs:
        assert read_run(run_dir)["status"] == "finished"
        assert steps(run_dir) == list(range(1, len(steps(run_dir)) + 1)), "each step logged once, in order"
        assert (run_dir / "ready" / "model.pth").is_file()


# How a full disk surfaces: the OS's ENOSPC, or torch's zip writer noticing a short write (issue 17: this one was
# recorded in run.json as it is).
DISK_FULL_ERRORS = {
    "ENOSPC": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "torch": lambda: RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 7616 vs 7504"),
}


@pytest.mark.parametrize("error", sorted(DISK_FULL_ERRORS))
def test_a_full_disk_during_a_checkpoint_write_keeps_the_last_good_one(tmp_path, tiny_base, monkeypatch, error):
    csv_path = write_dataset(tmp_path / "data", n=14)
    common = dict(num_epochs=2, batch_size=2, grad_acumm=1, save_step=2)
    real_save = torch.save

    def save_until_the_disk_fills(obj, handle, *args, **kwargs):
        # The real write path (utils.files.atomic_output) runs; the device says "full" from the 4th step on.
        if isinstance(obj, dict) and obj.get("step", 0) >= 3 and "optimizer" in obj:
            handle.write(b"\0" * 4096)
            raise DISK_FULL_ERRORS[error]()
        return real_save(obj, handle, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_until_the_disk_fills)
    with pytest.raises(Exception, match="The disk is full"):
        train_gpt(train_csv=str(csv_path), output_path=str(tmp_path / "out"), **FAST, **common)
    monkeypatch.setattr(torch, "save", real_save)
    run_dir = list_runs(tmp_path / "out")[0]
    record = read_run(run_dir)
    assert record["status"] == "failed" and "The disk is full: checkpoint_4.pth" in record["error"]
    assert "the last good checkpoint is kept" in record["error"] and "checkpoint_2.pth" in record["error"]
    assert "enforce fail" not in record["error"] and "RuntimeError" not in record["error"]
    assert [n for n, _ in checkpoints(run_dir)] == [2], "no truncated checkpoint_4 in place of a good one"
    assert_resumable(run_dir, csv_path, **common)


def test_a_nan_loss_never_saves_a_non_finite_model_nor_drops_the_last_finite_one(tmp_path, tiny_base, monkeypatch):
    from utils.training.loop.gpt_model import FineTuneGPTTrainer

    csv_path = write_dataset(tmp_path / "data", n=14)
    common = dict(num_epochs=4, batch_size=2, grad_acumm=1, save_step=2, save_n_checkpoints=1)
    real_step = FineTuneGPTTrainer.train_step
    calls = {"n": 0}

    def step_that_diverges(self, batch, criterion, *args, **kwargs):
        outputs, losses = real_step(self, batch, criterion, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] > 3:  # from the 4th step on the loss (and so every gradient) is NaN
            losses = {k: v * float("nan") if torch.is_tensor(v) else v for k, v in losses.items()}
        return outputs, losses

    monkeypatch.setattr(FineTuneGPTTrainer, "train_step", step_that_diverges)
    with pytest.raises(Exception, match="training diverged"):
        train_gpt(train_csv=str(csv_path), output_path=str(tmp_path / "out"), **FAST, **common)
    monkeypatch.setattr(FineTuneGPTTrainer, "train_step", real_step)
    run_dir = list_runs(tmp_path / "out")[0]
    assert read_run(run_dir)["status"] == "failed"
    assert [n for n, _ in checkpoints(run_dir)] == [2], "the NaN steps' saves were refused; checkpoint_2 stays"
    assert_resumable(run_dir, csv_path, **common)


def test_clips_deleted_mid_run_are_counted_and_none_left_fails_with_a_checkpoint(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)
    clips = sorted((tmp_path / "data" / "wavs").glob("*.wav"))
    common = dict(num_epochs=6, batch_size=2, grad_acumm=1, save_step=100, seed=3)
    kept = {}

    def delete(paths):
        def on_record(record):
            if record["type"] == "train" and record["step"] == 2 and not kept:
                for path in paths:
                    kept[path] = path.read_bytes()
                    path.unlink()

        return on_record

    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        progress_callback=delete(clips[:1]),
        **FAST,
        **common,
    )
    record = read_run(result.run_dir)
    assert result.status == "finished" and record["clips_failed"] >= 1
    assert clips[0].name in record["clip_failures"][0] and "skipped" in record["message"]
    trains = [r for r in read_jsonl(Path(result.run_dir) / "metrics.jsonl") if r["type"] == "train"]
    assert trains[-1]["clips_failed"] == record["clips_failed"] and trains[0]["clips_failed"] == 0
    for path, data in kept.items():
        path.write_bytes(data)

    kept.clear()
    with pytest.raises(Exception, match="None of the .* training clips can be loaded"):
        train_gpt(
            train_csv=str(csv_path),
            output_path=str(tmp_path / "out2"),
            progress_callback=delete(clips),
            **FAST,
            **common,
        )
    run_dir = list_runs(tmp_path / "out2")[0]
    record = read_run(run_dir)
    assert record["status"] == "failed" and "NoLoadableClips" in record["error"]
    assert record["stop_checkpoint"] and Path(record["stop_checkpoint"]).is_file(), "the steps done are saved"
    for path, data in kept.items():
        path.write_bytes(data)
    assert_resumable(run_dir, csv_path, **common)


def test_resuming_from_an_older_checkpoint_sets_the_later_ones_aside_and_writes_its_own(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=14)  # 12 train rows -> 2 steps per epoch at batch 6
    common = dict(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=3,
        batch_size=6,
        grad_acumm=1,
        save_step=2,
        save_n_checkpoints=3,
        **FAST,
    )
    first = train_gpt(**common)
    run_dir = Path(first.run_dir)
    assert [step for step, _ in checkpoints(run_dir)] == [2, 4, 6]
    old = {name: (run_dir / name).stat().st_ino for name in ("checkpoint_4.pth", "checkpoint_6.pth")}
    (run_dir / ".checkpoint_8.pth.k9x2.tmp").write_bytes(b"half a checkpoint")  # what a kill -9 mid-write leaves

    branch = train_gpt(**{**common, "resume_from": str(run_dir / "checkpoint_2.pth")})
    assert not list(run_dir.glob(".*.tmp")), "the killed write's temporary file is removed on resume"
    assert branch.status == "finished" and branch.run_dir == str(run_dir)
    (aside,) = run_dir.glob("superseded-*")
    assert {p.name: p.stat().st_ino for p in aside.iterdir()} == old, "the old branch kept, untouched"
    assert [step for step, _ in checkpoints(run_dir)] == [2, 4, 6]
    for name, inode in old.items():
        assert (run_dir / name).stat().st_ino != inode, f"{name} is the new branch's, not the old one reused"
    assert read_run(run_dir)["last_checkpoint"] == str(run_dir / "checkpoint_6.pth")
    assert steps(run_dir) == [1, 2, 3, 4, 5, 6], "the steps trained again are logged once (issue 17)"
    aside = [r["step"] for r in read_jsonl(run_dir / "metrics.superseded.jsonl") if r["type"] == "train"]
    assert aside == [3, 4, 5, 6], "the old branch's steps are kept aside"


def test_a_run_still_training_is_not_resumed_and_auto_batch_resumes_with_the_runs_own(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=14)  # 12 train rows -> 4 steps per epoch at batch 3
    seen: list[dict] = []
    common = dict(train_csv=str(csv_path), output_path=str(tmp_path / "out"), num_epochs=2, grad_acumm=1, **FAST)
    stopped = train_gpt(
        **common,
        batch_size=3,
        progress_callback=seen.append,
        stop_event=lambda: sum(r["type"] == "train" for r in seen) >= 3,
    )
    run_dir = Path(stopped.run_dir)
    record = read_run(run_dir)
    assert stopped.status == "stopped"

    # Recorded as running by a live process (this one): a second trainer must not write into the folder.
    (run_dir / "run.json").write_text(json.dumps({**record, "status": "running", "pid": os.getpid()}))
    with pytest.raises(ValueError, match="is still running"):
        train_gpt(**common, batch_size=3, resume_from=str(run_dir))
    (run_dir / "run.json").write_text(json.dumps(record))

    resumed = train_gpt(**common, batch_size="auto", resume_from=str(run_dir))
    assert resumed.status == "finished"
    assert read_run(run_dir)["arguments"]["batch_size"] == 3, "the run's own batch, not a new plan"
    assert steps(run_dir) == list(range(1, 9)), "the interrupted epoch and the plan continue exactly"
    last = torch.load(newest_checkpoint(run_dir), weights_only=True)
    assert {float(s["step"]) for s in last["optimizer"][0]["state"].values()} == {8.0}, "AdamW state restored"
