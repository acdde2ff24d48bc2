"""A bounded pool of worker processes for per-clip work: every core, flat memory, results in input order.

    for item, result in ClipPool(workers=None).map(probe_clip, rows, needs_work=lambda row: ...):
        if isinstance(result, TaskFailed): ...

- **Bounded**: at most `window` items are taken from the input and not yet handed back, so a million-row
  input costs a window of items and results, whatever the speed of each worker.
- **Ordered**: results come back in the order of the input, whichever worker finished first; with one worker
  (or inline) the output is the same.
- **Isolated**: a function that raises gives that item a `TaskFailed` with its reason. A worker that dies
  (a decoder's segfault, the kernel's out-of-memory killer) is replaced; the items it held are tried again
  one by one, and an item whose worker dies on its own is a `TaskFailed` naming the exit code: reported,
  never waited on. Workers that cannot even start leave the work to this process (`PoolStats.fallback`).
- **Clean stop**: Ctrl-C (KeyboardInterrupt), `should_stop()` turning true, or the caller dropping the
  iterator stops every worker (each finishes or abandons its item; files are written atomically by the
  tasks, so nothing is left half-written). Workers ignore SIGINT: the parent alone decides.

Workers are fresh interpreters (`python -c`, each given this process's sys.path and one end of a socket pair), not
forks: a fork of a process holding torch's or Gradio's threads can deadlock. Unlike multiprocessing's "spawn" they
never import the caller's main module again, so a plain script without `if __name__ == "__main__":` (or one read on
stdin) gets its workers as a guarded one does, instead of each worker running the script again. They are limited
to one thread each for numpy/torch/OpenMP, since the pool itself uses the cores, and they run in their own session:
Ctrl-C reaches the caller alone, which stops them. Small inputs run inline: starting processes costs more than it
saves on a few clips.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

# Below this many items (when the caller knows the count) the work runs in this process.
INLINE_BELOW = 24
CHUNK = 4  # items per message to a worker: fewer round trips on short clips
WAIT_S = 0.5  # how often should_stop is looked at while waiting on workers
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
START_FAILURES = 3  # workers that die before they are ready, after which the work goes on in this process


class PoolStopped(Exception):
    """should_stop() turned true: the workers were stopped, the remaining items not done."""


@dataclass(frozen=True)
class TaskFailed:
    """The result of an item whose task raised, or whose worker process died on it."""

    reason: str
    worker_died: bool = False


@dataclass
class PoolStats:
    """What a map did: how many processes, which ones, what died."""

    workers: int = 0  # worker processes started (0: ran inline)
    pids: set[int] = field(default_factory=set)  # processes that returned results (this one when inline)
    items: int = 0  # items done by a task (not passed through)
    deaths: list[str] = field(default_factory=list)  # one line per worker that died
    fallback: str = ""  # why the work went on in this process (workers could not start)

    def describe(self) -> str:
        where = f"on {self.workers} worker processes" if self.workers else "in this process"
        died = f"; {len(self.deaths)} worker(s) died: {self.deaths[0]}" if self.deaths else ""
        fallback = f"; {self.fallback}" if self.fallback else ""
        return f"{self.items} clips {where}{died}{fallback}"


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _worker_main(conn: Connection) -> None:
    """A worker: receive (task id, function, shared, items), send (task id, pid, [(ok, result or reason)])."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    conn.send(("ready", os.getpid()))  # a worker that dies before this could not start: no item is to blame
    shared_cache: dict[int, Any] = {}
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if task is None:
            return
        task_id, func, token, shared, items = task
        if shared is not None:
            shared_cache.clear()
            shared_cache[token] = shared
        context = shared_cache.get(token)
        out = []
        for item in items:
            try:
                out.append((True, func(item) if token is None else func(item, context)))
            except Exception as exc:  # noqa: BLE001 - any failure belongs to this item only
                out.append((False, f"{type(exc).__name__}: {exc}"[:400]))
        try:
            conn.send((task_id, os.getpid(), out))
        except (BrokenPipeError, OSError):
            return


# A worker's whole program: the caller's sys.path, then the loop on its end of the socket pair (file descriptor).
_WORKER_CODE = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[1])\n"
    "from multiprocessing.connection import Connection\n"
    "from utils.data.pool import _worker_main\n"
    "_worker_main(Connection(int(sys.argv[2])))\n"
)


