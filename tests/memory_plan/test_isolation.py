"""The planner leaves no torch patch behind, in its own process, and patches nothing in the web server's.

A trace swaps `F.scaled_dot_product_attention`, `F.dropout`, `nn.Module.to` and the AutocastCPU kernels for its
duration. The web app plans in a child process (utils.memory_plan.child): a thread of the web server, such as the
Test tab's synthesis, sees torch's own functions throughout a plan. The control test shows that the same watcher
does see the patches of a trace run in this process, so the first test can fail.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from utils.memory_plan import trace as tr
from utils.memory_plan.architecture import resolve_architecture
from utils.memory_plan.child import PlannerChild, PlannerChildError, torch_state
from utils.memory_plan.trace import StepSettings, trace_step

ORIGINAL_SDPA = F.scaled_dot_product_attention
ORIGINAL_DROPOUT = F.dropout


def _settings() -> StepSettings:
    return StepSettings(resolve_architecture("tiny"), 2, 22050, 20, 66150, False, True, "bf16", target="cuda")


def _without_pid(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "pid"}


class Watcher:
    """A thread that, like a synthesis beside a plan, runs torch code and notes what it sees."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, bool, torch.dtype]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        x = torch.randn(4, 8)
        while not self._stop.is_set():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                # CPU autocast leaves softmax in BF16; the planner's CUDA policy makes it FP32.
                softmax = torch.softmax(x.to(torch.bfloat16), -1).dtype
            self.seen.append((F.scaled_dot_product_attention is ORIGINAL_SDPA, F.dropout is ORIGINAL_DROPOUT, softmax))
            time.sleep(0.01)  # often enough to catch a trace, rarely enough not to slow it

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def saw_a_patch(self) -> bool:
        return any(not sdpa or not dropout or softmax != torch.bfloat16 for sdpa, dropout, softmax in self.seen)


@pytest.fixture(scope="module")
def child(tiny_base):
    planner = PlannerChild()
    planner.warm_up()
    yield planner
    planner.close()


@pytest.mark.slow
def test_a_plan_in_the_child_patches_nothing_here_and_restores_everything_there(child):
    here_before = torch_state()
    there_before = child.call("torch_state")
    assert there_before["pid"] not in (None, os.getpid())
    with Watcher() as watcher:
        estimate = child.call("estimate_gpt_memory", version="tiny", batch_size=2, grad_acumm=1, max_audio_length=88200)
    assert estimate.peak_gib > 0
    assert len(watcher.seen) > 20, "the watcher ran throughout the plan"
    assert not watcher.saw_a_patch(), "a thread of this process saw a patched torch function during the plan"
    assert torch_state() == here_before
    there_after = child.call("torch_state")
    assert there_after["pid"] == there_before["pid"], "the same warm child answered"
    assert _without_pid(there_after) == _without_pid(there_before), "the child's torch is as before the plan"


def test_a_refused_plan_raises_its_own_error_here(child):
    with pytest.raises(ValueError, match="batch_size"):
        child.call("estimate_gpt_memory", version="tiny", batch_size=0)
    with pytest.raises(ValueError, match="not a planner function"):
        child.call("remove_everything")
    assert child.call("torch_state")["pid"] == child.pid, "the child survives a refused call"


def test_a_child_that_dies_is_reported_and_replaced(child):
    first = child.pid
    os.kill(first, 9)
    with pytest.raises(PlannerChildError, match="ended unexpectedly"):
        child.call("torch_state")
    assert child.call("torch_state")["pid"] not in (first, os.getpid())


@pytest.mark.slow
def test_a_trace_in_this_process_is_seen_by_other_threads_and_undone_after(tiny_base):
    """The control: the watcher does see the patches while a trace runs here, and after it all is restored."""
    before = torch_state()
    with Watcher() as watcher:
        trace_step(_settings())
    assert watcher.saw_a_patch(), "the watcher would notice a patch"
    assert torch_state() == before


def test_a_trace_that_raises_midway_restores_every_patch(tiny_base, monkeypatch):
    """A failure inside the emulated step (after every patch is in place) leaves torch as it was."""
    before = torch_state()
    inside: list[dict] = []

    def failing_step(*args, **kwargs):
        inside.append(torch_state())
        raise RuntimeError("a failure in the middle of the step")

    monkeypatch.setattr(tr, "_step", failing_step)
    with pytest.raises(RuntimeError, match="middle of the step"):
        trace_step(replace(_settings(), lora_rank=0))
    assert inside and _without_pid(inside[0]) != _without_pid(before), "the patches were in place when it raised"
    assert torch_state() == before
    assert F.scaled_dot_product_attention is ORIGINAL_SDPA and F.dropout is ORIGINAL_DROPOUT
