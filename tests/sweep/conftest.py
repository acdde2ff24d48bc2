"""One sweep of the tiny model, shared by the sweep tests: started from the CLI, killed with kill -9 while its
second trial trains, then continued by two processes at once on the same SQLite study (the CLI again, and the API
from a script), to four trials in all.

Trial 0 is the given learning rate (1e-3), trial 1 the queued 1e-7, which falls behind at its first evaluation and
is pruned (eval loss is the rule: on a model that speaks noise it is the measure that moves); trials 2 and 3 are
drawn by TPE. quality_eval=1 speaks one sentence and the probes (10 audio tokens) so the baseline is scored by
trial 0 and shared by the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import children_working, run_watched, wait_until, write_dataset

STUDY = "fixture"
FIXED = {
    "version": "tiny",
    "language": "en",
    "batch_size": 2,
    "grad_acumm": 1,
    "num_epochs": 2,
    "precision": "fp32",
    "num_workers": 0,
    "quality_eval": 1,
    "quality_max_audio_tokens": 10,
    "whisper_model": "tiny.en",
    "learning_rate": 1e-3,
    "retention_languages": "",  # a trial's own scoring is what the sweep reads; retention is tested apart
}
SPACE = ["learning_rate=1e-7:1e-3"]
FIRST = [{"learning_rate": 1e-3}, {"learning_rate": 1e-7}]


def cli_command(csv: Path, output: Path) -> list[str]:
    command = [sys.executable, "-m", "utils.cli", "sweep", "--train-csv", str(csv), "--output-path", str(output)]
    for name, value in FIXED.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    command += ["--rule", "eval_loss", "--study-name", STUDY, "--trials", "4"]
    for item in SPACE:
        command += ["--space", item]
    for first in FIRST:
        command += ["--first-trial", json.dumps(first)]
    return command


def api_script(csv: Path, output: Path) -> str:
    return (
        "from utils.gpt_train import sweep_gpt\n"
        f"result = sweep_gpt(train_csv={str(csv)!r}, output_path={str(output)!r}, rule='eval_loss', "
        f"study_name={STUDY!r}, trials=4, space={SPACE!r}, first_trials={FIRST!r}, **{FIXED!r})\n"
        "print(result.to_markdown())\n"
    )


def trial_runs(output: Path, number: int) -> list[Path]:
    return sorted(output.glob(f"{STUDY}-t{number:03d}-*"))


def _training(run_dir: Path) -> bool:
    metrics = run_dir / "metrics.jsonl"
    return metrics.is_file() and '"type": "train"' in metrics.read_text()


@pytest.fixture(scope="session")
def resumed_sweep(tmp_path_factory, tiny_base):
    """{"output", "csv", "killed_pid", "first_log", "cli", "api"}: the sweep's output folder after it ended."""
    root = tmp_path_factory.mktemp("sweep")
    csv = write_dataset(root / "data", n=10)
    output = root / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first_log = root / "first.log"
    with open(first_log, "wb") as log:
        first = subprocess.Popen(cli_command(csv, output), stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(
            lambda: trial_runs(output, 1) and _training(trial_runs(output, 1)[0]),
            "the second trial to train",
            progress=children_working(root),
        )
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # Two processes continue the study at once: the CLI again, and a script through the API.
    api_log = root / "api.log"
    with open(api_log, "wb") as log:
        api = subprocess.Popen(
            [sys.executable, "-c", api_script(csv, output)], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    cli = run_watched(cli_command(csv, output), text=True, env=env, progress=children_working(root))
    wait_until(lambda: api.poll() is not None, "the API's sweep to end", progress=children_working(root))
    api_out = api_log.read_text(errors="replace")
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert api.returncode == 0, api_out[-3000:]
    return {
        "output": output,
        "csv": csv,
        "killed_pid": first.pid,
        "first_log": first_log.read_text(errors="replace"),
        "cli": cli.stdout,
        "api": api_out,
        "storage": f"sqlite:///{output / 'sweeps' / (STUDY + '.db')}",
    }
