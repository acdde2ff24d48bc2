"""Opt-in diagnostics of a multi-process run: what each rank trained on, and whether the ranks agree.

With $XTTS_DDP_TRACE naming a folder, every rank appends to `rank<N>.jsonl`, after each step: the step,
the epoch, the clips of its batch, its loss and a SHA-256 of its GPT weights. The ranks should train on
different clips and hold identical weights after every step. Hashing the weights costs time on a large
model: a diagnostic (used by the tests), off by default.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from utils.files import append_jsonl
from utils.training.ranks import distributed

TRACE_ENV = "XTTS_DDP_TRACE"


def rank_trace(model: Any, step: Any) -> RankTrace | None:
    """This rank's trace when $XTTS_DDP_TRACE is set (`step` is the run's DataParallelStep), else None."""
    folder = os.environ.get(TRACE_ENV)
    return RankTrace(Path(folder), model, step) if folder else None


class RankTrace:
    """Writes this rank's line of the trace after each step (called by DataParallelRanks.step_end)."""

    def __init__(self, folder: Path, model: Any, step: Any) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rank{distributed.rank()}.jsonl"
        self.model = model
        self.step = step

    def __call__(self, trainer: Any, batch: dict[str, Any]) -> None:
        digest = hashlib.sha256()
        for _, parameter in sorted(self.model.xtts.gpt.named_parameters()):
            digest.update(parameter.detach().float().cpu().numpy().tobytes())
        append_jsonl(
            self.path,
            {
                "rank": distributed.rank(),
                "step": trainer.total_steps_done,
                "epoch": trainer.epochs_done,
                "clips": [Path(name).name for name in batch.get("filenames", [])],
                "loss": [float(v) for v in self.step.losses],
                "gpt_sha256": digest.hexdigest(),
            },
        )
