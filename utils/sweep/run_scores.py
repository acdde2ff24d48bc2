"""The scores a run's voice stands for: the scored evaluation of the checkpoint its ready/ holds (the Runs view's row,
blind listening's comparison with the scores)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from utils.files import read_jsonl
from utils.training.recording.run_record import METRICS_FILE, read_run


def chosen_scores(run_dir: str | os.PathLike, record: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scored evaluation of the checkpoint ready/ holds (run.json `best`'s step), else the last scored one; {} when
    the run scored none."""
    run_dir = Path(run_dir)
    record = read_run(run_dir) if record is None else record
    scored = [r for r in read_jsonl(run_dir / METRICS_FILE) if r.get("type") == "quality" and not r.get("baseline")]
    if not scored:
        return {}
    step = (record.get("best") or {}).get("step")
    at_step = [r for r in scored if r.get("step") == step]
    return (at_step or scored)[-1]
