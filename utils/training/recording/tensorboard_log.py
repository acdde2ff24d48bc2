"""TensorBoard event files beside metrics.jsonl: the run's records as scalars, and the scored clips as audio.

metrics.jsonl stays the product's own record (the page reads it); this mirror is for comparing runs in
TensorBoard, as users of other fine-tuning tools do: `tensorboard --logdir output/`.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from utils.training.recording.records import EvalRecord, QualityRecord, TrainRecord

log = logging.getLogger(__name__)

TENSORBOARD_DIR = "tensorboard"

# record type -> {record field (utils.training.recording.records): TensorBoard tag}
_SCALARS: dict[str, dict[str, str]] = {
    TrainRecord.TYPE: {
        "loss": "train/loss",
        "loss_text_ce": "train/loss_text_ce",
        "loss_mel_ce": "train/loss_mel_ce",
        "lr": "train/learning_rate",
        "grad_norm": "train/grad_norm",
        "amp_scale": "train/amp_scale",
        "step_time": "speed/step_time_s",
        "loader_time": "speed/loader_time_s",
        "samples_per_sec": "speed/samples_per_sec",
        "gpu_allocated_mb": "memory/gpu_allocated_mb",
        "gpu_reserved_mb": "memory/gpu_reserved_mb",
        "gpu_peak_allocated_mb": "memory/gpu_peak_allocated_mb",
        "gpu_used_mb": "memory/gpu_used_mb",
        "process_rss_mb": "memory/process_rss_mb",
        "ram_used_mb": "memory/ram_used_mb",
    },
    EvalRecord.TYPE: {
        "eval_loss": "eval/loss",
        "eval_loss_text_ce": "eval/loss_text_ce",
        "eval_loss_mel_ce": "eval/loss_mel_ce",
    },
    QualityRecord.TYPE: {
        "cer": "quality/cer",
        "wer": "quality/wer",
        "similarity": "quality/speaker_similarity",
        "duration_ratio": "quality/duration_ratio",
        "combined": "quality/combined",
        "naturalness": "quality/naturalness",
        "babble_rate": "quality/babble_rate",
        "seconds": "speed/scored_evaluation_s",
    },
}


class TensorBoardMirror:
    """Writes each metrics record that has a step into `run_dir/tensorboard/`.

    The writer is opened at the first such record. A resumed run opens it with the step before that record's as
    `purge_step`, so steps the earlier leg wrote after its last checkpoint (a kill -9) are dropped from the curves
    instead of drawn twice, and its last kept step is written again from metrics.jsonl. A failure to write is
    logged once and never stops training.
    """

    def __init__(self, run_dir: str | Path, *, resumed: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.log_dir = self.run_dir / TENSORBOARD_DIR
        self.resumed = resumed
        self._writer: Any = None
        self._broken = False

    def __call__(self, record: dict[str, Any]) -> None:
        tags = _SCALARS.get(record.get("type", ""))
        step = record.get("step")
        if self._broken or tags is None or not isinstance(step, int):
            return
        try:
            writer = self._open(step)
            self._write(writer, record, tags, step)
        except Exception as exc:  # noqa: BLE001 - a mirror must never end a run (disk full, a bad clip)
            self._broken = True
            log.warning("TensorBoard logging stopped: %s: %s", type(exc).__name__, exc)

    def _write(self, writer: Any, record: dict[str, Any], tags: dict[str, str], step: int) -> None:
        for field, tag in tags.items():
            value = record.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                writer.add_scalar(tag, value, step)
        if record["type"] == QualityRecord.TYPE:
            self._clips(writer, record, step)
        # Into the file at once (a flush, not an fsync): a kill -9 then loses at most the record being written.
        writer.flush()

    def _open(self, step: int) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            from utils.files import refuse_link_out

            refuse_link_out(self.log_dir, self.run_dir)  # as every write of the product: never out of the run folder
            # A resume also purges the step before its first: the earlier leg's last record (appended to
            # metrics.jsonl, then mirrored) may have lost its mirror to a kill -9 between the two, so that step is
            # written again from metrics.jsonl.
            purge = max(step - 1, 1) if self.resumed else None
            self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge, flush_secs=30)
            if purge is not None:
                self._replay(self._writer, purge)
        return self._writer

    def _replay(self, writer: Any, purge: int) -> None:
        """The records of metrics.jsonl from step `purge` on, but its last line (the record this call mirrors)."""
        from utils.files import read_jsonl

        for record in read_jsonl(self.run_dir / "metrics.jsonl")[:-1]:
            tags, step = _SCALARS.get(record.get("type", "")), record.get("step")
            if tags is not None and isinstance(step, int) and step >= purge:
                self._write(writer, record, tags, step)

    def _clips(self, writer: Any, record: dict[str, Any], step: int) -> None:
        import numpy as np

        from utils.audio.io import load_audio

        named = [(f"scored/{i}", name) for i, name in enumerate(record.get("files") or [])]
        named += [(f"probe/{p.get('kind')}", p.get("file")) for p in record.get("probes") or [] if p.get("file")]
        for tag, name in named:
            path = self.run_dir / name
            if not path.is_file():
                continue
            wav, rate = load_audio(path, None)
            writer.add_audio(tag, np.clip(wav, -1.0, 1.0), step, sample_rate=rate)

    def flush(self) -> None:
        if self._writer is not None and not self._broken:
            try:
                self._writer.flush()
            except Exception as exc:  # noqa: BLE001 - as above
                self._broken = True
                log.warning("TensorBoard logging stopped: %s", exc)

    def close(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception as exc:  # noqa: BLE001 - as above
                log.warning("TensorBoard writer did not close: %s", exc)
            self._writer = None
