"""`train_gpt(devices="0,1")`: one training process per device, started by torchrun, followed from here.

    this process (notebook, CLI or the web app's worker) -- python -m utils.training.process.ddp_worker agent RUN_DIR N
        torchrun's elastic agent -- one rank per device: python -m utils.training.process.worker RUN_DIR

The run folder is the protocol (utils.training.recording.spec): this process creates it (or takes the resumed run's, or
the folder its own worker was started on) and writes spec.json with each rank's device; every rank runs that
spec as any worker does. Rank 0 writes the run folder exactly as a one-device run does; run.json names this
process as the run's (so a reader marks the run failed if it disappears) and records the world size and
devices. From here: the caller's progress_callback receives rank 0's metrics records; a stop request
(stop_event, Ctrl-C) becomes the folder's stop file every rank checks, so all stop after the same step with a
checkpoint saved; when a rank dies, the others are ended by torchrun, and run.json and metrics.jsonl record the
failed rank and the last checkpoint (kept: checkpoints are written atomically) before a RuntimeError says the
same. A run refused by the ranks (arguments, dataset) leaves no folder this process created.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from utils.constants import PROJECT_ROOT
from utils.data.check_cache import remove_from_new_output
from utils.device.selection import check_devices_present, parse_devices, physical_gpu_ids
from utils.files import JsonlFollower, read_json
from utils.options.arguments import TrainArguments
from utils.text.languages import canonical_language
from utils.training.controls import StopFlag
from utils.training.process import ddp_worker
from utils.training.ranks.distributed import LAUNCHER_ENV
from utils.training.recording.outcome import TrainResult
from utils.training.recording.records import TrainRecord, records_of
from utils.training.recording.run_record import (
    METRICS_FILE,
    RUN_FILE,
    RunStatus,
    create_run_dir,
    load_run,
    now_iso,
    process_identity,
    read_run,
    update_run,
)
from utils.training.recording.spec import (
    RESULT_FILE,
    RunSpec,
    check_control_files,
    clear_stop,
    refuse_active_run,
    request_stop,
)

_END_GRACE_SECONDS = 60  # after SIGTERM, torchrun gives its workers 30 s before SIGKILL


def launch(
    args: TrainArguments,
    progress_callback: Any = None,
    stop_event: Any = None,
    audio_roots: Any = None,
    run_dir: str | os.PathLike | None = None,
) -> TrainResult:
    """Train with one process per device in `args.devices`; returns rank 0's TrainResult. `run_dir`: the folder a
    worker was started on (else this call makes one). ValueError when the devices are missing or a rank refused
    the arguments or dataset; RuntimeError naming the rank that failed."""
    devices = parse_devices(args.devices)
    if devices[0] != "cpu":
        import torch

        check_devices_present(devices, torch.cuda.device_count())
    output_is_new = not Path(args.output_path).expanduser().exists()
    folder, created = _run_folder(args, run_dir)
    try:
        for stale in (RESULT_FILE, ddp_worker.REFUSED_FILE, ddp_worker.FAILURE_FILE):
            (folder / stale).unlink(missing_ok=True)
        if run_dir is None:  # a worker's folder: its stop file is its caller's request, already cleared
            clear_stop(folder)
        RunSpec.create(args, folder, audio_roots, devices=tuple(physical_gpu_ids(devices))).write()
        # In this process's folder (relative paths mean the same to the ranks) and its own session (a terminal's
        # Ctrl-C reaches this process only, which turns it into a stop).
        agent = subprocess.Popen(
            [sys.executable, "-m", "utils.training.process.ddp_worker", "agent", str(folder), str(len(devices))],
            env=_worker_env(devices),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        run = _RunFollower(folder, progress_callback, resumed=(folder / RUN_FILE).is_file())
        tail: deque[str] = deque(maxlen=60)
        echo = _echo_output(agent, tail)
        try:
            _wait(agent, folder, run, stop_event)
        except BaseException as exc:  # e.g. progress_callback raised: the ranks must not outlive the call
            _end(agent)
            record_failure(
                run.run_dir, {"who": "the launcher", "error": f"failed: {type(exc).__name__}: {exc}"}, progress_callback
            )
            raise
        echo.join(timeout=10)
        run.poll()
        return _outcome(agent.returncode, folder, run, tail, progress_callback)
    finally:
        if created and not (folder / RUN_FILE).is_file():
            shutil.rmtree(folder, ignore_errors=True)  # refused before the run began: no folder is left
            if output_is_new:
                remove_from_new_output(args.output_path)


def _outcome(returncode: int, folder: Path, run: _RunFollower, tail: deque[str], progress_callback: Any) -> TrainResult:
    """Rank 0's TrainResult once the ranks have ended; else the failure recorded and raised: ValueError when a rank
    refused the arguments or dataset, RuntimeError naming the rank that failed."""
    outcome = read_json(folder / RESULT_FILE)
    result = TrainResult(**{k: outcome["result"][k] for k in TrainResult._fields}) if outcome else None
    if returncode == 0 and result:
        return result
    if result and RunStatus.parse(read_run(folder).get("status")) != RunStatus.FAILED:
        return result  # rank 0 had finished and exported; a rank failed while exiting
    refused = read_json(folder / ddp_worker.REFUSED_FILE)
    failure = (
        refused
        or read_json(folder / ddp_worker.FAILURE_FILE)
        or {"who": "torchrun", "error": f"ended with exit code {returncode}. Last output:\n{''.join(tail)}"}
    )
    for told in (ddp_worker.REFUSED_FILE, ddp_worker.FAILURE_FILE):
        (folder / told).unlink(missing_ok=True)
    message = record_failure(run.run_dir, failure, progress_callback)
    if refused:
        raise ValueError(refused["message"])
    raise RuntimeError(message)


def _run_folder(args: TrainArguments, run_dir: str | os.PathLike | None) -> tuple[Path, bool]:
    """The run's folder and whether this call created it: the worker's own, a resumed run's, or a new one."""
    if run_dir is not None:
        return Path(run_dir), False
    if args.resume_from:
        resumed = Path(args.resume_from).expanduser()
        folder = resumed.parent if resumed.is_file() else resumed
        refuse_active_run(folder)
        check_control_files(folder)
        return folder, False
    name = args.run_name or f"{canonical_language(args.language)}-{args.version}"
    return create_run_dir(args.output_path, name), True