class _Worker:
    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        self.conn = Connection(mine.detach())
        # The thread limits are in its environment before numpy or torch is imported there.
        env = {**os.environ, **dict.fromkeys(_THREAD_VARIABLES, "1")}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE, json.dumps(sys.path), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            self.conn.close()
            raise
        finally:
            theirs.close()  # the worker holds its end: its death closes the pair, which the pool sees
        self.task: tuple[int, list[tuple[int, Any]]] | None = None
        self.token: int | None = None  # the shared value this worker holds
        self.started = False  # it said it is ready

    def send(self, task_id: int, func: Callable, token: int | None, shared: Any, items: list[tuple[int, Any]]):
        fresh = token is not None and self.token != token
        self.conn.send((task_id, func, token, shared if fresh else None, [item for _, item in items]))
        self.token = token
        self.task = (task_id, items)

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass


def _exit_text(code: int | None) -> str:
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class ClipPool:
    """See the module docstring. `workers`: processes to use (None: every core); `window`: items in flight."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        window: int | None = None,
        chunk: int = CHUNK,
        should_stop: Callable[[], bool] | None = None,
        inline_below: int | None = None,
    ) -> None:
        self.workers = max(1, int(workers)) if workers else default_workers()
        self.chunk = max(1, chunk)
        self.window = window or self.workers * self.chunk * 4
        self.should_stop = should_stop or (lambda: False)
        self.inline_below = INLINE_BELOW if inline_below is None else inline_below
        self.stats = PoolStats()

    def map(
        self,
        func: Callable,
        items: Iterable[Any],
        *,
        shared: Any = None,
        needs_work: Callable[[Any], bool] | None = None,
        total: int | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """(item, result) for every item, in order. `func(item)` (or `func(item, shared)` when `shared` is given:
        sent once to each worker) must be a module-level function; items where `needs_work(item)` is false are
        passed through with the result None, without a task. `total`: the item count when known (small inputs
        run inline)."""
        if total is None and hasattr(items, "__len__"):
            total = len(items)  # type: ignore[arg-type]
        if self.workers == 1 or (total is not None and total < self.inline_below):
            return self._inline(func, items, shared, needs_work)
        return self._pooled(func, items, shared, needs_work)

    def _inline(self, func, items, shared, needs_work) -> Iterator[tuple[Any, Any]]:
        for item in items:
            if self.should_stop():
                raise PoolStopped()
            if needs_work is not None and not needs_work(item):
                yield item, None
                continue
            try:
                result = func(item) if shared is None else func(item, shared)
            except Exception as exc:  # noqa: BLE001 - as a worker reports it
                result = TaskFailed(f"{type(exc).__name__}: {exc}"[:400])
            self.stats.items += 1
            self.stats.pids.add(os.getpid())
            yield item, result

    def _pooled(self, func, items, shared, needs_work) -> Iterator[tuple[Any, Any]]:
        run = _PooledRun(self, func, shared, needs_work, iter(items))
        try:
            yield from run.results()
        finally:
            run.shut_down()


class _PooledRun:
    """The state of one pooled map (see ClipPool.map)."""

    def __init__(self, pool: ClipPool, func: Callable, shared: Any, needs_work, items: Iterator[Any]) -> None:
        self.pool, self.func, self.shared, self.needs_work, self.items = pool, func, shared, needs_work, items
        self.token = None if shared is None else id(shared)
        self.workers: list[_Worker] = []
        self.todo: deque[list[tuple[int, Any]]] = deque()  # chunks waiting for a worker
        self.chunk: list[tuple[int, Any]] = []
        self.ready: dict[int, tuple[Any, Any]] = {}
        self.taken = 0  # items read from the input
        self.given = 0  # items handed back
        self.exhausted = False
        self.task_ids = itertools.count()
        self.start_failures = 0

    def results(self) -> Iterator[tuple[Any, Any]]:
        while True:
            self._fill()
            while self.given in self.ready:
                yield self.ready.pop(self.given)
                self.given += 1
                self._fill()
            if self.exhausted and self.given == self.taken:
                return
            if self.pool.should_stop():
                raise PoolStopped()
            self._dispatch()
            self._collect()

    def _fill(self) -> None:
        """Take items until the window is full; pass-through items are ready at once."""
        while not self.exhausted and self.taken - self.given < self.pool.window:
            try:
                item = next(self.items)
            except StopIteration:
                self.exhausted = True
                break
            index, self.taken = self.taken, self.taken + 1
            if self.needs_work is not None and not self.needs_work(item):
                self.ready[index] = (item, None)
                continue
            self.chunk.append((index, item))
            if len(self.chunk) == self.pool.chunk:
                self.todo.append(self.chunk)
                self.chunk = []
        if self.chunk:  # the input is done or the window full: nothing more joins this chunk for now
            self.todo.append(self.chunk)
            self.chunk = []

    def _busy(self) -> list[_Worker]:
        return [w for w in self.workers if w.task is not None]

    def _dispatch(self) -> None:
        while self.todo and self.pool.stats.fallback:  # workers cannot start: here, in order
            for index, item in self.todo.popleft():
                self.ready[index] = next(self.pool._inline(self.func, [item], self.shared, None))
        while self.todo:
            idle = next((w for w in self.workers if w.task is None), None)
            if idle is None:
                if len(self.workers) >= self.pool.workers:
                    return
                idle = _Worker()
                self.workers.append(idle)
                self.pool.stats.workers += 1
            items = self.todo.popleft()
            try:
                idle.send(next(self.task_ids), self.func, self.token, self.shared, items)
            except (BrokenPipeError, OSError):  # it died before it was given work: its death is noticed below
                idle.task = (-1, items)

    def _collect(self) -> None:
        busy = self._busy()
        if not busy:
            return
        by_conn = {w.conn: w for w in busy}
        for ready in wait(list(by_conn), timeout=WAIT_S):  # a dead worker's end of the pair reads as closed
            worker = by_conn[ready]
            if worker.task is None:
                continue
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                self._died(worker)
                continue
            if message[0] == "ready":
                worker.started = True
            else:
                self._accept(worker, message[1], message[2])

    def _accept(self, worker: _Worker, pid: int, out: list[tuple[bool, Any]]) -> None:
        assert worker.task is not None
        _, items = worker.task
        worker.task = None
        self.pool.stats.pids.add(pid)
        self.pool.stats.items += len(items)
        for (index, item), (ok, value) in zip(items, out, strict=True):
            self.ready[index] = (item, value if ok else TaskFailed(str(value)))

    def _died(self, worker: _Worker) -> None:
        """A worker died: its items are tried again alone; an item alone on a dying worker is failed. Workers that
        die before they are ready (they cannot start: a broken interpreter or environment) blame no item; after
        START_FAILURES the work goes on in this process."""
        assert worker.task is not None
        code = _wait(worker.process, 5)
        _, items = worker.task
        worker.task = None
        self.workers.remove(worker)
        worker.conn.close()
        why = f"the worker process (pid {worker.process.pid}) died ({_exit_text(code)})"
        if not worker.started:
            self.start_failures += 1
            if self.start_failures >= START_FAILURES:
                self.pool.stats.fallback = f"worker processes could not start ({why}): the work went on in this process"
            self.todo.appendleft(items)
            return
        if len(items) == 1:
            index, item = items[0]
            self.ready[index] = (item, TaskFailed(f"{why} while working on it", worker_died=True))
            self.pool.stats.deaths.append(why)
            return
        self.todo.extendleft([pair] for pair in reversed(items))

    def shut_down(self) -> None:
        """Stop every worker: ask, wait a moment, then terminate (a worker deep in a long item)."""
        for worker in self.workers:
            worker.stop()
        deadline = time.monotonic() + 5
        for worker in self.workers:
            if _wait(worker.process, max(0.0, deadline - time.monotonic())) is None:
                worker.process.terminate()
                if _wait(worker.process, 5) is None:
                    worker.process.kill()
                    _wait(worker.process, 5)
            worker.conn.close()
        self.workers = []


def _wait(process: subprocess.Popen, seconds: float) -> int | None:
    """The process's exit code (negative: the signal that killed it) within `seconds`, else None."""
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None
