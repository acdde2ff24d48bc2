"""The suite's waits (tests/helpers.wait_until, run_watched): they last while the work advances, however slowly,
and fail when it stalls."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.helpers import Stalled, cpu_seconds, file_growth, run_watched, wait_until


def test_a_wait_outlasts_its_stall_time_while_the_progress_signal_advances(tmp_path):
    log = tmp_path / "log"
    log.write_text("")
    started = time.monotonic()

    def slow_work() -> bool:  # a line every 0.2 s; done after 1.5 s, five times the stall time
        with open(log, "a") as handle:
            handle.write("step\n")
        return time.monotonic() - started > 1.5

    assert wait_until(slow_work, "the slow work", progress=(file_growth(log),), stall=0.3, poll=0.2)


def test_a_wait_fails_when_its_progress_signal_stops_though_time_is_short(tmp_path):
    steps = iter(range(3))  # three signs of life, then a hang
    counter = {"step": 0}

    def advance() -> int:
        counter["step"] = next(steps, counter["step"])
        return counter["step"]

    started = time.monotonic()
    with pytest.raises(Stalled, match="the hung work: nothing advanced for"):
        wait_until(lambda: False, "the hung work", progress=(advance,), stall=0.5, poll=0.1)
    elapsed = time.monotonic() - started
    assert 0.5 < elapsed < 5, elapsed


def test_what_the_condition_last_saw_is_in_the_message():
    with pytest.raises(Stalled, match="last seen: status running, step 3"):
        wait_until(lambda: False, "the end", stall=0.2, poll=0.05, describe=lambda: "status running, step 3")
    with pytest.raises(Stalled, match="FileNotFoundError"):
        wait_until(lambda: Path("/nonexistent/metrics.jsonl").read_text(), "the metrics", stall=0.2, poll=0.05)


def test_a_failing_check_inside_the_condition_is_not_swallowed():
    def check() -> bool:
        raise AssertionError("the worker died")

    with pytest.raises(AssertionError, match="the worker died"):
        wait_until(check, "the run", stall=5)


def test_a_process_that_computes_silently_counts_as_progress_and_a_hung_one_does_not(tmp_path):
    # Silent for longer than the stall time, but computing all along (even a loaded machine gives it 7% of a core).
    busy = "import time\nend = time.process_time() + 4\nwhile time.process_time() < end: pass\nprint('done')"
    done = run_watched([sys.executable, "-c", busy], stall=3.0, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "done"

    hung = "import sys, time\nprint('started', flush=True)\ntime.sleep(600)"
    started = time.monotonic()
    with pytest.raises(Stalled, match="nothing advanced"):
        run_watched([sys.executable, "-c", hung], stall=2.0)
    assert time.monotonic() - started < 60, "the hung process was noticed after its stall time, not at its end"


def test_cpu_seconds_counts_a_process_and_its_children():
    import subprocess

    code = (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'import time\\nend = time.process_time() + 1.5\\n"
        "while time.process_time() < end: pass'])"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    signal = cpu_seconds(parent, quantum=0.5, include_self=False)
    seen = {signal()}
    while parent.poll() is None:
        seen.add(signal())
        time.sleep(0.1)
    assert max(v for v in seen if v is not None) >= 2, seen
