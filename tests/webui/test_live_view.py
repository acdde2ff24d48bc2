"""The Fine-tune tab's live view as a refresh computes it: plots drawn from their data alone (every series, whole
steps, memory in GB, NaN losses marked), a page refreshed only with what changed and at an idle pace when nothing
runs, buttons that follow the run, a status without leftovers, and a form that forgets a resume."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import gradio as gr

from tests.webui.test_handlers import make_context
from utils.training.process.runner import RunState
from utils.training.recording.run_record import RunStatus
from webui import live_view, quality_view, run_view

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def texts(root: ET.Element, cls: str) -> list[str]:
    return [e.text or "" for e in root.iter(f"{SVG}text") if e.get("class") == cls]


def series_of(root: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-series"): g for g in root.iter(f"{SVG}g") if g.get("class") == "plot-series"}


def train(step: int, loss: float | None) -> dict:
    return {"type": "train", "step": step, "epoch": 1, "loss": loss, "total_steps": 8, "step_time": 1.0}


def test_the_loss_plot_draws_train_and_a_lone_eval_point_on_whole_steps():
    records = [train(s, 7.6 - 0.01 * s) for s in range(1, 5)] + [{"type": "eval", "step": 2, "eval_loss": 7.59}]
    root = parse(run_view.loss_plot(records))
    drawn = series_of(root)
    assert set(drawn) == {"train", "eval"}
    assert drawn["train"].find(f"{SVG}polyline") is not None, "the train loss is a line"
    assert drawn["eval"].findall(f"{SVG}circle"), "one evaluation is a dot (a line of one point draws nothing)"
    assert drawn["train"].get("stroke") != drawn["eval"].get("stroke"), "one colour per series"
    steps = texts(root, "x-tick")
    assert steps and all(t.isdigit() for t in steps), f"steps are whole numbers: {steps}"
    assert texts(root, "y-title") == ["loss"] and texts(root, "x-title") == ["step"]


def test_the_memory_plot_is_in_gb_with_readable_ticks():
    start = time.time()
    history = [
        {"type": "memory", "time": start + i, "process_rss_mb": 1500.0 + 10 * i, "ram_used_mb": 12000.0 + 50 * i}
        for i in range(30)
    ]
    root = parse(run_view.memory_plot(history))
    assert set(series_of(root)) == {"training process RAM", "system RAM used"}
    assert texts(root, "y-title") == ["memory (GB)"]
    labels = texts(root, "y-tick")
    assert labels and all(float(label) < 20 for label in labels), f"GB, not MB: {labels}"
    assert not any(label.startswith(",") or label.endswith(",000") for label in labels), labels
    assert all(t.isdigit() for t in texts(root, "x-tick")), "whole seconds"


def test_a_nan_loss_is_marked_on_the_plot_and_said_in_the_status():
    records = [train(1, 7.5), train(2, None), train(3, 7.4)]
    root = parse(run_view.loss_plot(records))
    gaps = [g for g in root.iter(f"{SVG}g") if g.get("class") == "plot-gap"]
    assert len(gaps) == 1 and len(gaps[0].findall(f"{SVG}path")) == 1, "one mark for the one NaN step"
    legend = [t.text for g in root.iter(f"{SVG}g") if g.get("class") == "plot-legend" for t in g.iter(f"{SVG}text")]
    assert "NaN/inf loss (not plotted): 1" in legend
    state = RunState(status=RunStatus.RUNNING, message="Training...")
    status = run_view.status_markdown(state, run_view.progress(records), run_view.nan_loss_steps(records))
    assert "1 step(s) had a NaN/inf loss (step 2)" in status


def test_a_run_that_ended_shows_no_eta():
    records = [train(s, 7.0) for s in range(1, 4)]
    info = run_view.progress(records)
    for status in (RunStatus.STOPPED, RunStatus.FINISHED, RunStatus.FAILED):
        assert "ETA" not in run_view.status_markdown(RunState(status=status, message="x"), info), status
    assert "ETA" in run_view.status_markdown(RunState(status=RunStatus.RUNNING, message="x"), info)


def test_only_the_best_evaluation_is_starred():
    records = [
        {"type": "quality", "step": 2, "is_best": True},
        {"type": "quality", "step": 4, "is_best": False},
        {"type": "quality", "step": 6, "is_best": True},  # overtook step 2
    ]
    table = quality_view.quality_frame(records)
    assert list(table["best"]) == ["★", "", ""] and list(table["step"]) == [6, 4, 2]


def follow_a_fake_run(ctx, monkeypatch, status: RunStatus) -> None:
    """The runner follows a run in `status` (its worker alive while the status is active)."""
    monkeypatch.setattr(ctx.runner, "_worker_running", lambda: status.active)
    ctx.runner.state = RunState(status=status, message=status.value, arguments={"num_epochs": 3})


def test_a_refresh_sends_only_what_changed_and_idles_slowly(tmp_path, monkeypatch):
    ctx = make_context(tmp_path)
    outputs = len(live_view.OUTPUTS)
    first = live_view.refresh(ctx, {})
    sent, timer, seen = first[:outputs], first[outputs], first[outputs + 1]
    assert all(value != gr.skip() for value in sent), "a new page gets everything"
    assert timer["value"] == live_view.IDLE_S, "nothing runs: the idle pace"
    again = live_view.refresh(ctx, seen)
    changed = [key for key, value in zip(live_view.OUTPUTS, again, strict=False) if value != gr.skip()]
    assert changed in ([], ["memory"]), f"an idle page is sent nothing (this app's RAM may move): {changed}"
    assert again[outputs] == gr.skip(), "the timer keeps its pace"

    follow_a_fake_run(ctx, monkeypatch, RunStatus.RUNNING)
    running = dict(zip(live_view.OUTPUTS, live_view.refresh(ctx, again[-1]), strict=False))
    *_, timer, seen = live_view.refresh(ctx, again[-1])
    assert timer["value"] == live_view.ACTIVE_S, "a run: the live pace"
    assert running["start"]["interactive"] is False and running["stop"]["interactive"] is True
    assert "Running" in running["status"] and running["start_message"] == gr.skip(), "'Training started.' stays"

    follow_a_fake_run(ctx, monkeypatch, RunStatus.FINISHED)
    ended = dict(zip(live_view.OUTPUTS, live_view.refresh(ctx, seen), strict=False))
    assert "Finished" in ended["status"]
    assert ended["start"]["interactive"] is True and ended["stop"]["interactive"] is False, "the buttons follow"
    assert ended["start_message"] == "", "Start's words go with the run"


def test_after_a_reload_the_form_is_a_new_run_with_the_last_runs_settings(tmp_path, monkeypatch):
    from webui.form import form_ids
    from webui.train_tab import form_on_load

    ctx = make_context(tmp_path)
    follow_a_fake_run(ctx, monkeypatch, RunStatus.FINISHED)
    ctx.runner.state.arguments = {"num_epochs": 7, "resume_from": str(tmp_path / "output" / "en-tiny-1")}
    values = dict(zip(form_ids(), form_on_load(ctx), strict=False))
    assert values["num_epochs"] == 7, "the run's settings"
    assert values["resume_from"] == "", "a new Start starts a new run: the resume is not carried over"


def test_an_idle_page_ticks_without_refreshing_and_a_new_step_refreshes_it(tmp_path, monkeypatch):
    import json

    ctx = make_context(tmp_path)
    idle = live_view.pulse(ctx)
    assert live_view.pulse(ctx) == idle, "nothing changed: no refresh is triggered"
    run_dir = tmp_path / "output" / "en-tiny-1"
    run_dir.mkdir(parents=True)
    follow_a_fake_run(ctx, monkeypatch, RunStatus.RUNNING)
    ctx.runner.state.run_dir = str(run_dir)
    running = live_view.pulse(ctx)
    assert running != idle and live_view.pulse(ctx) == running
    with open(run_dir / "metrics.jsonl", "a") as handle:
        handle.write(json.dumps(train(1, 7.5)) + "\n")
    assert live_view.pulse(ctx) != running, "a step: the page refreshes"


def test_the_servers_queue_does_not_spin_while_free():
    from webui.ui import quiet_queue

    with gr.Blocks() as demo:
        gr.Textbox()
    queue = quiet_queue(demo.queue())._queue
    assert queue.sleep_when_free >= 0.02 and queue.progress_update_sleep_when_free >= 0.1
