"""The processes of a multi-device run, below the launcher (`utils.training.process.launcher`):

    python -m utils.training.process.ddp_worker agent RUN_DIR N    torchrun's elastic agent (torch.distributed.run),
                                                           which starts N ranks and records which one failed
    python -m utils.training.process.worker RUN_DIR                one rank (torchrun sets LOCAL_RANK): pins its device,
                                                           init_process_group (NCCL on GPUs, gloo on CPUs), then
                                                           runs the folder's spec as every training process does

Everything goes through the run folder (utils.training.recording.spec): the spec (spec.json, with each local rank's
device), the stop request (stop), rank 0's result (result.json), a rank's ValueError (refused.json: a user
mistake, raised again by the launcher) and the agent's account of a failure (failure.json). Only the standard
library is imported at the top: a rank must hide the other GPUs (CUDA_VISIBLE_DEVICES) before torch is imported.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from utils.files import write_json_atomic  # the standard library only: safe before the device is pinned

FAILURE_FILE = "failure.json"
REFUSED_FILE = "refused.json"  # a rank's ValueError: the arguments or the dataset were refused
REFUSED_EXIT = 2
INIT_TIMEOUT_MINUTES = 30  # a rank > 0 waits in a collective while rank 0 loads the model and builds the vocab
_PEER_LOST = (
    "DistBackendError",
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "NCCL",
    "gloo",
)


class ConsoleOrNothing(io.TextIOBase):
    """A console stream that becomes a sink when its pipe breaks: the launcher reads the ranks' output, and if
    the launcher is gone the ranks stop and save on their own, which a failed print must not turn into a failure."""

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream

    def _lost(self) -> None:
        self.stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._lost()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    def __getattr__(self, name: str) -> Any:  # buffer, errors, ...: the stream's own
        return getattr(self.stream, name)


def guard_console() -> None:
    sys.stdout, sys.stderr = ConsoleOrNothing(sys.stdout), ConsoleOrNothing(sys.stderr)


# --- the agent -----------------------------------------------------------------------------------------
def agent_main(run_dir: Path, nprocs: int) -> int:
    """torchrun (`torch.distributed.run.run`); when ranks fail, failure.json names the one that caused it."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    args = get_args_parser().parse_args(
        ["--standalone", f"--nproc-per-node={nprocs}", "--module", "utils.training.process.worker", str(run_dir)]
    )
    try:
        run(args)
        return 0
    except ChildFailedError as exc:
        rank, failure = min(exc.failures.items(), key=lambda item: (_cause_order(item[1]), item[1].timestamp, item[0]))
        if failure.exitcode < 0:
            error_type, error = "signal", f"was killed by {failure.signal_name()} (pid {failure.pid})."
        else:
            error_type, _, error = _message(failure).partition(": ")
            error = f"failed: {error_type}: {error or '(no message)'}"
        write_json_atomic(
            run_dir / FAILURE_FILE,
            {"rank": rank, "exitcode": failure.exitcode, "error": error, "error_type": error_type},
        )
        return 1


def _cause_order(failure: Any) -> int:
    """Failures, cause first: when one rank dies the others fail on a broken connection, then the agent ends
    the rest with SIGTERM; timestamps (whole seconds) often tie."""
    if failure.exitcode < 0:
        return 3 if failure.exitcode == -signal.SIGTERM else 0
    return 2 if any(text in _message(failure) for text in _PEER_LOST) else 1


def _message(failure: Any) -> str:
    """'Type: text' of the exception a rank raised (torchrun's error file nests it in a dict)."""
    message = failure.message
    return str(message.get("message", message) if isinstance(message, dict) else message)


# --- a rank ------------------------------------------------------------------------------------------
class StopRequest:
    """A rank's stop check: the run folder's stop file (the launcher's, or the web app's through the launcher), or
    the launcher is gone (nobody would follow the run)."""

    def __init__(self, run_dir: Path, launcher: dict[str, Any]) -> None:
        from utils.training.recording.spec import STOP_FILE

        self.path = run_dir / STOP_FILE
        self.launcher = launcher

    def __call__(self) -> bool:
        from utils.training.recording.run_record import process_alive

        return self.path.exists() or process_alive(self.launcher) is False


def rank_device(run_dir: Path) -> str:
    """This rank's device from the spec, read with the standard library (torch is not imported yet)."""
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    return spec["devices"][int(os.environ["LOCAL_RANK"])]


def refused(run_dir: Path, rank: int, exc: ValueError) -> None:
    write_json_atomic(
        run_dir / REFUSED_FILE,
        {"rank": rank, "message": str(exc), "error": f"failed: ValueError: {exc}", "error_type": "ValueError"},
    )


if __name__ == "__main__":
    guard_console()
    role, folder = sys.argv[1], Path(sys.argv[2])
    if role != "agent":
        sys.exit(f"unknown role {role!r}: the ranks run python -m utils.training.process.worker RUN_DIR")
    sys.exit(agent_main(folder, int(sys.argv[3])))
