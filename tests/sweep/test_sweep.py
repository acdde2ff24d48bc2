"""The sweep (utils.sweep) on the tiny model: the study a kill -9 interrupted and two processes finished
(tests/sweep/conftest.py), read from its storage and its run folders."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tests.sweep.conftest import FIXED, STUDY, trial_runs
from utils.files import read_json, read_jsonl
from utils.sweep.study import TRIAL_FILE
from utils.sweep.sweep import sweep_gpt


def study_of(sweep):
    return optuna.load_study(study_name=STUDY, storage=sweep["storage"])


def test_the_study_holds_four_trials_one_pruned_by_its_first_evaluation(resumed_sweep):
    trials = study_of(resumed_sweep).get_trials()
    assert len(trials) == 4
    states = [t.state for t in trials]
    assert states[0] == optuna.trial.TrialState.COMPLETE
    assert trials[0].params == {"learning_rate": 1e-3}
    # The queued 1e-7 has a higher eval loss than 1e-3 at epoch 1: stopped there with its checkpoint.
    assert trials[1].params == {"learning_rate": 1e-7}
    assert states[1] == optuna.trial.TrialState.PRUNED
    assert trials[1].user_attrs["pruned_at_epoch"] == 1
    pruned_run = Path(trials[1].user_attrs["run_dir"])
    record = read_json(pruned_run / "run.json")
    assert record["status"] == "stopped" and record["stop_checkpoint"]
    assert read_json(pruned_run / TRIAL_FILE)["state"] == "pruned"
    assert all(s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED) for s in states)
    assert trials[0].value == pytest.approx(min(t.value for t in trials if t.value is not None))


def test_the_killed_trial_resumed_in_its_own_folder_under_another_process(resumed_sweep):
    output, trials = resumed_sweep["output"], study_of(resumed_sweep).get_trials()
    folders = trial_runs(output, 1)
    assert len(folders) == 1  # resumed, not started again
    assert Path(trials[1].user_attrs["run_dir"]) == folders[0]
    history = read_json(folders[0] / "run.json")["history"]
    assert history, "the trial's run was resumed from its checkpoint"
    assert '"trial": 1' in resumed_sweep["first_log"]
    owners = {t.user_attrs["owner"]["pid"] for t in trials[1:]}
    # Two processes shared the study after the kill: each ran a trial; none of them is the one killed.
    assert len(owners) == 2
    assert resumed_sweep["killed_pid"] not in owners
    assert len({t.params["learning_rate"] for t in trials}) == 4  # two processes, two draws


def test_every_later_trial_takes_the_first_trials_baseline_scored_once(resumed_sweep):
    runs = [trial_runs(resumed_sweep["output"], n)[0] for n in range(4)]
    baselines = [[r for r in read_jsonl(run / "metrics.jsonl") if r.get("baseline")] for run in runs]
    assert all(len(b) == 1 for b in baselines)
    assert baselines[0][0].get("baseline_from") is None
    for run, (baseline,) in zip(runs[1:], baselines[1:], strict=True):
        assert baseline["baseline_from"] == str(runs[0])
        assert baseline["naturalness"] == baselines[0][0]["naturalness"]
        for name in baseline["files"] + [p["file"] for p in baseline["probes"]]:
            assert (run / name).is_file(), name


def test_another_question_cannot_write_into_the_study(resumed_sweep):
    with pytest.raises(ValueError, match="another sweep's.*learning_rate|another sweep's.*num_epochs"):
        sweep_gpt(
            train_csv=str(resumed_sweep["csv"]),
            output_path=str(resumed_sweep["output"]),
            rule="eval_loss",
            study_name=STUDY,
            trials=5,
            space=["learning_rate=1e-7:1e-3"],
            **{**FIXED, "num_epochs": 3},
        )
    with pytest.raises(ValueError, match="rule eval_loss vs cer"):
        sweep_gpt(
            train_csv=str(resumed_sweep["csv"]),
            output_path=str(resumed_sweep["output"]),
            rule="cer",
            study_name=STUDY,
            trials=5,
            space=["learning_rate=1e-7:1e-3"],
            **FIXED,
        )
    assert len(study_of(resumed_sweep).get_trials()) == 4


def test_a_storage_that_does_not_open_is_said(resumed_sweep, tmp_path):
    with pytest.raises(ValueError, match="does not open.*does not exist"):
        sweep_gpt(
            train_csv=str(resumed_sweep["csv"]),
            output_path=str(tmp_path),
            trials=2,
            storage=f"sqlite:///{tmp_path}/missing/study.db",
            rule="eval_loss",
            **FIXED,
        )
    with pytest.raises(ValueError, match="does not open"):
        sweep_gpt(
            train_csv=str(resumed_sweep["csv"]),
            output_path=str(tmp_path),
            trials=2,
            storage="postgresql://me:secret@127.0.0.1:1/none",
            rule="eval_loss",
            **FIXED,
        )


def test_the_storage_opens_in_optuna_dashboard(resumed_sweep):
    from optuna_dashboard import wsgi

    app, said = wsgi(resumed_sweep["storage"]), {}
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/api/studies",
        "QUERY_STRING": "",
        "SERVER_NAME": "x",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
    }
    body = b"".join(app(environ, lambda status, headers, exc_info=None: said.update(status=status)))
    assert said["status"] == "200 OK"
    (summary,) = json.loads(body)["study_summaries"]
    assert summary["study_name"] == STUDY


def test_compare_runs_lists_the_trials_best_first(resumed_sweep):
    from utils.gpt_train import compare_runs

    frame = compare_runs(resumed_sweep["output"], sort_by="eval_loss")
    assert list(frame["trial"]) and set(frame["sweep"]) == {STUDY}
    assert sorted(frame["trial"]) == [0, 1, 2, 3]
    losses = list(frame["eval_loss"])
    assert losses == sorted(losses) and frame["trial"][0] == 0
    assert dict(zip(frame["trial"], frame["trial_state"], strict=True))[1] == "pruned"
    assert set(frame["status"]) <= {"finished", "stopped"}
    assert frame["minutes"].notna().all()
    shown = subprocess.run(
        [sys.executable, "-m", "utils.cli", "runs", str(resumed_sweep["output"]), "--sort", "eval_loss"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = shown.splitlines()
    assert lines[1].startswith(f"{STUDY}-t000-") and len(lines) == 5


def test_a_trial_the_memory_plan_refuses_is_recorded_and_never_trained(resumed_sweep, tmp_path):
    result = sweep_gpt(
        train_csv=str(resumed_sweep["csv"]),
        output_path=str(tmp_path / "out"),
        rule="eval_loss",
        trials=1,
        memory_limit_gib=0.001,
        **FIXED,
    )
    (trial,) = result.trials
    assert trial["state"] == "fail" and "the memory plan needs" in trial["reason"] and "0.00 GiB" in trial["reason"]
    assert not list((tmp_path / "out").glob("sweep-t000-*")), "no run folder: nothing trained"
    assert "No trial finished with a value yet" in result.message


def test_stop_ends_the_sweep_and_leaves_the_trial_to_resume(resumed_sweep, tmp_path):
    import threading

    stop = threading.Event()
    events = []
    output = tmp_path / "out"

    def progress(event):
        events.append(event)
        if event["event"] == "evaluated":
            stop.set()  # as the page's Stop sweep, once the first trial has trained an epoch

    common = {"train_csv": str(resumed_sweep["csv"]), "output_path": str(output), "rule": "eval_loss"}
    result = sweep_gpt(study_name="stopped", trials=3, stop_event=stop, progress=progress, **common, **FIXED)
    (trial,) = result.trials
    assert trial["state"] == "running" and "1 to resume" in result.message
    assert [e["event"] for e in events if e["event"] in ("paused", "adopted", "resumed")] == ["paused"]
    record = read_json(Path(trial["run_dir"]) / "run.json")
    assert record["status"] == "stopped" and record["stop_checkpoint"]
    assert read_json(Path(trial["run_dir"]) / TRIAL_FILE)["state"] == "paused"


def test_a_trial_stopped_before_its_run_began_is_queued_again(resumed_sweep, tmp_path):
    import threading

    stop = threading.Event()

    def progress(event):
        if event["event"] == "started":
            stop.set()  # while its worker checks the dataset

    common = {"train_csv": str(resumed_sweep["csv"]), "output_path": str(tmp_path / "out"), "rule": "eval_loss"}
    result = sweep_gpt(study_name="early", trials=3, stop_event=stop, progress=progress, **common, **FIXED)
    first, queued = result.trials
    assert first["state"] == "fail" and "before it began" in first["reason"]
    assert queued["state"] == "waiting"
    storage = f"sqlite:///{tmp_path / 'out' / 'sweeps' / 'early.db'}"
    waiting = optuna.load_study(study_name="early", storage=storage).get_trials()[1]
    assert waiting.system_attrs["fixed_params"] == first["params"]  # the next sweep of the study trains them
