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


def install_trace(trainer: Any, step: Any) -> None:
    """Add the trace to `trainer` when $XTTS_DDP_TRACE is set (`step` is the run's DataParallelStep)."""
    folder = os.environ.get(TRACE_ENV)
    if folder:
        # Right after the step's sync, so a step after which the run stops is traced too.
        trainer.callbacks.callbacks_on_train_step_end.insert(1, RankTrace(Path(folder), trainer.model, step))


class RankTrace:
    """A step-end callback writing this rank's line of the trace."""

    def __init__(self, folder: Path, model: Any, step: Any) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rank{distributed.rank()}.jsonl"
        self.step = step
        self.clips: list[str] = []
        format_batch = model.format_batch

        def remember_clips(batch: dict[str, Any]) -> dict[str, Any]:
            self.clips = [Path(name).name for name in batch.get("filenames", [])]
            return format_batch(batch)

        model.format_batch = remember_clips  # an instance attribute: the class stays as it is

    def __call__(self, trainer: Any) -> None:
        digest = hashlib.sha256()
        for _, parameter in sorted(trainer.model.xtts.gpt.named_parameters()):
            digest.update(parameter.detach().float().cpu().numpy().tobytes())
        append_jsonl(
            self.path,
            {
                "rank": distributed.rank(),
                "step": trainer.total_steps_done,
                "epoch": trainer.epochs_done,
                "clips": self.clips,
                "loss": [float(v) for v in self.step.losses],
                "gpt_sha256": digest.hexdigest(),
            },
        )
