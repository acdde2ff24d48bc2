"""The names of a run's checkpoint files: `checkpoint_<steps done>.pth` and `best_model.pth`.

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


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(steps done, path) of the run's full checkpoints, oldest first."""
    found = []
    for path in Path(run_dir).glob("checkpoint_*.pth"):
        match = _CHECKPOINT.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)
