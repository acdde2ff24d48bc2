"""`train_gpt(devices="0,1")`: one training process per device, started by torchrun, followed from here.

    this process (notebook, CLI or the web app's child) -- python -m utils.training.ddp_worker agent CONTROL N
        torchrun's elastic agent -- one worker per device: init_process_group, then train_gpt(...) as rank r

Rank 0 writes the run folder exactly as a one-device run does; run.json names this process as the run's
(so a reader marks the run failed if it disappears) and records the world size and devices. From here:
the caller's progress_callback receives rank 0's metrics records; a stop request (stop_event, Ctrl-C)
becomes a stop file every rank checks, so all stop after the same step with a checkpoint saved; when a
rank dies, the others are ended by torchrun, and run.json and metrics.jsonl record the failed rank and
the last checkpoint (kept: checkpoints are written atomically) before a RuntimeError says the same.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from utils.device.selection import check_devices_present, parse_devices, physical_gpu_ids
from utils.files import JsonlFollower, read_json, write_json_atomic
from utils.training import ddp_worker
from utils.training.arguments import TrainArguments
from utils.training.controls import StopFlag
from utils.training.distributed import LAUNCHER_ENV
from utils.training.records import TrainRecord, records_of
from utils.training.run_record import (
    METRICS_FILE,
    RUN_FILE,
    RunStatus,
    load_run,
    now_iso,
    process_identity,
    update_run,
)

_REPO_ROOT = Path(__file__).resolve().parents[2]
_END_GRACE_SECONDS = 60  # after SIGTERM, torchrun gives its workers 30 s before SIGKILL


def launch(args: TrainArguments, progress_callback: Any = None, stop_event: Any = None, audio_roots: Any = None) -> Any:
    """Train with one process per device in `args.devices`; returns rank 0's TrainResult. ValueError when the
    devices are missing or a rank refused the arguments or dataset; RuntimeError naming the rank that failed."""
    from utils.gpt_train import TrainResult

    devices = parse_devices(args.devices)
    if devices[0] != "cpu":
        import torch

        check_devices_present(devices, torch.cuda.device_count())
    control = Path(tempfile.mkdtemp(prefix="xtts-ddp-"))
    try:
        write_json_atomic(
            control / ddp_worker.SPEC_FILE,
            {
                "arguments": args.to_dict(),
                "devices": physical_gpu_ids(devices),
                "audio_roots": [str(r) for r in audio_roots] if audio_roots else None,
            },
        )
        # In this process's folder (relative paths mean the same to the ranks) and its own session (a terminal's
        # Ctrl-C reaches this process only, which turns it into a stop).
        agent = subprocess.Popen(
            [sys.executable, "-m", "utils.training.ddp_worker", "agent", str(control), str(len(devices))],
            env=_worker_env(devices),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        run = _RunFollower(control, progress_callback, args.resume_from)
        tail: deque[str] = deque(maxlen=60)
        echo = _echo_output(agent, tail)
        try:
            _wait(agent, control, run, stop_event)
        except BaseException as exc:  # e.g. progress_callback raised: the ranks must not outlive the call
            _end(agent)
            record_failure(
                run.run_dir, {"who": "the launcher", "error": f"failed: {type(exc).__name__}: {exc}"}, progress_callback
            )
            raise
        echo.join(timeout=10)
        run.poll()
        result = read_json(control / ddp_worker.RESULT_FILE)
        if agent.returncode == 0 and result:
            return TrainResult(**result)
        if result and run.run_dir and RunStatus.parse(load_run(run.run_dir).status) != RunStatus.FAILED:
            return TrainResult(**result)  # rank 0 had finished and exported; a rank failed while exiting
        refused = read_json(control / ddp_worker.REFUSED_FILE)
        failure = (
            refused
            or read_json(control / ddp_worker.FAILURE_FILE)
            or {"who": "torchrun", "error": f"ended with exit code {agent.returncode}. Last output:\n{''.join(tail)}"}
        )
        message = record_failure(run.run_dir, failure, progress_callback)
        if refused:
            raise ValueError(refused["message"])
        raise RuntimeError(message)
    finally:
        shutil.rmtree(control, ignore_errors=True)


def _worker_env(devices: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env[LAUNCHER_ENV] = json.dumps(process_identity())
    env["PYTHONUNBUFFERED"] = "1"
    # The ranks share the cores (torchrun would set 1 thread per rank, with a warning).
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // len(devices))))
    if devices[0] == "cpu":
        # Gloo binds to the interface the host name resolves to, which in containers is often not reachable;
        # every rank is on this machine, so the loopback interface always works.
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def _echo_output(agent: subprocess.Popen, tail: deque[str]) -> threading.Thread:
    """Copy the ranks' console to ours (a notebook shows it; the web app's child logs it), keeping a tail."""

    def pump() -> None:
        assert agent.stdout is not None
        for raw in iter(agent.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            tail.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()

    thread = threading.Thread(target=pump, daemon=True, name="ddp-output")
    thread.start()
    return thread


def _wait(agent: subprocess.Popen, control: Path, run: _RunFollower, stop_event: Any) -> None:
    """Until the agent ends: forward records, pass a stop request on. The first Ctrl-C stops every rank at the
    next step (a checkpoint is saved); a second one ends them at once."""
    stop_requested = StopFlag(stop_event)
    interrupts = 0
    while True:
        try:
            if agent.poll() is not None:
                return
            if stop_requested():
                (control / ddp_worker.STOP_FILE).touch()
            run.poll()
            time.sleep(0.2)
        except KeyboardInterrupt:
            interrupts += 1
            if interrupts == 1:
                print(
                    "\nStopping every rank at the next step boundary (a checkpoint is saved); press Ctrl-C again "
                    "to end them at once.",
                    flush=True,
                )
                (control / ddp_worker.STOP_FILE).touch()
            else:
                agent.send_signal(signal.SIGTERM)  # torchrun's agent passes it on to every rank


def _end(agent: subprocess.Popen) -> None:
    """SIGTERM to torchrun's agent, which passes it to every rank (SIGKILL after its grace period)."""
    if agent.poll() is None:
        agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=_END_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()


