"""A run whose export failed is finished without training (issue 30): the run trains in a child process whose file
size limit (RLIMIT_FSIZE) lets its checkpoints through but not ready/model.pth, as a disk that fills during the
export would; the run fails with every checkpoint on disk. A resume of it then writes ready/ from the chosen
checkpoint and trains nothing (before: "nothing left to train", and the only way out was to train more)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tests.helpers import write_dataset
from utils.files import read_jsonl
from utils.gpt_train import train_gpt
from utils.training.checkpointing.finish_export import EXPORT_ONLY_MESSAGE, finishable, ready_complete
from utils.training.recording.run_record import read_run

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARGS = dict(
    version="tiny",
    language="en",
    enable_mixed_precision=False,
    num_workers=0,
    print_step=50,
    quality_eval=0,
    num_epochs=1,
    batch_size=4,
    grad_acumm=1,
)
# The tiny run's checkpoints are ~12 MB; ready/model.pth (with the base model's HiFi-GAN) ~94 MB.
FILE_LIMIT = 40 * 1024**2


def train_with_a_file_size_limit(csv_path: Path, output: Path) -> dict:
    """train_gpt in a child process that cannot write a file over FILE_LIMIT; how it ended."""
    script = textwrap.dedent(
        f"""
        import json, resource, signal, sys
        from utils.gpt_train import train_gpt
        import utils.training.run  # first: the training stack's imports run programs (espeak-ng --version), which
        # must not meet the limit; train_gpt imports it lazily
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, ({FILE_LIMIT}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        try:
            train_gpt(train_csv={str(csv_path)!r}, output_path={str(output)!r}, **{ARGS!r})
            print(json.dumps({{"ended": "returned"}}))
        except Exception as exc:
            print(json.dumps({{"ended": type(exc).__name__, "error": str(exc)[:300]}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def train_steps(run_dir: Path) -> list[int]:
    return [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r.get("type") == "train"]


def test_a_run_whose_ready_folder_could_not_be_written_is_finished_without_training(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)
    ended = train_with_a_file_size_limit(csv_path, tmp_path / "out")
    assert ended["ended"] != "returned", "the export was meant to fail"
    (run_dir,) = (tmp_path / "out").glob("en-tiny-*")
    record = read_run(run_dir)
    assert record["status"] == "failed" and record["steps_done"] == record["total_steps"] == 2, record
    assert (run_dir / "checkpoint_2.pth").is_file() and not ready_complete(run_dir)
    assert finishable(run_dir), "the page offers to finish it"
    steps = train_steps(run_dir)

    result = train_gpt(train_csv=str(csv_path), output_path=str(tmp_path / "out"), resume_from=str(run_dir), **ARGS)

    assert ready_complete(run_dir) and not finishable(run_dir)
    assert train_steps(run_dir) == steps, "nothing was trained again"
    record = read_run(run_dir)
    assert record["status"] == "finished" and record["message"] == EXPORT_ONLY_MESSAGE
    assert record["steps_done"] == 2 and result.status == "finished"
    assert Path(result.checkpoint_path) == run_dir / "best_model.pth", "ready/ holds the run's chosen checkpoint"
    finetune = json.loads((run_dir / "ready" / "finetune.json").read_text())
    assert finetune["steps_done"] == 2 and finetune["checkpoint"] == str(run_dir / "best_model.pth")
    weights = torch.load(run_dir / "ready" / "model.pth", map_location="cpu", weights_only=True)["model"]
    assert any(key.startswith("hifigan_decoder.") for key in weights), "the frozen parts come from the base model"
    # Finished now: a resume with no more epochs has nothing left to do, as for any finished run.
    with pytest.raises(ValueError, match="nothing is left to train"):
        train_gpt(train_csv=str(csv_path), output_path=str(tmp_path / "out"), resume_from=str(run_dir), **ARGS)
