"""The speech server as users start it: mounted in the web app (python app.py), behind the page's own login, and
standalone (python -m utils.serving), each in its own process."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import openai
import pytest

from tests.helpers import wait_until
from tests.serving.speech_server import copy_run
from tests.webui.app_server import ROOT, free_port, running_app

pytestmark = pytest.mark.slow


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:300])
    return response.json()["error"]


def test_the_app_serves_the_speech_api_behind_its_own_login(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "output").name
    with running_app(tmp_path, "--auth", "alice:secret", "--max-failed-logins", "2") as server:
        url = server.url.rstrip("/")
        with httpx.Client(timeout=60) as http:
            assert http.get(url + "/").status_code == 200, "the page is served as before"
            assert error_of(http.get(url + "/v1/models"), 401)["code"] == "missing_api_key"
            assert error_of(http.get(url + "/v1/models", headers={"Authorization": "Bearer alice:nope"}), 401)
            ids = [m["id"] for m in http.get(url + "/v1/models", auth=("alice", "secret")).json()["data"]]
            assert ids == [run]
            # A browser logged in to the page is let in by its session cookie.
            assert http.post(url + "/login", data={"username": "alice", "password": "secret"}).status_code == 200
            assert http.get(url + "/v1/audio/voices").json()["data"][0]["model"] == run
        # Wrong keys count with the page's failed logins (one guard): that address's page login is refused too.
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=60) as guesser:
            for _ in range(2):
                error_of(guesser.get(url + "/v1/models", headers={"Authorization": "Bearer alice:guess"}), 401)
            assert guesser.post(url + "/login", data={"username": "alice", "password": "secret"}).status_code == 429

        api = openai.OpenAI(base_url=url + "/v1", api_key="alice:secret", max_retries=0, timeout=300)
        with pytest.raises(openai.BadRequestError, match="Its voices: default"):
            api.audio.speech.create(model=run, voice="alloy", input="Hello.")
        # Speech streams from the app (the first chunk is enough: leaving ends the generation).
        with api.audio.speech.with_streaming_response.create(
            model=run, voice="default", input="Hello.", response_format="wav"
        ) as response:
            first = next(response.iter_bytes())
        assert first[:4] == b"RIFF" and first[8:12] == b"WAVE" and len(first) > 44


def test_the_standalone_server_binds_loopback_and_wants_its_key(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "output").name
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "utils.serving", str(tmp_path / "output")]
    refused = subprocess.run([*command, "--host", "0.0.0.0"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "needs --api-key" in refused.stderr, refused.stderr

    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server's output, closed below
    process = subprocess.Popen(
        [*command, "--port", str(port), "--api-key", "k-123"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}/v1/models"
    try:

        def answers() -> httpx.Response | None:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                return httpx.get(url, headers={"Authorization": "Bearer k-123"}, timeout=10)
            except httpx.TransportError:
                return None

        listed = wait_until(answers, "the standalone server to answer", stall=120)
        assert [m["id"] for m in listed.json()["data"]] == [run]
        assert error_of(httpx.get(url, timeout=10), 401)["code"] == "missing_api_key"
        assert "127.0.0.1" in (tmp_path / "server.log").read_text()
    finally:
        process.terminate()
        process.wait(60)
        log.close()