def _worker_env(devices: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
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
    """Copy the ranks' console to ours (a notebook shows it; the web app's worker logs it), keeping a tail."""

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


def _wait(agent: subprocess.Popen, run_dir: Path, run: _RunFollower, stop_event: Any) -> None:
    """Until the agent ends: forward records, pass a stop request on. The first Ctrl-C stops every rank at the
    next step (a checkpoint is saved); a second one ends them at once."""
    stop_requested = StopFlag(stop_event)
    interrupts = 0
    while True:
        try:
            if agent.poll() is not None:
                return
            if stop_requested():
                request_stop(run_dir)
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
                request_stop(run_dir)
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
    """This call's records of rank 0's metrics.jsonl, passed to progress_callback (a resumed run's file starts with
    the earlier sessions' records, which are skipped)."""

    def __init__(self, run_dir: Path, callback: Any, resumed: bool) -> None:
        self.callback = callback
        self.run_dir: Path | None = run_dir
        self.metrics = JsonlFollower(run_dir / METRICS_FILE)
        # This session's records only: a resumed run's earlier records are skipped, also when the resume rewrites
        # metrics.jsonl (setting aside steps it trains again), which makes the follower read it from its start.
        self.started = time.time()
        if resumed:
            self.metrics.skip_existing()

    def poll(self) -> None:
        records = self.metrics.follow()
        new = [r for r in records if not isinstance(r.get("time"), (int, float)) or r["time"] >= self.started - 1]
        records.clear()  # the follower keeps its offset; a long run's records are not kept here
        if self.callback is not None:
            for record in new:
                self.callback(record)


def record_failure(run_dir: Path | None, failure: dict[str, Any], progress_callback: Any = None) -> str:
    """Record in the run folder that a rank (or the launcher) failed, unless rank 0 already recorded its own
    failure; returns the message for the caller, naming the rank and the checkpoint to resume from."""
    from utils.training.checkpointing.checkpoints import newest_checkpoint
    from utils.training.recording.metrics import MetricsLogger

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
