"""batch_size="auto": the memory planner picks the largest batch that fits (free RAM on this CPU machine), the run
records how, and the notebook, CLI and web form all accept it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.helpers import write_dataset
from utils.cli import build_parser
from utils.gpt_train import train_gpt
from utils.options.arguments import TrainArguments

pytestmark = pytest.mark.slow


def test_auto_batch_size_is_planned_recorded_and_trained(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)
    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        version="tiny",
        num_epochs=1,
        batch_size="auto",
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=0,
    )
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    batch = run["arguments"]["batch_size"]
    assert isinstance(batch, int) and batch == run["dataset"]["rows_train"] == 7
    assert "batch_size auto = 7" in run["batch_size_auto"] and "free RAM" in run["batch_size_auto"]
    assert "capped at the 7 training rows" in run["batch_size_auto"], "the tiny model fits far more in RAM"
    # Planned for the longest batch: clips padded to the longest training clip (1.5-3 s here), not max_audio_length.
    longest = float(run["batch_size_auto"].split("padded to the longest (")[1].split(" s)")[0])
    assert 1.5 <= longest <= 3.0, run["batch_size_auto"]
    steps = [json.loads(line) for line in (Path(result.run_dir) / "metrics.jsonl").open()]
    assert [r["step"] for r in steps if r["type"] == "train"] == [1], "one step of 7 clips per epoch"


def test_auto_is_accepted_by_the_cli_and_the_declaration_only_as_a_word():
    args = build_parser().parse_args(["train", "--batch-size", "auto"])
    assert TrainArguments(batch_size=args.batch_size).batch_size == "auto"
    assert (
        TrainArguments(batch_size=build_parser().parse_args(["train", "--batch-size", "6"]).batch_size).batch_size == 6
    )
    with pytest.raises(ValueError, match="whole number or auto"):
        TrainArguments(batch_size="plenty")


def test_the_fine_tune_tab_plans_memory_for_the_form(tmp_path, tiny_base):
    from utils.training.process.runner import TrainingRunner
    from webui.context import UIContext
    from webui.form import form_values
    from webui.plan_view import batch_markdown, memory_plan_markdown

    ctx = UIContext(output_dir=tmp_path / "out", runner=TrainingRunner(tmp_path / "out"))
    text = memory_plan_markdown(ctx, form_values(TrainArguments(version="tiny", batch_size=2)))
    assert "Predicted peak" in text and "weights" in text and "No GPU here" in text
    assert "auto" in batch_markdown(10, "auto", 2, 3) and "chosen at Start" in batch_markdown(10, "auto", 2, 3)
    assert "4 × 2 = 8" in batch_markdown(10, "4", 2, 3), "the text box sends the batch as text"


def test_the_generation_batch_is_the_planners_on_a_gpu_and_all_rows_on_a_cpu():
    """A GPU run generates its scored rows in the planner's batch (LoRA at batch 2: fewer than all, since all at once
    would raise the run's peak above its step); a CPU run, or one that scores nothing, generates them all at once."""
    from tests.helpers import simulated_gpu
    from utils.memory_plan.planner import estimate_gpt_memory
    from utils.training.loop.auto_batch import plan_generation_batch

    args = TrainArguments(version="v2.0.2", batch_size=2, grad_acumm=1, lora_rank=16, quality_eval=3)
    clips = [11.0] * 6
    h100 = simulated_gpu((9, 0), total_memory_gb=80.0)
    planned = estimate_gpt_memory(device="cuda", clip_seconds=clips, **args.to_dict())
    rows, why = plan_generation_batch(args, clips, gpu=h100)
    assert rows == planned.generation_batch and 1 <= rows < planned.generated_rows, (rows, planned.generated_rows)
    assert f"generation batch {rows}" in why
    no_gpu = dataclasses.replace(h100, available=False)
    assert plan_generation_batch(args, clips, gpu=no_gpu) == (0, "")
    assert plan_generation_batch(args.replace(quality_eval=0), clips, gpu=h100) == (0, "")
