"""A resume knows its run: another language, base model, vocabulary or dataset (by content) is refused with what
differs and how to start a new run instead, before anything is written; a finished run given no more epochs is
refused, never "0 steps, finished"; the same dataset in another folder resumes and history keeps each leg."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import write_dataset
from utils.gpt_train import train_gpt
from utils.training.recording.run_record import read_run

pytestmark = pytest.mark.slow

FAST = dict(version="tiny", enable_mixed_precision=False, num_workers=0, print_step=50, quality_eval=0)
PLAN = dict(num_epochs=1, batch_size=4, grad_acumm=1, save_step=1000)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_base):
    folder = tmp_path_factory.mktemp("resume")
    csv_path = write_dataset(folder / "data", n=8)
    result = train_gpt(train_csv=str(csv_path), output_path=str(folder / "out"), language="en", **FAST, **PLAN)
    assert result.status == "finished"
    return folder, csv_path, Path(result.run_dir)


@pytest.mark.parametrize(
    "change, says",
    [
        (dict(language="es"), "language 'es' (the run trained on 'en')"),
        (dict(vocab_new_tokens=10), "vocab_new_tokens 10"),
        (dict(other_dataset=True, num_epochs=1), "holds other rows than the one the run trained on"),
        (dict(num_epochs=1), "nothing is left to train"),
        # LoRA's rank, alpha and targets are in the weights (the merge reads the saved scaling): another run.
        (dict(lora_rank=8), "lora_rank 8, lora_alpha 16, lora_targets 'c_attn,c_proj,c_fc' (the run trained as a full"),
        # The interrupted epoch's batch order depends on it.
        (dict(length_grouping=False), "length_grouping=False (the run trained with True)"),
        # Issue 30: accepted, then KeyError: 'state1' (the checkpoint holds AdamW's state, not 8-bit AdamW's).
        (dict(optimizer="adamw_8bit"), "optimizer 'adamw_8bit' (the run trained with 'adamw', whose state its"),
    ],
)
def test_a_resume_that_would_not_continue_its_run_is_refused_and_writes_nothing(finished_run, change, says):
    folder, csv_path, run_dir = finished_run
    change = dict(change)
    if change.pop("other_dataset", False):
        csv_path = write_dataset(folder / "other", n=8, seed_offset=50)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    arguments = {**FAST, **PLAN, "language": "en", "num_epochs": 3, **change}
    with pytest.raises(ValueError, match="resume_from") as refused:
        train_gpt(train_csv=str(csv_path), output_path=str(folder / "out"), resume_from=str(run_dir), **arguments)
    message = str(refused.value)
    assert says in message, message
    assert "custom_model=" in message and str(run_dir / "ready" / "model.pth") in message, "how to start anew"
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    assert after == before, "a refused resume changed the run folder"
    assert json.loads((run_dir / "ready" / "finetune.json").read_text())["language"] == "en"


def test_the_same_dataset_in_another_folder_resumes_and_history_keeps_each_leg(finished_run):
    folder, csv_path, run_dir = finished_run
    moved = folder / "moved"
    shutil.copytree(csv_path.parent, moved)
    first = read_run(run_dir)
    result = train_gpt(
        train_csv=str(moved / csv_path.name),
        output_path=str(folder / "out"),
        resume_from=str(run_dir),
        language="en",
        **{**FAST, **PLAN, "num_epochs": 2},
    )
    assert result.status == "finished"
    record = read_run(run_dir)
    assert record["history"][0]["arguments"] == first["arguments"], "the first leg's arguments are kept"
    assert record["changed_on_resume"]["num_epochs"] == [1, 2]
    assert record["dataset"]["fingerprint"] == first["dataset"]["fingerprint"]
    assert record["steps_done"] == 4


def test_another_lora_alpha_or_rank_is_another_run_and_the_same_settings_written_otherwise_are_not():
    """The merge into ready/ reads the scaling saved in the checkpoint: a resume with another alpha would export
    weights the run never trained with."""
    from utils.options.arguments import TrainArguments
    from utils.training.checkpointing.resume_checks import _lora_difference

    trained = {"lora_rank": 8, "lora_alpha": 0, "lora_targets": "c_attn,c_proj,c_fc"}  # alpha 0 means 2 x rank
    assert _lora_difference(trained, TrainArguments(lora_rank=8, lora_alpha=32)) == (
        "lora_rank 8, lora_alpha 32, lora_targets 'c_attn,c_proj,c_fc' "
        "(the run trained as lora_rank 8, lora_alpha 16, lora_targets 'c_attn,c_proj,c_fc')"
    )
    assert "lora_rank 4" in _lora_difference(trained, TrainArguments(lora_rank=4, lora_alpha=16))
    assert "a full fine-tune" in _lora_difference(trained, TrainArguments())
    same = TrainArguments(lora_rank=8, lora_alpha=16, lora_targets="c_fc, c_attn,c_proj")
    assert _lora_difference(trained, same) == ""


@pytest.mark.parametrize("name", ["result.json", "stop"])
def test_a_run_folder_whose_result_or_stop_file_is_a_folder_is_refused_by_name(finished_run, name):
    """Issue 30, unclear: the web app answered Gradio's generic error (IsADirectoryError while clearing the stale
    file), and a `stop` folder would have stopped every resumed session at its first step."""
    from utils.training.process.runner import TrainingRunner

    folder, csv_path, run_dir = finished_run
    (run_dir / name / "inside").mkdir(parents=True)
    try:
        before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
        says = f"holds a folder named {name!r}, where its training process keeps its"
        arguments = {**FAST, **PLAN, "language": "en", "num_epochs": 3, "train_csv": str(csv_path)}
        with pytest.raises(ValueError, match=says):
            train_gpt(output_path=str(folder / "out"), resume_from=str(run_dir), **arguments)
        runner = TrainingRunner(folder / "out")  # the web app's: what /start_training does with a resume
        started, message = runner.start({**arguments, "resume_from": str(run_dir)})
        assert not started and says in message and "move or remove it" in message, message
        assert (run_dir / name / "inside").is_dir(), "the user's folder was left as it was"
        assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    finally:
        shutil.rmtree(run_dir / name)
