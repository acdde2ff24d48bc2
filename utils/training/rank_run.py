"""A rank other than 0 of a multi-process run: it trains in step with rank 0 and writes nothing.

Rank 0 validates, creates the run folder, writes its record and files and builds its trainer; then it
sends the folder (`distributed.share_run_dir`). Only then does a rank > 0 build its own trainer in that
folder, so every file it reads (config, vocab, a converted base model, the checkpoint to resume) exists.
Its trainer saves nothing (coqui's and our saves are gated on rank 0), its metrics logger writes nothing,
and coqui's per-rank log file and config copy are left out (utils.training.loop.trainer).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from utils.model.ready import READY_DIR
from utils.training.controls import torch_settings_restored
from utils.training.inputs import batching
from utils.training.loop.setup import build_training_setup, trainer_parts
from utils.training.ranks import distributed
from utils.training.ranks.data_parallel import DataParallelRanks
from utils.training.recording.metrics import MetricsLogger
from utils.training.recording.outcome import RunOutput
from utils.training.recording.run_record import METRICS_FILE

if TYPE_CHECKING:
    from utils.data.validation import DatasetReport
    from utils.model.base_models import BaseModel
    from utils.options.arguments import TrainArguments
    from utils.text.frontend import TextFrontEnd


class SilentMetrics(MetricsLogger):
    """The metrics logger of a rank > 0: it keeps count like rank 0's, and writes nothing."""

    def _emit(self, record: dict[str, Any]) -> None:
        return


def train_beside_rank_zero(
    args: TrainArguments,
    frontend: TextFrontEnd,
    should_stop: Any,
    resume_point: Path | None,
    base: BaseModel,
    report: DatasetReport,
    ranks: list[dict[str, Any]],
) -> RunOutput:
    """Train as a rank > 0 of a run (after `describe_ranks`); returns where rank 0 writes the voice."""
    run_dir = distributed.share_run_dir(None)
    steps = batching.rank_steps_per_epoch(report.epoch_rows, args.batch_size)
    metrics = SilentMetrics(
        run_dir / METRICS_FILE,
        batch_size=args.batch_size,
        steps_per_epoch=steps,
        total_steps=args.num_epochs * steps,
    )
    with torch_settings_restored():
        parts = trainer_parts(args, run_dir, metrics, should_stop=should_stop, ranks=DataParallelRanks(ranks))
        setup = build_training_setup(args, base, report, frontend, run_dir, parts, resume=resume_point)
        try:
            setup.trainer.fit()
        finally:
            setup.release()
    return RunOutput(run_dir, run_dir / READY_DIR, Path())
