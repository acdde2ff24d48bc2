"""The names of a run's checkpoint files, in this one module: `checkpoint_<steps done>.pth`, `best_model.pth` and
the temporary files of a write in flight (`.<name>.<random>.tmp`, utils.files' atomic writes).

What they hold and how they are written is utils.training.checkpointing.checkpoints; the names are here, below it,
because the run's record reads them too: a run whose process died is recorded with the newest checkpoint on disk
(utils.training.recording.run_record.newest_checkpoint_on_disk).
"""

from __future__ import annotations

import re
from pathlib import Path

BEST_MODEL_FILE = "best_model.pth"
_CHECKPOINT = re.compile(r"^checkpoint_(\d+)\.pth$")


def checkpoint_path(run_dir: Path, steps_done: int) -> Path:
    return Path(run_dir) / f"checkpoint_{steps_done}.pth"


def checkpoint_step(path: Path) -> int | None:
    """The steps done a `checkpoint_<n>.pth` file is named by; None for any other file."""
    match = _CHECKPOINT.match(Path(path).name)
    return int(match.group(1)) if match else None


def write_temporaries(run_dir: Path) -> list[Path]:
    """The temporary files of checkpoint writes in `run_dir` (a killed process leaves them behind)."""
    return [*Path(run_dir).glob(".checkpoint_*.pth.*.tmp"), *Path(run_dir).glob(f".{BEST_MODEL_FILE}.*.tmp")]


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(steps done, path) of the run's full checkpoints, oldest first."""
    found = []
    for path in Path(run_dir).glob("checkpoint_*.pth"):
        step = checkpoint_step(path)
        if step is not None:
            found.append((step, path))
    return sorted(found)
