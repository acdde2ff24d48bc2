"""Planning in a child process: the web server's torch is never patched.

A trace swaps process-wide torch state for its duration (`F.scaled_dot_product_attention`, `F.dropout`, the
AutocastCPU kernels: see cuda_emulation). A lock taken by the planner protects only code that takes it too, and
a synthesis, a transcription or Gradio's own threads do not; so the web app plans in a separate process.

    from utils.memory_plan.child import plan_in_child
    estimate = plan_in_child("estimate_gpt_memory", version="v2.0.2", batch_size=8)

One child is kept warm (started by `warm_up()` when the app starts, else by the first call): importing torch
and coqui takes seconds, a process's first trace pays one-time costs (warm_up plans train_gpt's defaults), and
the child keeps the planner's cached batch models between calls. With `on_progress`, the planner's messages (a
configuration with no shipped memory model being traced) reach the caller while the call runs. Calls are served one
at a time; a call that raises in the child raises the same exception here; a child that dies is replaced by the
next call. The child speaks pickle on a pipe with this process only (both are this program).
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What a child may run, by name: the planner's public functions (so a request names a function, not code).
FUNCTIONS = {
    "estimate_gpt_memory": "utils.memory_plan.planner",
    "ways_to_fit": "utils.memory_plan.planner",
    "largest_batch_that_fits": "utils.memory_plan.planner",
    "fit_my_gpu": "utils.memory_plan.fit_gpu",
    # For checks: what the child's torch holds after a call (see torch_state()).
    "torch_state": "utils.memory_plan.child",
}
_HEADER = struct.Struct("!Q")


class PlannerChildError(RuntimeError):
    """The child could not answer: it died, or its answer could not be sent back."""


def _write(stream: Any, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream: Any) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the planner's child closed its pipe")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the planner's child closed its pipe")
    return pickle.loads(data)


def torch_state() -> dict[str, Any]:
    """Identities of every function a trace swaps, and the AutocastCPU dispatch table: equal before and
    after any planner call, in any process (the tests compare them)."""
    import torch
    import torch.nn.functional as F

    from utils.memory_plan.cuda_emulation import registered_autocast_ops

    ops = sorted(registered_autocast_ops("AutocastCPU") | registered_autocast_ops("AutocastCUDA"))
    return {
        "pid": os.getpid(),
        "scaled_dot_product_attention": id(F.scaled_dot_product_attention),
        "dropout": id(F.dropout),
        "module_to": id(torch.nn.Module.to),
        "autocast_cpu": {name: torch._C._dispatch_dump(f"aten::{name}") for name in ops},
    }


class PlannerChild:
    """A warm child process that runs planner functions by name, one call at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process and self._process.poll() is None else None

    def _start(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
            }
            # Same working folder as this process: relative model and dataset paths mean the same there.
            self._process = subprocess.Popen(
                [sys.executable, "-m", "utils.memory_plan.child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            _read(self._process.stdout)  # "ready": the planner is imported
        return self._process

    def warm_up(self) -> None:
        """Start the child now (seconds), so the page's first plan does not wait for it."""
        with self._lock:
            self._start()

    def call(self, function: str, *args: Any, on_progress: Callable[[str], None] | None = None, **kwargs: Any) -> Any:
        if function not in FUNCTIONS:
            raise ValueError(f"{function!r} is not a planner function ({', '.join(FUNCTIONS)}).")
        with self._lock:
            try:
                process = self._start()
                _write(process.stdin, (function, args, kwargs, on_progress is not None))
                status, value = _read(process.stdout)
                while status == "progress":  # the planner's messages, then its answer
                    if on_progress is not None:
                        on_progress(value)
                    status, value = _read(process.stdout)
            except (EOFError, BrokenPipeError, OSError) as exc:
                self._stop()
                raise PlannerChildError(f"The memory planner's process ended unexpectedly ({exc}).") from exc
        if status == "raised":
            raise value
        if status == "unpicklable":
            raise PlannerChildError(value)
        return value

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def close(self) -> None:
        with self._lock:
            process = self._process
            if process is not None and process.poll() is None:
                process.stdin.close()  # the child's loop ends on EOF
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            self._stop()


_CHILD = PlannerChild()
atexit.register(_CHILD.close)


def plan_in_child(function: str, *args: Any, on_progress: Callable[[str], None] | None = None, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` of the planner (a name from FUNCTIONS), run in the warm child process;
    `on_progress(message)` hears the planner's progress (it is given to the function as `progress`)."""
    return _CHILD.call(function, *args, on_progress=on_progress, **kwargs)


def warm_up(background: bool = True, plan_defaults: bool = True) -> None:
    """Start the shared child (in a thread unless `background` is False) and, with `plan_defaults`, plan
    train_gpt's defaults in it: the first trace of a process pays one-time costs (about as much again as a
    trace), and the page's untouched form is then answered from the cache. Errors surface on the first call."""

    def start() -> None:
        _CHILD.warm_up()
        if plan_defaults:
            _CHILD.call("estimate_gpt_memory")

    if not background:
        start()
        return

    def start_quietly() -> None:
        try:
            start()
        except Exception:  # noqa: BLE001 - the page's first plan reports what is wrong
            pass

    threading.Thread(target=start_quietly, name="planner-child-warm-up", daemon=True).start()


def child_pid() -> int | None:
    """The warm child's process id, or None (for checks)."""
    return _CHILD.pid


def _serve() -> None:
    """The child's loop: read (function, args, kwargs), answer ("returned" | "raised" | "unpicklable", value)."""
    import importlib

    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by the planner or torch goes to stderr, not into the channel
    sys.stdout = sys.stderr
    channel_in = sys.stdin.buffer
    for name in set(FUNCTIONS.values()):
        importlib.import_module(name)
    _write(channel_out, "ready")
    while True:
        try:
            function, args, kwargs, wants_progress = _read(channel_in)
        except EOFError:
            return
        if wants_progress:
            kwargs = {**kwargs, "progress": lambda message: _write(channel_out, ("progress", str(message)))}
        try:
            result = ("returned", getattr(importlib.import_module(FUNCTIONS[function]), function)(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - sent back and raised in the caller
            result = ("raised", exc)
        try:
            _write(channel_out, result)
        except Exception:  # noqa: BLE001 - e.g. an exception holding an unpicklable value
            _write(
                channel_out, ("unpicklable", f"The planner's answer could not be sent back:\n{traceback.format_exc()}")
            )


if __name__ == "__main__":
    _serve()
