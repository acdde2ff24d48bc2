"""The path a reader follows from the page's Start to a run's first optimizer step, measured on a real tiny run.

    .venv/bin/python scripts/run_path.py [--files]

What Start does is traced call by call (Python's profiler hook, this repository's files only): the runner's
preparation of the run folder (`TrainingRunner._prepare_folder`, what Start does before it launches the worker),
then the worker's `run_main` on that folder, in this process, until torch's optimizer first steps. Each function
counts where it is first called (a reader reads each function once); the lines a module or a class body runs at
import are not calls. Printed: the files visited, how often the path changes package (a package: a folder of the
repository, training's rooms apart, such as utils/training/loop), and how many of those changes are between
training's own rooms. docs/architecture.md keeps the figures before and after the loop's redesign. The tiny base
model and a synthetic dataset are built in a temporary folder (seconds); nothing of the user's is read or written.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _package(path: str) -> str:
    parts = Path(path).relative_to(ROOT).parts[:-1]
    depth = 3 if parts[:2] == ("utils", "training") else 2
    return "/".join(parts[:depth]) or "."


class PathRecorder:
    """The repository's functions in the order they are first called (a reader reads each one once; a loop over
    rows adds nothing), as the files they are in (a file entered again right away counted once), until torch's
    optimizer steps."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.seen: set[object] = set()
        self.done = False

    def __call__(self, frame, event, arg):
        if event != "call" or self.done:
            return
        name = frame.f_code.co_filename
        if name.endswith(os.path.join("torch", "optim", "optimizer.py")) and frame.f_code.co_name == "wrapper":
            self.done = True  # the optimizer's step (torch wraps every optimizer's step in `wrapper`)
            sys.setprofile(None)
            return
        code = frame.f_code
        if not name.startswith(str(ROOT)) or "/.venv/" in name or code in self.seen:
            return
        if not code.co_flags & inspect.CO_OPTIMIZED:
            return  # a module's or a class's own lines, run at import: not on the path a reader follows
        self.seen.add(code)
        if not self.files or self.files[-1] != name:
            self.files.append(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", action="store_true", help="also print the path, file by file")
    options = parser.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from utils.memory_check.step_measure import write_clips
    from utils.model.base_models import ensure_base_model
    from utils.training.process.runner import TrainingRunner
    from utils.training.process.worker import run_main

    work = Path(tempfile.mkdtemp(prefix="xtts-run-path-"))
    csv = write_clips(work / "data", rows=12, seconds=1.5)
    ensure_base_model("tiny")
    kwargs = {
        "train_csv": str(csv),
        "version": "tiny",
        "language": "en",
        "num_epochs": 1,
        "batch_size": 2,
        "output_path": str(work / "output"),
        "quality_eval": 0,
    }
    recorder = PathRecorder()
    runner = TrainingRunner(work / "output", reattach=False)
    sys.setprofile(recorder)
    run_dir, _ = runner._prepare_folder(kwargs)
    code = run_main(run_dir)
    sys.setprofile(None)
    if not recorder.done:
        print(f"The run ended (exit {code}) without an optimizer step: see {run_dir}", file=sys.stderr)
        return 1
    relative = [str(Path(f).relative_to(ROOT)) for f in recorder.files]
    packages = [_package(f) for f in recorder.files]
    changes = [(a, b) for a, b in zip(packages, packages[1:], strict=False) if a != b]
    rooms = [(a, b) for a, b in changes if a.startswith("utils/training/") and b.startswith("utils/training/")]
    if options.files:
        print("\n".join(relative))
    print(f"files visited: {len(set(relative))}")
    print(f"package changes: {len(changes)}, of them between training's rooms: {len(rooms)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
