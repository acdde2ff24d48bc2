"""`python -m utils.training.process.worker RUN_DIR`: run the spec in RUN_DIR (utils.training.recording.spec),
in this process.

The one entry point of a training process. The web app starts it (its output into the run's log) and follows
the folder; torchrun starts it once per device for a several-device run (then it is one rank). Everything it
is told is in RUN_DIR/spec.json; everything it says is in the folder: run.json and metrics.jsonl (the run's
record), memory.jsonl (this process's memory each second), result.json (its result, or its error with the
traceback). A stop request is the file RUN_DIR/stop, checked at each step boundary: the run then saves a
checkpoint and ends as stopped. A starter that follows the run (the web app) names itself in FOLLOWER_ENV: when
that process is gone (killed, crashed), the worker stops at the next step boundary with a checkpoint, as the
web app's child always did: nobody could see or stop a run that held the GPU on; the run resumes from its folder.
Until then a restarted web app re-attaches to it (worker.json, written by the starter, names this process).
Exit status: 0 the run ended (finished, stopped, interrupted), 2 the spec, arguments or dataset were refused,
1 it failed.

Only the standard library is imported at the top: a rank must hide the other GPUs (CUDA_VISIBLE_DEVICES) before
torch is imported.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

FOLLOWER_ENV = "XTTS_WORKER_FOLLOWER"  # {pid, pid_started, host} of the process that follows this worker
REFUSED_EXIT = 2
FAILED_EXIT = 1
MEMORY_INTERVAL_S = 1.0


def run_spec(spec: Any, progress: Callable[[dict[str, Any]], None] | None = None, should_stop: Any = None) -> Any:
    """Train as `spec` says, in this process (several devices: through the launcher, whose ranks run this module);
    returns the TrainResult."""
    from utils.training.ranks import distributed
    from utils.training.recording.outcome import TrainResult
    from utils.training.run import TrainingRun

    args = spec.train_arguments()
    if args.devices and not distributed.in_process_group():
        from utils.training.process.launcher import launch

        return launch(args, progress, should_stop, audio_roots=spec.audio_roots, run_dir=spec.run_dir)
    run = TrainingRun(args, progress, should_stop, audio_roots=spec.audio_roots, run_dir=spec.run_dir)
    return TrainResult.of(run.execute())


def result_record(result: Any) -> dict[str, Any]:
    """result.json of a run that ended (finished, stopped, interrupted): what the web app shows at its end."""
    from utils.training.recording.run_record import read_run

    record = read_run(result.run_dir)
    return {
        "type": "result",
        "status": result.status,
        "result": {
            **result._asdict(),
            "stop_checkpoint": record.get("stop_checkpoint"),
            "early_stop": record.get("early_stop"),
            "stop_reason": record.get("stop_reason"),  # it stopped itself: out of memory at one clip
        },
    }


class MemoryRecorder:
    """Appends this process's memory (and, in a several-device run, each rank's at its last step) to memory.jsonl
    every second, for the web app's live plot."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ranks: list[dict[str, Any]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="memory-recorder")

    def forward(self, record: dict[str, Any]) -> None:
        """The run's progress callback: keeps the ranks' memory of a several-device run's records."""
        if record.get("ranks"):
            self.ranks[:] = record["ranks"]

    def _loop(self) -> None:
        from utils.device.memory import get_memory_stats
        from utils.files import append_jsonl
        from utils.training.recording.records import MemoryRecord

        while not self.done.wait(MEMORY_INTERVAL_S):
            sample = MemoryRecord(time=time.time(), ranks=list(self.ranks) or None, **get_memory_stats())
            try:
                append_jsonl(self.path, sample.to_json())
            except (OSError, ValueError):
                return  # the folder is gone or refused: the plot goes without

    def __enter__(self) -> MemoryRecorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()
        self.thread.join(timeout=5)


class StopCheck:
    """Checked at each step boundary: the folder's stop file, or the follower named in FOLLOWER_ENV is gone."""

    def __init__(self, run_dir: Path) -> None:
        import json

        self.run_dir = run_dir
        follower = os.environ.get(FOLLOWER_ENV)
        self.follower = json.loads(follower) if follower else None
        self.told = False

    def __call__(self) -> bool:
        from utils.training.recording.run_record import process_alive
        from utils.training.recording.spec import stop_requested

        if stop_requested(self.run_dir):
            return True
        if self.follower is not None and process_alive(self.follower) is False:
            if not self.told:
                print("The process following this run is gone: stopping with a checkpoint.", flush=True)
                self.told = True
            return True
        return False


