"""The web UI's handlers as plain functions: validation, argument building, status reading."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tests.helpers import children_working, digests, wait_until, write_clip, write_dataset
from utils.options.arguments import TrainArguments
from utils.training.process.runner import RunState, TrainingRunner
from utils.training.recording.run_record import RunStatus
from webui import run_view
from webui.context import UIContext
from webui.dataset_handlers import validate_handler
from webui.export_tab import delete_training_checkpoints
from webui.form import arguments_from_form, form_values
from webui.plan_view import batch_markdown, plan_markdown


def make_context(tmp_path: Path) -> UIContext:
    """The app as launched with `--output-dir tmp/output --data-dir tmp/data`."""
    output = tmp_path / "output"
    (tmp_path / "data").mkdir(exist_ok=True)
    return UIContext(output_dir=output, runner=TrainingRunner(output), data_dirs=((tmp_path / "data").resolve(),))


# The form's values (component ids, the clip length in seconds) derive from the declaration, as in the app.
FORM = form_values(
    TrainArguments(
        version="tiny",
        num_epochs=3,
        batch_size=4,
        grad_acumm=2,
        max_audio_length=220500,
        enable_sdpa=False,
        train_csv="data/metadata.csv",
        save_step=500,
        seed=3,
        quality_eval=0,
    )
)


def build_train_kwargs(output_dir: str, **values) -> dict:
    return arguments_from_form(values, output_dir).to_dict()


def test_form_values_map_to_train_gpt_arguments(tmp_path):
    assert FORM["max_seconds"] == 10.0, "the form shows seconds"
    kwargs = build_train_kwargs(**FORM, output_dir=str(tmp_path))
    assert kwargs["max_audio_length"] == 220500 and kwargs["enable_sdpa"] is False
    assert kwargs["num_epochs"] == 3 and isinstance(kwargs["batch_size"], int)
    assert kwargs["output_path"] == str(tmp_path) and kwargs["seed"] == 3
    with pytest.raises(ValueError, match="num_epochs"):
        build_train_kwargs(**{**FORM, "num_epochs": 0}, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="No dataset yet"):
        build_train_kwargs(**{**FORM, "train_csv": " "}, output_dir=str(tmp_path))


def test_batch_and_plan_texts():
    text = batch_markdown(10, 4, 2, 3)
    assert "4 × 2 = 8 clips" in text and "3 steps and 2 optimizer steps per epoch, 9 steps in 3 epochs" in text
    assert "check a dataset" in batch_markdown(None, 4, 2, 3)
    plan = plan_markdown(True, False, True, "fp16")
    assert "**gradient checkpointing**: on." in plan and "**SDPA attention**: off." in plan


def test_validate_handler_reports_problems_and_fills_the_fine_tune_fields(tmp_path):
    ctx = make_context(tmp_path)
    data = tmp_path / "data"
    csv_path = write_dataset(data, n=6)
    write_clip(data / "wavs" / "short.wav", 0.4, 99)
    with open(csv_path, "a") as handle:
        handle.write("wavs/short.wav|too short|speaker_a\nwavs/missing.wav|no file|speaker_a\n")
    before = digests(data)

    result = validate_handler(ctx, None, str(csv_path), None, "", "en", 11.6, "tiny", False)
    summary, problems, histogram, preview, *players, train_csv, eval_csv, language, train_rows = result
    assert "Ready to train on 6 of 8 rows (2 rejected" in summary and "6 of 8 rows usable" in summary
    assert list(problems["line"]) == [8, 9]
    assert "shorter than 1 s" in problems["reason"][0] and "not found" in problems["reason"][1]
    assert histogram["value"]["clips"].sum() == 6 and train_csv == str(csv_path) and eval_csv == "" and language == "en"
    assert train_rows == 5 and len(preview) == 8
    shown = [p for p in players if p["visible"]]
    assert len(shown) == 3 and all(p["value"][0] == 22050 and len(p["value"][1]) > 22050 for p in shown)
    assert digests(data) == before


def test_validate_handler_turns_bad_input_into_a_message(tmp_path):
    import gradio as gr

    with pytest.raises(gr.Error, match="train_csv not found"):
        validate_handler(make_context(tmp_path), None, str(tmp_path / "data" / "nope.csv"), None, "", "en", 11.6)


def test_status_views_from_metrics_records():
    records = [
        {"type": "status", "status": "started", "total_steps": 10},
        *(
            {
                "type": "train",
                "step": s,
                "epoch": 1,
                "loss": 5.0 - 0.1 * s,
                "step_time": 0.5,
                "loader_time": 0.5,
                "samples_per_sec": 8.0,
                "total_steps": 10,
            }
            for s in range(1, 5)
        ),
        {"type": "eval", "step": 4, "eval_loss": 4.8, "total_steps": 10},
    ]
    info = run_view.progress(records)
    assert (info["step"], info["total"], info["eval_loss"]) == (4, 10, 4.8)
    assert info["eta_s"] == pytest.approx(6 * 1.0)
    frame = run_view.loss_frame(records)
    assert list(frame["series"]) == ["train"] * 4 + ["eval"] and frame["step"].dtype.kind == "i"
    assert run_view.loss_frame([]).dtypes["loss"].kind == "f", "typed even when empty"
    state = RunState(status=RunStatus.RUNNING, message="Training...", run_dir="/x")
    text = run_view.status_markdown(state, info)
    assert "Step 4 / 10" in text and "ETA 0m 06s" in text and "eval loss 4.8000" in text
    assert "40%" in run_view.progress_html(info, "running")
    diverged = records + [{"type": "train", "step": 5, "epoch": 1, "loss": None, "total_steps": 10}]
    assert "loss NaN/inf" in run_view.status_markdown(state, run_view.progress(diverged))
    long_run = [{"type": "train", "step": s, "loss": 1.0} for s in range(1, 10_001)]
    thinned = run_view.loss_frame(long_run)
    assert len(thinned) <= run_view.MAX_PLOT_POINTS + 1 and thinned["step"].iloc[-1] == 10_000


def test_code_snippet_reproduces_the_arguments():
    arguments = {**build_train_kwargs(**FORM, output_dir="out"), "lr_milestones": [0.5, 0.75]}
    tree = ast.parse(run_view.code_snippet(arguments))
    call = tree.body[-1].value
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert keywords["version"] == "tiny" and keywords["grad_acumm"] == 2 and keywords["enable_sdpa"] is False
    assert keywords["seed"] == 3 and keywords["save_step"] == 500
    assert "lr_milestones" not in keywords, "defaults beyond the positional ones are left out"


def test_delete_training_checkpoints_keeps_ready_and_records(tmp_path):
    run = tmp_path / "run"
    (run / "ready").mkdir(parents=True)
    for name in ("checkpoint_5.pth", "best_model.pth", "best_model_3.pth", "ready/model.pth", "run.json"):
        (run / name).write_text("x")
    removed = delete_training_checkpoints(run)
    assert sorted(p.name for p in removed) == ["best_model.pth", "best_model_3.pth", "checkpoint_5.pth"]
    assert (run / "ready" / "model.pth").is_file() and (run / "run.json").is_file()


@pytest.mark.slow
def test_runner_status_follows_a_real_child_run(tmp_path, tiny_base):
    runner = TrainingRunner(tmp_path / "output")
    csv_path = write_dataset(tmp_path / "data", n=6)
    kwargs = build_train_kwargs(
        **{**FORM, "train_csv": str(csv_path), "num_epochs": 1, "enable_mixed_precision": False},
        output_dir=str(tmp_path / "output"),
    )
    started, _ = runner.start(kwargs)
    assert started and runner.state.status == "starting"
    again, message = runner.start(kwargs)
    assert not again and "already" in message
    wait_until(lambda: not runner.is_active(), "the run", progress=children_working(tmp_path / "output"))
    state = runner.poll()
    assert state.status == "finished", (state.error, runner.log_tail())
    assert Path(state.run_dir, "ready", "model.pth").is_file()
    assert runner.metrics()[-1]["status"] == "finished"
    assert state.memory_history and state.memory["process_rss_mb"] > 0
    assert "Training finished." in runner.log_tail()
    shutil.rmtree(tmp_path / "output", ignore_errors=True)


@pytest.mark.slow
def test_runner_reports_a_failed_child_and_stays_usable(tmp_path):
    runner = TrainingRunner(tmp_path / "output")
    kwargs = build_train_kwargs(
        **{**FORM, "train_csv": str(tmp_path / "gone.csv")}, output_dir=str(tmp_path / "output")
    )
    assert runner.start(kwargs)[0]
    wait_until(lambda: not runner.is_active(), "the run", progress=children_working(tmp_path / "output"))
    state = runner.poll()
    assert state.status == "failed" and "train_csv not found" in state.error
    assert "Traceback" in state.traceback and "train_csv not found" in runner.log_tail()
    assert not runner.is_active() and runner.stop() == "No training run is active."


def test_zip_upload_is_extracted_safely_and_checked(tmp_path):
    import zipfile

    import gradio as gr

    from webui.dataset_handlers import zip_handler

    ctx = make_context(tmp_path)
    csv_path = write_dataset(tmp_path / "data", n=5)
    files = sorted((tmp_path / "data").rglob("*"))
    good = tmp_path / "data" / "voice.zip"  # in a --data-dir folder, as an upload would be in Gradio's
    with zipfile.ZipFile(good, "w") as archive:
        for file in files:
            archive.write(file, f"voice/{file.relative_to(tmp_path / 'data')}")
    summary, *_, train_csv, eval_csv, language, train_rows = zip_handler(ctx, str(good), "en", 11.6)
    assert "Ready to train" in summary and train_rows == 4
    assert Path(train_csv).name == csv_path.name and ctx.datasets_dir in Path(train_csv).parents

    evil = tmp_path / "data" / "evil.zip"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../../escaped.csv", "audio_file|text|speaker_name\n")
    with pytest.raises(gr.Error, match="refused"):
        zip_handler(ctx, str(evil), "en", 11.6)
    assert not (tmp_path / "escaped.csv").exists() and not (ctx.output_dir / "escaped.csv").exists()


def test_preview_plays_only_decodable_audio_never_other_files(tmp_path):
    ctx = make_context(tmp_path)
    data = tmp_path / "data"
    csv_path = write_dataset(data, n=2)
    secret = tmp_path / "secret.txt"
    secret.write_text("not audio")
    with open(csv_path, "a") as handle:
        handle.write(f"{secret}|a text file|speaker_a\n")
    result = validate_handler(ctx, None, str(csv_path), None, "", "en", 11.6, "tiny", False)
    players = result[4:7]
    assert [p["visible"] for p in players] == [True, True, False], "two clips play; the text file does not"
    assert not ctx.output_dir.exists() or not any(ctx.output_dir.rglob("*.txt")), "nothing copied to serve"


def test_prepared_dataset_names_cannot_leave_the_datasets_folder(tmp_path):
    import gradio as gr

    from webui.dataset_handlers import prepared_folder

    ctx = make_context(tmp_path)
    assert prepared_folder(ctx, "my-voice_1", "en") == ctx.datasets_dir / "my-voice_1"
    assert prepared_folder(ctx, "", "am").name.startswith("prepared-amh-")
    for bad in ("../escape", "/etc", "a/b", ".hidden", "x..y"):
        with pytest.raises(gr.Error):
            prepared_folder(ctx, bad, "en")
