"""The worker pool (utils.data.pool): results in input order from several processes, a failing or dying item
reported without stopping the others, and Stop, Ctrl-C and workers that cannot start handled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.data import pool_tasks
from utils.data import pool as pool_module
from utils.data.pool import ClipPool, PoolStopped, TaskFailed

ROOT = Path(__file__).resolve().parents[2]


def test_results_come_in_input_order_from_several_processes():
    pool = ClipPool(2, inline_below=0, chunk=2)
    items = [x for x in range(60) if x not in (13, 17, 19)]
    out = list(pool.map(pool_tasks.square, items, needs_work=lambda x: x % 7 != 0))
    assert [item for item, _ in out] == items
    assert all(result is None for item, result in out if item % 7 == 0), "passed through without a task"
    worked = [(item, result) for item, result in out if item % 7]
    assert all(result[0] == item * item for item, result in worked)
    pids = {result[1] for _, result in worked}
    assert len(pids) == 2 and os.getpid() not in pids, pids
    assert pool.stats.pids == pids and pool.stats.items == len(worked)


def test_a_raising_item_and_dying_workers_fail_their_items_only():
    pool = ClipPool(2, inline_below=0, chunk=4)
    out = dict(pool.map(pool_tasks.square, range(30)))
    assert out[13] == TaskFailed("ValueError: thirteen is refused")
    assert out[17].worker_died and "exit code 3" in out[17].reason
    assert out[19].worker_died and "SIGKILL" in out[19].reason
    assert all(out[x][0] == x * x for x in range(30) if x not in (13, 17, 19)), "the dead workers' chunk-mates redone"
    assert len(pool.stats.deaths) == 2


def test_shared_value_reaches_every_worker():
    out = list(ClipPool(2, inline_below=0).map(pool_tasks.scaled, range(40), shared=3))
    assert [result for _, result in out] == [3 * x for x in range(40)]


def test_stop_ends_the_map_and_its_workers():
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return bool(pool.stats.pids) and pool.stats.items >= 4

    pool = ClipPool(2, inline_below=0, chunk=1, should_stop=stop)
    results = pool.map(pool_tasks.slow, range(200))
    with pytest.raises(PoolStopped):
        for _ in results:
            pass
    assert pool.stats.items < 200
    assert not [p for p in pool.stats.pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def _run_script(tmp_path: Path, body: str, **kwargs) -> subprocess.Popen:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env, **kwargs)


def test_ctrl_c_stops_the_workers_cleanly(tmp_path):
    child = _run_script(
        tmp_path,
        """
        from tests.data import pool_tasks
        from utils.data.pool import ClipPool

        if __name__ == "__main__":
            pool = ClipPool(2, inline_below=0, chunk=1)
            try:
                for done, _ in enumerate(pool.map(pool_tasks.slow, range(1000))):
                    if done == 2:
                        print("pids", *sorted(pool.stats.pids), flush=True)
            except KeyboardInterrupt:
                print("interrupted", flush=True)
        """,
    )
    first = child.stdout.readline().split()
    assert first[0] == "pids", first
    workers = [int(p) for p in first[1:]]
    child.send_signal(signal.SIGINT)
    rest, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and rest.strip() == "interrupted"
    assert not [p for p in workers if psutil.pid_exists(p)], "no worker outlives Ctrl-C"


@pytest.mark.parametrize("how", ["script", "stdin"])
def test_a_script_without_a_main_guard_gets_its_workers(tmp_path, how):
    """How most scripts and tutorials are written: no `if __name__ == "__main__":`, or piped to python. The workers
    never run the script again: the work is done on them, with no traceback and no fallback."""
    body = textwrap.dedent(
        """
        import os
        from tests.data import pool_tasks
        from utils.data.pool import ClipPool

        pool = ClipPool(2, inline_below=0)
        total = sum(r for _, r in pool.map(pool_tasks.scaled, range(50), shared=2))
        print(total, pool.stats.workers, os.getpid() in pool.stats.pids, repr(pool.stats.fallback))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if how == "script":
        (tmp_path / "script.py").write_text(body)
        command, stdin = [sys.executable, str(tmp_path / "script.py")], None
    else:
        command, stdin = [sys.executable, "-"], body
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    assert done.stdout.split() == [str(2 * sum(range(50))), "2", "False", "''"]


def test_workers_that_cannot_start_leave_the_work_to_this_process(monkeypatch):
    monkeypatch.setattr(pool_module, "_WORKER_CODE", "import sys; sys.exit(1)")  # an interpreter that cannot start
    pool = ClipPool(2, inline_below=0)
    assert sum(r for _, r in pool.map(pool_tasks.scaled, range(50), shared=2)) == 2 * sum(range(50))
    assert "could not start" in pool.stats.fallback and pool.stats.pids == {os.getpid()}