def run_main(run_dir: Path) -> int:
    """One process that runs the spec in run_dir and records how it ended in result.json."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from utils.files import write_json_atomic
    from utils.training.recording.spec import MEMORY_FILE, RESULT_FILE, read_spec

    result_file = run_dir / RESULT_FILE
    if result_file.exists() and not result_file.is_file():  # refused before a run no one could hear the end of
        print(
            f"{result_file} is not a file, so this run's result could not be recorded: move it away and start again.",
            file=sys.stderr,
            flush=True,
        )
        return REFUSED_EXIT
    with MemoryRecorder(run_dir / MEMORY_FILE) as memory:
        try:
            spec = read_spec(run_dir)
            result = run_spec(spec, memory.forward, StopCheck(run_dir))
            outcome = result_record(result)
            code = 0
        except BaseException as exc:  # noqa: BLE001 - every ending is recorded for the follower
            text = traceback.format_exc()
            print(text, file=sys.stderr, flush=True)
            outcome = {"type": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": text}
            code = REFUSED_EXIT if isinstance(exc, ValueError) else FAILED_EXIT
    if run_dir.is_dir():
        try:
            write_json_atomic(result_file, outcome)
        except OSError as exc:  # the run's own record (run.json) still says how it ended
            print(f"Could not record the result in {result_file}: {exc}", file=sys.stderr, flush=True)
            return code or FAILED_EXIT
    return code


def rank_main(run_dir: Path) -> int:
    """One rank of a several-device run (torchrun's worker): pin the device, join the process group, run the spec.
    Rank 0 writes result.json as a single worker does; a refusal is refused.json for the launcher."""
    from utils.training.process.ddp_worker import (
        INIT_TIMEOUT_MINUTES,
        REFUSED_EXIT,
        StopRequest,
        guard_console,
        rank_device,
    )

    guard_console()
    device = rank_device(run_dir)
    # Each rank sees only its own GPU (as cuda:0), so coqui's Trainer runs in its one-GPU mode.
    os.environ["CUDA_VISIBLE_DEVICES"] = "" if device == "cpu" else device
    import json
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.distributed.elastic.multiprocessing.errors import record

    @record  # an exception goes to torchrun's error file, which the agent reads
    def train() -> int:
        from utils.files import write_json_atomic
        from utils.training.process.ddp_worker import refused
        from utils.training.ranks.distributed import LAUNCHER_ENV
        from utils.training.recording.outcome import TrainResult
        from utils.training.recording.spec import RESULT_FILE, read_spec
        from utils.training.run import TrainingRun

        timeout = timedelta(minutes=INIT_TIMEOUT_MINUTES)
        if device == "cpu":
            dist.init_process_group("gloo", timeout=timeout)
        else:
            torch.cuda.set_device(0)
            dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", 0))
        try:
            stop = StopRequest(run_dir, json.loads(os.environ[LAUNCHER_ENV]))
            try:
                spec = read_spec(run_dir)
                run = TrainingRun(
                    spec.train_arguments(),
                    None,
                    stop,
                    audio_roots=spec.audio_roots,
                    run_dir=run_dir,
                    devices=spec.devices,
                )
                result = TrainResult.of(run.execute())
            except ValueError as exc:  # a user mistake: one message for the caller, not a traceback per rank
                refused(run_dir, dist.get_rank(), exc)
                return REFUSED_EXIT
            if dist.get_rank() == 0:
                write_json_atomic(run_dir / RESULT_FILE, result_record(result))
            return 0
        finally:
            dist.destroy_process_group()

    return train()


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m utils.training.process.worker RUN_DIR  (RUN_DIR holds spec.json)", file=sys.stderr)
        return 64
    run_dir = Path(argv[0]).resolve()
    if "TORCHELASTIC_RUN_ID" in os.environ and "LOCAL_RANK" in os.environ:  # started by torchrun: one rank
        return rank_main(run_dir)
    return run_main(run_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
