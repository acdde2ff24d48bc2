"""What a run leaves: its folder, its `ready/` export and the checkpoint in it (`RunOutput`), and the six paths
`train_gpt` returns (`TrainResult`). A module of its own, below the run, the worker and the launcher alike, so
none of them imports another to name what they return."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from utils.model.ready import READY_DIR, REFERENCE_WAV
from utils.training.recording.run_record import read_run


@dataclass(frozen=True)
class RunOutput:
    """The files of a finished (or stopped) run; `train_gpt` returns them as its six paths."""

    run_dir: Path
    ready_dir: Path
    checkpoint: Path


class TrainResult(NamedTuple):
    """What `train_gpt` returns; unpacks to six paths, in this order."""

    speaker_path: str  # ready/speakers_xtts.pth ("" when the base model has none)
    config_path: str  # ready/config.json
    checkpoint_path: str  # the fine-tuned checkpoint: best by the run's best_by rule (or the last, if none was chosen)
    vocab_path: str  # ready/vocab.json
    run_dir: str
    reference_wav: str  # ready/reference.wav, a clean clip from the training data

    @property
    def ready_dir(self) -> str:
        return str(Path(self.run_dir) / READY_DIR)

    @property
    def status(self) -> str:
        """finished | stopped | interrupted (a stopped run can be continued with resume_from)."""
        return str(read_run(self.run_dir).get("status", "unknown"))

    @classmethod
    def of(cls, output: RunOutput) -> TrainResult:
        ready = output.ready_dir
        speakers = ready / "speakers_xtts.pth"
        return cls(
            speaker_path=str(speakers) if speakers.is_file() else "",
            config_path=str(ready / "config.json"),
            checkpoint_path=str(output.checkpoint),
            vocab_path=str(ready / "vocab.json"),
            run_dir=str(output.run_dir),
            reference_wav=str(ready / REFERENCE_WAV),
        )
