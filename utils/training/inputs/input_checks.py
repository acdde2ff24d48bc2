"""What a run checks before any folder or model exists: the dataset's verdict, the output folder, a custom model,
the longest clip against the base model, and what a resume continues from."""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from utils.constants import MAX_AUDIO_LENGTH, SAMPLES_PER_AUDIO_TOKEN, XTTS_SAMPLE_RATE
from utils.data.validation import DatasetReport
from utils.files import read_json, refuse_links_in
from utils.model.base_models import BaseModel
from utils.training.checkpointing.checkpoints import newest_checkpoint
from utils.training.recording.run_record import TRAINER_CONFIG_FILE, load_run, run_status
from utils.training.recording.spec import check_control_files

if TYPE_CHECKING:
    pass


def raise_if_unusable(report: DatasetReport, min_rows: int) -> None:
    if report.ok and report.rows_usable >= min_rows:
        return
    errors = report.errors[:8]
    details = "\n".join(
        f"  {Path(p.csv_file).name or 'dataset'} line {p.line}: {p.audio_file + ': ' if p.audio_file else ''}{p.reason}"
        for p in errors
    )
    more = f"\n  ... and {len(report.errors) - len(errors)} more" if len(report.errors) > len(errors) else ""
    need = f"at least {min_rows} usable rows (one for training and one for evaluation at minimum)"
    raise ValueError(
        f"The dataset cannot be used for training: {report.rows_usable} of {report.rows_read} rows usable, "
        f"{report.train_count} for training and {report.eval_count} for evaluation; {need} are needed.\n"
        f"{details}{more}\nFix these rows (see validate_dataset for the full report) and try again."
    )


def check_output_path(path: Path) -> None:
    """The folder runs are written to: a folder (made if missing) this process can write in."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"output_path {path} is a file, not a folder: give the folder runs should be written to.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ValueError(
            f"output_path {path} cannot be written to ({exc.strerror or exc}); choose another folder."
        ) from exc


def check_checkpoint_file(path: Path, what: str) -> None:
    """A PyTorch checkpoint (a zip archive, or an old-style pickle), not some other file, before any work."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if not (zipfile.is_zipfile(path) or head[:1] == b"\x80"):
        raise ValueError(
            f"{what} {path} is not a PyTorch checkpoint (model.pth); give the model.pth of a ready/ "
            "folder or of a base model."
        )


def check_clip_length(max_audio_length: int, base: BaseModel) -> None:
    """The longest clip the base model's GPT can place: its audio positions hold gpt_max_audio_tokens codes
    plus start and stop tokens, one code per 1024 samples."""
    tokens = int((read_json(base.config, {}).get("model_args") or {}).get("gpt_max_audio_tokens") or 605)
    limit = (tokens - 2) * SAMPLES_PER_AUDIO_TOKEN
    if max_audio_length > limit:
        raise ValueError(
            f"max_audio_length {max_audio_length} is longer than base model {base.version!r} can take "
            f"({limit} samples, {limit / XTTS_SAMPLE_RATE:.1f} s); XTTS was trained with "
            f"{MAX_AUDIO_LENGTH} ({MAX_AUDIO_LENGTH / XTTS_SAMPLE_RATE:.1f} s)."
        )


def resume_point(resume_from: str, refuse_active: bool = True) -> Path:
    """What to continue: a run folder (its newest checkpoint), or one checkpoint file in a run folder. A run
    still training is refused (two trainers would write one folder); one whose process died is not."""
    path = Path(resume_from).expanduser()
    run_dir = path.parent if path.is_file() else path
    if path.is_file() and not path.name.endswith(".pth"):
        raise ValueError(f"resume_from: {path} is not a checkpoint (.pth) of a run; give the run folder.")
    if newest_checkpoint(run_dir) is None:
        raise ValueError(
            f"resume_from: {run_dir} holds no checkpoint (checkpoint_*.pth or best_model.pth) to continue from."
        )
    if not (run_dir / TRAINER_CONFIG_FILE).is_file():
        raise ValueError(f"resume_from: {run_dir} has no config.json; it is not a training run folder.")
    refuse_links_in(run_dir)  # a resume writes into the run folder: no entry of it may lead elsewhere
    check_control_files(run_dir)
    status = run_status(run_dir)
    if refuse_active and status.active:
        raise ValueError(
            f"resume_from: {run_dir.name} is still {status.value} (pid {load_run(run_dir).pid}); stop it "
            "first, or wait for it to end."
        )
    return path