class _RunFollower:
    """This call's records of rank 0's metrics.jsonl, passed to progress_callback, once rank 0 names its run folder
    (a resumed run's file starts with the earlier sessions' records, which are skipped)."""

    def __init__(self, control: Path, callback: Any, resume_from: str) -> None:
        self.announced = control / ddp_worker.RUN_DIR_FILE
        self.callback = callback
        self.run_dir: Path | None = None
        self.metrics = JsonlFollower()
        # This session's records only: a resumed run's earlier records are skipped, also when the resume rewrites
        # metrics.jsonl (setting aside steps it trains again), which makes the follower read it from its start.
        self.started = time.time()
        if resume_from:
            folder = Path(resume_from).expanduser()
            self.metrics.path = (folder.parent if folder.is_file() else folder) / METRICS_FILE
            self.metrics.skip_existing()

    def poll(self) -> None:
        if self.run_dir is None:
            where = read_json(self.announced)
            if not where:
                return
            self.run_dir = Path(where["run_dir"])
            self.metrics.path = self.run_dir / METRICS_FILE
        records = self.metrics.follow()
        new = [r for r in records if not isinstance(r.get("time"), (int, float)) or r["time"] >= self.started - 1]
        records.clear()  # the follower keeps its offset; a long run's records are not kept here
        if self.callback is not None:
            for record in new:
                self.callback(record)


def record_failure(run_dir: Path | None, failure: dict[str, Any], progress_callback: Any = None) -> str:
    """Record in the run folder that a rank (or the launcher) failed, unless rank 0 already recorded its own
    failure; returns the message for the caller, naming the rank and the checkpoint to resume from."""
    from utils.training.checkpoints import newest_checkpoint
    from utils.training.metrics import MetricsLogger

    who = failure.get("who") or f"rank {failure['rank']}"
    error = f"Multi-device run failed: {who} {failure['error']}"
    if run_dir is None or not (run_dir / RUN_FILE).is_file():
        return error + " It failed before the run folder was written."
    for partial in run_dir.glob(".*.tmp"):  # a save cut short by the end of rank 0; every rank has ended
        partial.unlink(missing_ok=True)
    checkpoint = newest_checkpoint(run_dir)
    keep = (
        f" The last checkpoint is kept: {checkpoint}; continue with resume_from={str(run_dir)!r}."
        if checkpoint
        else " No checkpoint was saved."
    )
    record = load_run(run_dir)
    own_error = failure.get("rank") == 0 and failure.get("error_type") != "signal"
    if own_error and RunStatus.parse(record.status).ended:
        return error + keep  # rank 0 failed on its own and recorded how the run ended
    steps = [r.step for r in records_of(JsonlFollower(run_dir / METRICS_FILE).follow(), TrainRecord)]
    # StatusRecord's fields, with the same names in run.json.
    fields: dict[str, Any] = dict(
        finished=now_iso(),
        error=error + keep,
        failed_rank=failure.get("rank"),
        steps_done=steps[-1] if steps else (record.steps_done or 0),
        last_checkpoint=str(checkpoint) if checkpoint else None,
    )
    update_run(run_dir, status=RunStatus.FAILED, **fields)
    logger = MetricsLogger(
        run_dir / METRICS_FILE, batch_size=1, steps_per_epoch=1, total_steps=0, on_event=progress_callback
    )
    logger.status(RunStatus.FAILED.value, run_dir=str(run_dir), **fields)
    return error + keep
