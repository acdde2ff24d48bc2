"""Finishing a run whose export failed: it trained every step, but its `ready/` is missing or incomplete.

The export comes last: when the disk fills (or a file size limit is hit) while `ready/` is written, the run ends
as failed with all its checkpoints on disk. A resume of it (`train_gpt(resume_from=RUN)`, the page's "Finish
export") then trains nothing: it builds the run as a resume does (the same base model, vocabulary and config,
the same chosen checkpoint: the best by the run's rule, else the newest) and writes `ready/` from it. A resume
that would train is unchanged; a run whose `ready/` is complete still has "nothing left to train".
"""

from __future__ import annotations

import os
from pathlib import Path

from utils.model.ready import FINETUNE_FILE, READY_DIR, REFERENCE_WAV
from utils.training.recording.checkpoint_files import checkpoints
from utils.training.recording.run_record import RUN_FILE, RunStatus, load_run

# What every ready/ holds (speakers_xtts.pth only where the base model has one).
READY_FILES = ("model.pth", "config.json", "vocab.json", REFERENCE_WAV, FINETUNE_FILE)
EXPORT_ONLY_MESSAGE = "Export finished: ready/ written from the run's checkpoint; nothing was trained again."


def ready_complete(run_dir: str | os.PathLike) -> bool:
    ready = Path(run_dir) / READY_DIR
    return all((ready / name).is_file() for name in READY_FILES)


def export_pending(run_dir: str | os.PathLike, steps_done: int | None, total_steps: int) -> bool:
    """Whether a resume of `run_dir` at `steps_done` with `total_steps` planned only has ready/ left to write."""
    return steps_done is not None and steps_done >= total_steps and not ready_complete(run_dir)


def finishable(run_dir: str | os.PathLike) -> bool:
    """A run of which only the export is left, by its own record: not active, its newest checkpoint at (or past)
    the steps it planned, and ready/ incomplete (what the page offers to finish)."""
    return why_not_finishable(run_dir) is None


def why_not_finishable(run_dir: str | os.PathLike) -> str | None:
    """Why `run_dir` has no export to finish, the first thing that is true of it (whether it exists at all first);
    None when it has one."""
    folder = Path(run_dir)
    if not folder.is_dir():
        return "there is no such run"
    if not (folder / RUN_FILE).is_file():
        return f"it is not a run (no {RUN_FILE})"
    record = load_run(folder)
    if RunStatus.parse(record.status).active:
        return "it is running"
    found = checkpoints(folder)
    if not found or not record.total_steps:
        return "it has no checkpoint to export from"
    if ready_complete(folder):
        return "its ready/ is complete: export it above"
    if not export_pending(folder, found[-1][0], int(record.total_steps)):
        return (
            f"it has steps left to train ({found[-1][0]} of {int(record.total_steps)}): resume it on the Fine-tune tab"
        )
    return None


def finishable_runs(runs: list[Path]) -> list[Path]:
    return [run_dir for run_dir in runs if finishable(run_dir)]
