"""Every path from the web stays inside the app's folders: the launched app, driven through its API and its file
route as an attacker would, never reads or serves anything outside; launch refuses an open server."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
import zipfile

import pytest

from tests.helpers import digests, run_watched, write_clip, write_dataset
from tests.webui.app_server import ROOT, running_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory, tiny_base):
    folder = tmp_path_factory.mktemp("confined")
    with running_app(folder) as server:
        yield server, folder


def client_for(server):

    return server.client()


def refused(call, *args, api_name: str, **kwargs) -> str:
    with pytest.raises(Exception) as error:
        call(*args, api_name=api_name, **kwargs)
    return str(error.value)


def test_typed_paths_outside_the_app_folders_are_refused_unread(app, tmp_path):
    server, folder = app
    client = client_for(server)
    secret = tmp_path / "secret.csv"
    secret.write_text("audio_file|text|speaker_name\nTOP-SECRET|x|y\n")
    for path in (str(secret), "/etc/passwd", f"{folder}/data/../../{tmp_path.name}/secret.csv"):
        message = refused(client.predict, None, path, None, "", "en", 11.6, "tiny", False, api_name="/validate_dataset")
        assert "outside the folders this app may use" in message and "TOP-SECRET" not in message
    # A symlink inside an allowed folder that points outside is resolved, and refused.
    link = folder / "data" / "linked.csv"
    link.symlink_to(secret)
    message = refused(
        client.predict, None, str(link), None, "", "en", 11.6, "tiny", False, api_name="/validate_dataset"
    )
    assert "outside the folders" in message and "TOP-SECRET" not in message


def test_a_zip_naming_audio_outside_itself_plays_and_uses_none_of_it(app, tmp_path):
    from gradio_client import handle_file

    server, folder = app
    client = client_for(server)
    outside = write_clip(tmp_path / "elsewhere" / "private.wav", 2.0, 7)
    before = digests(tmp_path / "elsewhere")
    write_dataset(tmp_path / "voice", n=4)
    csv = tmp_path / "voice" / "metadata.csv"
    escape = "../../private.wav"  # from uploads/<hash>/voice/: up and out of the upload
    csv.write_text(csv.read_text() + f"{outside}|an absolute path elsewhere|spk\n{escape}|out of the upload|spk\n")
    archive = tmp_path / "voice.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for file in sorted((tmp_path / "voice").rglob("*")):
            zipped.write(file, f"voice/{file.relative_to(tmp_path / 'voice')}")
    result = client.predict(handle_file(str(archive)), "en", 11.6, "tiny", False, api_name="/upload_zip")
    summary, problems = result[0], result[1]
    reasons = [row[-1] for row in problems["data"]]
    assert sum("points outside the dataset's folder" in r for r in reasons) == 2, reasons
    assert "4 of 6 rows usable" in summary
    assert digests(tmp_path / "elsewhere") == before


def test_export_and_synthesis_reach_only_runs_of_this_app(app, tmp_path):
    server, folder = app
    client = client_for(server)
    fake = tmp_path / "someone" / "ready"
    fake.mkdir(parents=True)
    for name in ("model.pth", "config.json", "vocab.json"):
        (fake / name).write_text("{}")
    for target in (str(fake), str(fake.parent), "../../etc"):
        assert "outside the folders" in refused(client.predict, target, False, api_name="/export_model")
    message = refused(
        client.predict, str(fake), "", None, "hi", "en", 0.75, 1.0, 5.0, 50, 0.85, 1.0, 20, api_name="/synthesize"
    )
    assert "outside the folders" in message


def test_run_names_and_resume_paths_cannot_leave_the_output_folder(app, tmp_path):
    from utils.options.arguments import TrainArguments
    from webui.form import form_values

    server, folder = app
    client = client_for(server)
    csv_path = write_dataset(folder / "data" / "set", n=4)
    values = form_values(TrainArguments(version="tiny", num_epochs=1, train_csv=str(csv_path)))
    message = refused(client.predict, **{**values, "run_name": "../../escaped"}, api_name="/start_training")
    assert "run_name" in message and "not a name" in message
    message = refused(client.predict, **{**values, "resume_from": str(tmp_path)}, api_name="/start_training")
    assert "outside the folders" in message
    message = refused(client.predict, **{**values, "train_csv": "/etc/passwd"}, api_name="/start_training")
    assert "outside the folders" in message
    assert not (folder / "escaped").exists() and not (folder.parent / "escaped").exists()


def test_the_server_hands_out_only_files_it_produced(app):
    server, folder = app
    run = folder / "output" / "some-run"
    run.mkdir(parents=True, exist_ok=True)
    checkpoint = run / "checkpoint_1.pth"
    checkpoint.write_bytes(b"weights")
    export = folder / "output" / "exports" / "voice.zip"
    export.write_bytes(b"zip")
    for path, allowed in ((checkpoint, False), (folder / "data", False), (export, True)):
        url = f"{server.url}gradio_api/file={path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        assert (status == 200) is allowed, (path, status)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--auth", "alice:"], "both non-empty"),
        (["--host", "0.0.0.0"], "needs --auth"),
        (["--share"], "needs --auth"),
    ],
)
def test_launch_refuses_an_open_or_unusable_login(tmp_path, flags, message):
    env = {k: v for k, v in os.environ.items() if k not in ("XTTS_AUTH", "XTTS_INSECURE_OPEN")}
    result = run_watched(
        [sys.executable, "app.py", "--output-dir", str(tmp_path), *flags],
        cwd=ROOT,
        env=env,
        text=True,
    )
    assert result.returncode == 2 and message in result.stderr
