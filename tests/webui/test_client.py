"""The web app driven through its named API endpoints with gradio_client, as a script would."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import soundfile as sf

from tests.helpers import SENTENCES, wait_until, write_clip
from tests.webui.app_server import running_app
from utils.options.arguments import TrainArguments
from webui.form import form_values

pytestmark = pytest.mark.slow


def absolute_path_csv(folder: Path, n: int = 12) -> Path:
    """A CSV with absolute audio paths, so it still resolves once uploaded into the app's temp folder."""
    lines = ["audio_file|text|speaker_name"]
    for i in range(n):
        clip = write_clip(folder / "wavs" / f"clip_{i:02d}.wav", 1.5 + 0.5 * (i % 4), i)
        lines.append(f"{clip}|{SENTENCES[i % len(SENTENCES)]}|speaker_a")
    path = folder / "metadata.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def form(train_csv: str, epochs: int, **changes) -> dict:
    """/start_training's parameters, named and valued as the declaration says (the form's own values)."""
    arguments = TrainArguments(
        version="tiny",
        num_epochs=epochs,
        batch_size=4,
        grad_acumm=1,
        enable_mixed_precision=False,
        train_csv=train_csv,
        quality_eval=0,
    )
    return {**form_values(arguments), **changes}


def wait_for(client, predicate, stall: float, what: str) -> dict:
    """The status once `predicate(status)` holds; waits while the app works (see tests.helpers.wait_until)."""
    seen: dict = {}

    def reached() -> dict | None:
        seen.update(client.predict(api_name="/training_status"))
        return dict(seen) if predicate(seen) else None

    return wait_until(reached, what, stall=stall, poll=1.0, describe=lambda: json.dumps(seen)[:2000])


@pytest.fixture(scope="module")
def app(tmp_path_factory, tiny_base):
    folder = tmp_path_factory.mktemp("webui")
    with running_app(folder) as server:
        yield server, folder


def test_dataset_train_stop_status_memory_synthesize_export(app):

    server, folder = app
    client = server.client()
    csv_path = absolute_path_csv(folder / "data")
    before = csv_path.read_bytes()

    # A CSV typed by path, in a folder the app was started with (--data-dir); its audio lies beside it.
    result = client.predict(None, str(csv_path), None, "", "en", 11.6, "tiny", False, api_name="/validate_dataset")
    summary, train_csv, language = result[0], result[-3], result[-1]
    assert "Ready to train" in summary and "12 of 12 rows usable" in summary and "10 for training" in summary
    assert train_csv.endswith("metadata.csv") and language == "en"

    # Numbers arrive as the web sends them; they are checked like the notebook's and never break the status.
    for epochs, complaint in (
        (1e30, "at most|greater than maximum"),
        (2.7, "whole number"),
        (0, "at least 1|less than"),
    ):
        with pytest.raises(Exception, match=complaint):
            client.predict(**form(train_csv, 2, num_epochs=epochs), api_name="/start_training")
    assert client.predict(api_name="/training_status")["status"] == "idle"

    assert client.predict(**form(train_csv, 2), api_name="/start_training") == "Training started."
    with pytest.raises(Exception, match="already"):
        client.predict(**form(train_csv, 2), api_name="/start_training")
    running = wait_for(client, lambda s: s["status"] == "running" and s["step"] >= 1, 180, "the first step")
    memory = client.predict(api_name="/memory_stats")
    assert memory["app"]["ram_total_mb"] > 0 and memory["app"]["process_rss_mb"] > 0
    assert memory["training_process"] is not None and memory["training_process"]["process_rss_mb"] > 100
    finished = wait_for(client, lambda s: s["status"] not in ("starting", "running"), 240, "the end of the run")
    assert finished["status"] == "finished", finished
    assert finished["step"] == 6 and finished["step"] > running["step"] - 1
    first_run = Path(finished["run_dir"])
    assert (first_run / "ready" / "model.pth").is_file()

    # A longer run, stopped midway: a checkpoint is saved and said where, named by the step shown.
    assert client.predict(**form(train_csv, 8), api_name="/start_training") == "Training started."
    wait_for(client, lambda s: s["status"] == "running" and s["step"] >= 2, 180, "two steps of the long run")
    assert "Stopping" in client.predict(api_name="/stop_training")
    stopped = wait_for(client, lambda s: s["status"] not in ("running", "stopping", "starting"), 180, "the stop")
    assert stopped["status"] == "stopped", stopped
    stop_checkpoint = json.loads((Path(stopped["run_dir"]) / "run.json").read_text())["stop_checkpoint"]
    assert Path(stop_checkpoint).is_file() and stopped["step"] < 8 * 3
    assert Path(stop_checkpoint).name == f"checkpoint_{stopped['step']}.pth"
    assert stop_checkpoint in stopped["message"], "the page says where the checkpoint is"

    # Resumed through the API by the run's name, with its own settings: the plan's 24 steps, no more.
    run_name = Path(stopped["run_dir"]).name
    assert client.predict(**form(train_csv, 8, resume_from=run_name), api_name="/start_training") == "Training started."
    resumed = wait_for(client, lambda s: s["status"] not in ("starting", "running"), 240, "the resumed run")
    assert resumed["status"] == "finished" and resumed["run_dir"] == stopped["run_dir"] and resumed["step"] == 24
    steps = [
        json.loads(line)["step"]
        for line in (Path(resumed["run_dir"]) / "metrics.jsonl").open()
        if json.loads(line)["type"] == "train"
    ]
    assert sorted(set(steps)) == list(range(1, 25))

    # The Test tab's defaults as the page sends them (whole numbers as int) generate speech.
    audio, download = client.predict(
        str(first_run),
        "",
        None,
        "Hello from the test.",
        "en",
        0.75,
        1,
        5,
        50,
        0.85,
        1,
        20,
        1,  # tries per sentence: one, unchecked (a script leaving it out gets the page's 3)
        api_name="/synthesize",
    )
    data, rate = sf.read(audio)
    assert rate == 24000 and len(data) > 0

    kept = sorted(p.name for p in first_run.glob("*.pth"))
    with pytest.raises(Exception, match="delete_checkpoints must be True or False; got 'false'"):
        client.predict(str(first_run), "false", api_name="/export_model")  # as a script may send it: not a yes
    assert kept and sorted(p.name for p in first_run.glob("*.pth")) == kept, "the run can still be resumed"
    archive, message = client.predict(str(first_run), False, api_name="/export_model")
    with zipfile.ZipFile(archive) as zipped:
        names = {Path(n).name for n in zipped.namelist()}
    assert {"model.pth", "config.json", "vocab.json", "reference.wav", "finetune.json"} <= names
    assert "Exported" in message
    # Every answer about a run says first whether there is one; a long name is not echoed whole.
    for name, why in [
        ("12345", "12345 has no export left to finish: there is no such run"),
        (first_run.name, "its ready/ is complete"),
    ]:
        with pytest.raises(Exception, match=why):
            client.predict(name, api_name="/finish_export")
    with pytest.raises(Exception) as refused:
        client.predict("x" * 1_000_000, api_name="/finish_export")
    assert "1,000,000 characters" in str(refused.value) and len(str(refused.value)) < 2000
    assert csv_path.read_bytes() == before
