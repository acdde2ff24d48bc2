"""train_gpt end to end on the tiny model with coqui's real GPTTrainer and Trainer (CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import digests, tensorboard_scalars, write_dataset
from utils.files import read_jsonl
from utils.gpt_train import TrainResult, train_gpt

pytestmark = pytest.mark.slow

# quality_eval=0: measured quality has its own tests (test_quality_training.py).
FAST = dict(version="tiny", language="en", enable_mixed_precision=False, num_workers=0, print_step=50, quality_eval=0)


def train_records(run_dir: str) -> list[dict]:
    return [r for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if r["type"] == "train"]


def test_end_to_end_run_returns_six_paths_and_a_model_that_learned(tmp_path, tiny_base, monkeypatch):
    data = tmp_path / "data"
    csv_path = write_dataset(data, n=12)
    before = digests(data)
    # Flags a notebook kernel or the web app may carry; coqui's Trainer would parse them by default.
    monkeypatch.setattr(sys, "argv", ["kernel", "--epochs", "999", "--batch_size", "1000", "--continue_path", "/x"])
    result = train_gpt(
        "",
        "tiny",
        "en",
        2,
        4,
        2,
        str(csv_path),
        "",
        str(tmp_path / "out"),
        255995,
        True,
        True,
        False,
        False,
        num_workers=0,
        quality_eval=0,
    )

    assert isinstance(result, TrainResult)
    speaker, config, checkpoint, vocab, run_dir, reference = result
    for path in (speaker, config, checkpoint, vocab, reference):
        assert Path(path).is_file(), path
    assert Path(run_dir).is_dir() and Path(run_dir).parent == tmp_path / "out"
    assert result.checkpoint_path == checkpoint and Path(checkpoint).name == "best_model.pth"
    assert result.status == "finished"
    assert digests(data) == before, "the user's CSV or audio changed"

    records = train_records(run_dir)
    assert [r["step"] for r in records] == list(range(1, 7)), "2 epochs x 3 steps, argv ignored"
    for key in (
        "step",
        "epoch",
        "loss",
        "loss_text_ce",
        "loss_mel_ce",
        "lr",
        "step_time",
        "loader_time",
        "samples_per_sec",
        "process_rss_mb",
        "ram_used_mb",
    ):
        assert records[-1][key] is not None, key
    evals = [r for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if r["type"] == "eval"]
    assert len(evals) == 2 and all(e["eval_loss"] > 0 for e in evals)
    # With gradient accumulation the trainer logs a scaled loss; metrics keep it comparable with eval.
    train_mean = sum(r["loss"] for r in records) / len(records)
    assert abs(train_mean - evals[-1]["eval_loss"]) / evals[-1]["eval_loss"] < 0.25
    run = json.loads((Path(run_dir) / "run.json").read_text())
    assert run["arguments"]["num_epochs"] == 2 and run["arguments"]["train_csv"] == str(csv_path)
    assert run["versions"]["coqui-tts"] and run["device"]["summary"]
    assert (Path(run_dir) / "optimizations.json").is_file()
    trainer_config = json.loads((Path(run_dir) / "config.json").read_text())
    assert trainer_config["grad_clip"] == 1.0 and trainer_config["scheduler_after_epoch"] is False
    # Clipping measures the norm at each optimizer step: with grad_acumm=2 and 3 steps per epoch,
    # the 2nd step and the epoch's last one.
    assert [r["grad_norm"] is not None for r in records] == [False, True, True] * 2

    # The slim model has no optimizer or DVAE and loads into coqui's Xtts; its GPT moved from the base.
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts

    slim = torch.load(Path(run_dir) / "ready" / "model.pth", weights_only=True)
    assert set(slim) == {"model"} and not any(k.startswith("dvae.") for k in slim["model"])
    xtts_config = XttsConfig()
    xtts_config.load_json(config)
    model = Xtts(xtts_config)
    model.load_checkpoint(xtts_config, checkpoint_dir=str(Path(run_dir) / "ready"), eval=True)
    base = torch.load(tiny_base.model, weights_only=True)["model"]
    tuned = model.gpt.state_dict()
    changed = [k for k, v in tuned.items() if f"gpt.{k}" in base and not torch.equal(v, base[f"gpt.{k}"])]
    assert len(changed) > 10, "GPT weights did not move from the base model"


def test_overfitting_one_batch_lowers_the_loss(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=2, seconds=(2.0, 2.0))
    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=40,
        batch_size=1,
        grad_acumm=1,
        learning_rate=1e-3,
        lr_milestones=(0.9,),
        **FAST,
    )
    losses = [r["loss_mel_ce"] for r in train_records(result.run_dir)]
    assert len(losses) == 40
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < first * 2 / 3, f"mel loss {first:.3f} -> {last:.3f}: gradients do not reach the GPT"


def test_stop_then_resume_continues_the_step_count_and_schedule(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=14)  # 12 train rows -> 4 steps per epoch at batch 3
    seen: list[dict] = []
    common = dict(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=3,
        batch_size=3,
        grad_acumm=1,
        lr_milestones=(0.5,),
        save_step=5,
        **FAST,
    )

    stopped = train_gpt(
        **common,
        progress_callback=seen.append,
        stop_event=lambda: sum(r["type"] == "train" for r in seen) >= 7,
    )
    assert stopped.status == "stopped"
    first = train_records(stopped.run_dir)
    assert [r["step"] for r in first] == list(range(1, 8))
    assert first[-1]["lr"] == pytest.approx(2.5e-6), "milestone at optimizer step 6 of 12 halves the lr"
    stop_checkpoint = json.loads((Path(stopped.run_dir) / "run.json").read_text())["stop_checkpoint"]
    assert Path(stop_checkpoint).is_file()
    assert (Path(stopped.run_dir) / "ready" / "model.pth").is_file(), "a stopped run is still usable"

    resumed = train_gpt(**{**common, "resume_from": stopped.run_dir})
    assert resumed.run_dir == stopped.run_dir and resumed.status == "finished"
    after = train_records(resumed.run_dir)[len(first) :]
    assert after[0]["step"] == 8, "resume continues the step count"
    assert after[0]["lr"] == pytest.approx(2.5e-6), "the scheduler was restored, not restarted"
    assert [r["step"] for r in after] == list(range(8, 13)), "the interrupted epoch continues: 12 steps in all"
    # The optimizer state was restored: checkpoint_10 (named by the steps done, as the page counts them;
    # the resumed session's 3rd step) holds AdamW's step counter for all 10 steps, not only the 3 since the resume.
    late = torch.load(Path(resumed.run_dir) / "checkpoint_10.pth", weights_only=True)
    assert {float(s["step"]) for s in late["optimizer"][0]["state"].values()} == {10.0}
    # TensorBoard holds the same curve as metrics.jsonl, both legs, each step once.
    curve = tensorboard_scalars(resumed.run_dir, "train/loss")
    assert [step for step, _ in curve] == list(range(1, 13))
    assert [value for _, value in curve] == pytest.approx([r["loss"] for r in train_records(resumed.run_dir)])
    assert [step for step, _ in tensorboard_scalars(resumed.run_dir, "eval/loss")] == [4, 8, 12]


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(train_csv="/nonexistent/metadata.csv"), "train_csv not found"),
        (dict(train_csv=""), "train_csv is empty"),
        (dict(version="v9.9"), "Unknown base model version 'v9.9'"),
        (dict(num_epochs=0), "num_epochs must be a whole number of at least 1"),
        (dict(batch_size=0), "batch_size must be a whole number of at least 1"),
        (dict(precision="fp8"), "precision must be one of"),
        (dict(custom_model="/nonexistent/model.pth"), "custom_model not found"),
        (dict(learning_rate=-1.0), "learning_rate must be a number >= 0"),
    ],
)
def test_bad_arguments_raise_before_any_model_is_built(tmp_path, dataset_csv, change, message):
    args = dict(train_csv=str(dataset_csv), output_path=str(tmp_path / "out"), **FAST)
    with pytest.raises(ValueError, match=message):
        train_gpt(**{**args, **change})
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_empty_csv_and_all_rows_failing_are_refused(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="is empty"):
        train_gpt(train_csv=str(empty), output_path=str(tmp_path / "out"), **FAST)

    bad = tmp_path / "bad.csv"
    bad.write_text("audio_file|text|speaker_name\nwavs/missing1.wav|hello|a\nwavs/missing2.wav|world|a\n")
    before = bad.read_bytes()
    with pytest.raises(ValueError, match=r"0 of 2 rows usable(.|\n)*line 2: wavs/missing1.wav: Audio not found"):
        train_gpt(train_csv=str(bad), output_path=str(tmp_path / "out"), **FAST)
    assert bad.read_bytes() == before
    assert not (tmp_path / "out").exists()


def test_unknown_option_is_refused(tmp_path, dataset_csv):
    with pytest.raises(ValueError, match="Unknown option"):
        train_gpt(train_csv=str(dataset_csv), epochs=3, **FAST)


def test_ctrl_c_saves_a_checkpoint_and_returns_instead_of_killing_the_process(tmp_path, tiny_base):
    import signal

    # What a terminal or a notebook kernel has; a job started in the background (as CI may start the suite)
    # inherits SIGINT ignored, and Python keeps it so.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    csv_path = write_dataset(tmp_path / "data", n=14)
    seen: list[dict] = []

    def press_ctrl_c_at_step_3(record: dict) -> None:
        seen.append(record)
        if record["type"] == "train" and record["step"] == 3:
            signal.raise_signal(signal.SIGINT)  # what Ctrl-C / "interrupt kernel" delivers

    try:
        result = train_gpt(
            train_csv=str(csv_path),
            output_path=str(tmp_path / "out"),
            num_epochs=5,
            batch_size=3,
            grad_acumm=1,
            progress_callback=press_ctrl_c_at_step_3,
            **FAST,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.status == "interrupted"
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    # Named by the steps done, as the page shows them ("Step 3"): checkpoint_3.pth.
    assert Path(run["stop_checkpoint"]).name == "checkpoint_3.pth" and Path(run["stop_checkpoint"]).is_file()
    assert [r["step"] for r in train_records(result.run_dir)] == [1, 2, 3]
    assert seen[-1]["type"] == "status" and seen[-1]["status"] == "interrupted"


def test_out_of_memory_advice_names_what_to_change():
    from utils.options.arguments import TrainArguments
    from utils.training.loop.oom import out_of_memory_advice

    advice = out_of_memory_advice(TrainArguments(batch_size=8, grad_acumm=2, enable_grad_checkpoint=False))
    assert "enable_grad_checkpoint=True" in advice and "batch_size=4 with grad_acumm=4" in advice
    assert "enable_mixed_precision" not in advice


def test_missing_base_model_files_are_named_with_their_folder(tmp_path, tiny_base, dataset_csv, monkeypatch):
    from utils.model.base_models import MissingBaseModelFiles

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "models" / "v2.0.2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "vocab.json").write_bytes(tiny_base.vocab.read_bytes())
    with pytest.raises(MissingBaseModelFiles) as error:
        train_gpt(
            version="v2.0.2",
            models_dir=str(tmp_path / "models"),
            train_csv=str(dataset_csv),
            output_path=str(tmp_path / "out"),
            num_workers=0,
        )
    message = str(error.value)
    for name in ("model.pth", "dvae.pth", "mel_stats.pth", "speakers_xtts.pth"):
        assert f"  - {name}" in message
    assert "config.json" not in message.split("missing from")[1].split("Put them")[0]
    assert str(folder) in message and not (tmp_path / "out").exists()


def test_unreadable_vocab_is_a_clear_error(tmp_path, dataset_csv):
    folder = tmp_path / "models" / "v2.0.2"
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text("{}")
    with pytest.raises(ValueError, match="is not a readable XTTS vocab.json"):
        train_gpt(
            version="v2.0.2",
            models_dir=str(tmp_path / "models"),
            train_csv=str(dataset_csv),
            output_path=str(tmp_path / "out"),
        )
