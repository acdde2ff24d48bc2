"""Every run of an output folder side by side (`compare_runs`): its settings, its best scores, its verdict against
the base model, its time and memory, the sweep trial it was, and what blind listening said of it.

Read from the run folders as they are (run.json, metrics.jsonl, trial.json) and the folder's listening record
(utils.sweep.listening): nothing is written. A run still training shows its scores so far.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from utils.files import read_json
from utils.sweep.run_scores import chosen_scores
from utils.sweep.study import TRIAL_FILE
from utils.training.evaluation.verdict import babble_count
from utils.training.recording.run_record import list_runs, read_run

SCORES = ("cer", "similarity", "naturalness", "babble_rate", "combined")
COLUMNS = (
    "run",
    "status",
    "sweep",
    "trial",
    "trial_state",
    "language",
    "version",
    "epochs",
    "learning_rate",
    "lora_rank",
    "batch",
    "best_by",
    "best_step",
    "eval_loss",
    *SCORES,
    "babble",
    "better_than_base",
    "combined_vs_base",
    "verdict",
    "minutes",
    "peak_gib",
    "listening",
    "run_dir",
)
# Sorted best first: descending for these, ascending for the rest (CER, babble, eval loss, minutes, memory).
HIGHER_IS_BETTER = {"similarity", "naturalness", "combined", "combined_vs_base", "better_than_base"}


def _peak_gib(record: dict[str, Any]) -> float | None:
    phases = ((record.get("timings") or {}).get("phases") or {}).values()
    peaks = [p.get("peak_gib") for p in phases if isinstance(p, dict) and p.get("peak_gib") is not None]
    return round(max(peaks), 2) if peaks else None


def run_row(run_dir: str | os.PathLike, listening: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """One run's row of the comparison."""
    run_dir = Path(run_dir)
    record = read_run(run_dir)
    arguments = record.get("arguments") or {}
    trial = read_json(run_dir / TRIAL_FILE, {})
    trial = trial if isinstance(trial, dict) else {}
    scores = chosen_scores(run_dir, record)
    verdict = record.get("verdict") or {}
    combined = (verdict.get("changes") or {}).get("combined") or [None, None]
    gain = combined[1] - combined[0] if None not in combined else None
    babbled, heard = babble_count(scores) if scores else (0, 0)
    wall = (record.get("timings") or {}).get("wall_s")
    votes = (listening or {}).get(str(run_dir.resolve()))
    row = {
        "run": run_dir.name,
        "status": record.get("status"),
        "sweep": trial.get("study", ""),
        "trial": trial.get("trial"),
        "trial_state": trial.get("state", "running" if trial else ""),
        "language": record.get("language") or arguments.get("language"),
        "version": arguments.get("version"),
        "epochs": arguments.get("num_epochs"),
        "learning_rate": arguments.get("learning_rate"),
        "lora_rank": arguments.get("lora_rank"),
        "batch": record.get("effective_batch_size"),
        "best_by": arguments.get("best_by"),
        "best_step": (record.get("best") or {}).get("step"),
        "eval_loss": ((record.get("best") or {}).get("metrics") or {}).get("eval_loss"),
        **{name: scores.get(name) for name in SCORES},
        "babble": f"{babbled}/{heard}" if heard else "",
        "better_than_base": verdict.get("better"),
        "combined_vs_base": gain,
        "verdict": verdict.get("text", ""),
        "minutes": round(wall / 60, 2) if wall else None,
        "peak_gib": _peak_gib(record),
        "listening": f"{votes['won']}-{votes['lost']}" + (f" ({votes['same']} same)" if votes["same"] else "")
        if votes
        else "",
        "run_dir": str(run_dir),
    }
    return row


def compare_runs(output_dir: str | os.PathLike = "./output", sort_by: str = "combined") -> Any:
    """Every run under `output_dir` as a pandas DataFrame (COLUMNS), best first by `sort_by` (any column; a score
    sorts best first, whichever way is better), runs without a value last."""
    import pandas as pd

    from utils.sweep.listening import listening_tally

    if sort_by not in COLUMNS:
        raise ValueError(f"sort_by must be one of {', '.join(COLUMNS)}; got {sort_by!r}.")
    tally = listening_tally(output_dir)
    rows = []
    for run_dir in list_runs(output_dir):
        try:
            rows.append(run_row(run_dir, tally))
        except Exception as exc:  # noqa: BLE001 - one unreadable run does not hide the others
            rows.append({"run": run_dir.name, "status": f"unreadable: {exc}", "run_dir": str(run_dir)})
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if frame.empty:
        return frame
    ascending = sort_by not in HIGHER_IS_BETTER  # runs by name, steps... ascending; scores best first
    return frame.sort_values(sort_by, ascending=ascending, na_position="last", kind="stable").reset_index(drop=True)
