"""The OpenAI-compatible speech server (issue 36), standalone on a real uvicorn server, called with the client its
users call it with (`openai.OpenAI(base_url=..., api_key=...)`) and, for the refusals, with httpx.

One server for the module, over an output folder holding copies of the session's finished tiny run: one as it is,
one whose finetune.json records the Amharic text front end (which spells numbers out) and whose config.json holds
sampling settings of its own. The tiny model speaks noise: each sentence is capped at a few audio tokens."""

from __future__ import annotations

import io
import json
import threading
import time

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from tests.serving.speech_server import KEY, copy_run, generations, serving, set_text_frontend, tree

pytestmark = pytest.mark.slow

MAX_AUDIO_TOKENS = 8
CHUNK_TOKENS = 3  # a few chunks per sentence


@pytest.fixture(scope="module")
def served(finished_run, tmp_path_factory):
    from utils.model.ready import write_inference_settings
    from utils.serving.auth import ApiKey
    from utils.serving.server import KEY_LOGIN, build_api

    output = tmp_path_factory.mktemp("served") / "output"
    output.mkdir()
    run = copy_run(finished_run, output)
    amharic = copy_run(finished_run, output, "amh-run")
    set_text_frontend(amharic, "amh")
    write_inference_settings(
        amharic / "ready",
        {"temperature": 0.6, "length_penalty": 1.0, "repetition_penalty": 3.5, "top_k": 7, "top_p": 0.7},
        {"source": "this test"},
    )
    api = build_api(
        [output],
        login=ApiKey(KEY, delay_s=0.05, max_failures=3, lockout_s=60),
        how=KEY_LOGIN,
        max_audio_tokens=MAX_AUDIO_TOKENS,
        chunk_tokens=CHUNK_TOKENS,
        max_input_bytes=2_000,
    )
    with serving(api) as url:
        yield {"url": url, "output": output, "run": run.name, "amharic": amharic.name}


def client(served, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=served["url"] + "/v1", api_key=key, max_retries=0, timeout=300)


def voice_of(served, name: str):
    """The model the server speaks with (the process's cached voice, which the server loads by the same path)."""
    from utils.model.inference import load_voice

    return load_voice(served["output"] / name)


def test_the_openai_client_lists_the_runs_and_gets_speech_whole_and_streamed_one_generation_at_a_time(served):
    api = client(served)
    models = {m.id: m for m in api.models.list().data}
    assert set(models) == {served["run"], "amh-run"}, models
    assert "default" in models[served["run"]].model_extra["voices"]
    before = tree(served["output"])

    results: dict[str, object] = {}

    def streamed() -> None:
        arrivals, data = [], b""
        with api.audio.speech.with_streaming_response.create(
            model=served["run"], voice=served["run"], input="Hello there.", response_format="pcm"
        ) as response:
            results["streamed_type"] = response.headers["content-type"]
            for chunk in response.iter_bytes():
                arrivals.append(time.monotonic())
                data += chunk
        results["streamed"] = (arrivals, data)

    def whole() -> None:
        results["whole"] = api.audio.speech.create(
            model=served["run"], voice="default", input="Good morning.", response_format="wav"
        ).content

    with generations(voice_of(served, served["run"])) as calls:
        threads = [threading.Thread(target=streamed), threading.Thread(target=whole)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)

    wav, rate = sf.read(io.BytesIO(results["whole"]))
    assert rate == 24000 and wav.ndim == 1 and wav.size > 0 and np.isfinite(wav).all()
    arrivals, pcm = results["streamed"]
    assert results["streamed_type"].startswith("audio/pcm") and len(pcm) % 2 == 0 and len(pcm) > 0
    # Speech streamed as it is generated: the first bytes arrived before the model gave its last chunk.
    spoken = {call["text"]: call for call in calls}
    assert set(spoken) == {"Hello there.", "Good morning."}, calls
    assert len(arrivals) >= 2 and arrivals[0] < spoken["Hello there."]["end"], (arrivals, spoken["Hello there."])
    # The two requests took turns with the one model.
    first, second = sorted(calls, key=lambda call: call["start"])
    assert first["end"] <= second["start"], "two generations overlapped"
    assert tree(served["output"]) == before, "the server wrote into the output folder"


@pytest.mark.parametrize("format", ["mp3", "opus", "flac"])
def test_each_compressed_format_decodes(served, format):
    speech = client(served).audio.speech.create(
        model=served["run"], voice="Tiny Speaker", input="Hi.", response_format=format, speed=1.5
    )
    audio, rate = sf.read(io.BytesIO(speech.content))
    assert rate == 24000 and audio.size > 0, (format, audio.shape, rate)


def test_the_runs_text_front_end_and_sampling_settings_are_what_the_model_receives(served):
    from utils.data.sentences import split_sentences
    from utils.model.ready import read_inference_settings
    from utils.text.frontend import TextFrontEnd

    text = "I have 12 apples። She has 3."
    voice = voice_of(served, "amh-run")
    with generations(voice) as calls:
        speech = client(served).audio.speech.create(model="amh-run", voice="default", input=text, response_format="pcm")
    assert len(speech.content) > 0
    # The texts the model was given: each sentence through the run's front end, the function synthesize applies.
    frontend = TextFrontEnd.from_dict(voice.info["text_frontend"])
    expected = [frontend.apply(sentence).strip() for sentence in split_sentences(text)]
    assert [call["text"] for call in calls] == expected, calls
    assert expected[0] == "I have አስራ ሁለት apples." and not any("12" in call["text"] for call in calls)
    assert {call["language"] for call in calls} == {"amh"}
    # ...speaking with the run's chosen sampling settings (ready/config.json), not the base model's.
    chosen = read_inference_settings(voice.ready_dir).values
    assert chosen["top_k"] == 7
    for call in calls:
        assert {name: call["kwargs"][name] for name in chosen} == chosen, call["kwargs"]


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"], error
    return error


def test_bad_requests_get_a_4xx_in_openais_shape_and_reach_nothing_outside(served, tmp_path):
    url, run = served["url"], served["run"]
    # A run folder elsewhere, linked into the output folder, is not served.
    outside = copy_run(served["output"] / run, tmp_path, "elsewhere")
    (served["output"] / "linked-run").symlink_to(outside, target_is_directory=True)
    auth = {"Authorization": f"Bearer {KEY}"}
    speech = f"{url}/v1/audio/speech"
    ok = {"model": run, "voice": "default", "input": "Hello.", "response_format": "wav"}
    with httpx.Client(timeout=60) as http:
        assert error_of(http.get(f"{url}/v1/models"), 401)["code"] == "missing_api_key"
        wrong = http.post(speech, json=ok, headers={"Authorization": "Bearer nope"})
        assert error_of(wrong, 401)["code"] == "invalid_api_key" and "nope" not in wrong.text
        assert error_of(http.post(speech, json=ok, auth=("someone", "nope")), 401)

        listed = http.get(f"{url}/v1/models", headers=auth).json()["data"]
        assert {m["id"] for m in listed} == {run, "amh-run"}, "a linked run from outside is not listed"
        voices = http.get(f"{url}/v1/audio/voices", params={"model": run}, headers=auth).json()["data"]
        assert {v["id"] for v in voices} == {"default", "Tiny Speaker"} and voices[0]["aliases"] == [run]

        for model in ("../x", f"../{run}", str(served["output"] / run), "/etc", "linked-run", "", None, 3):
            named = isinstance(model, str) and model
            error = error_of(http.post(speech, json={**ok, "model": model}, headers=auth), 404 if named else 400)
            assert error["param"] == "model"
            if named:
                assert run in error["message"], "the message names the models there are"
        assert error_of(http.get(f"{url}/v1/audio/voices", params={"model": "../x"}, headers=auth), 404)
        assert error_of(http.get(f"{url}/v1/models/..%2F..%2Fetc", headers=auth), 404)

        error = error_of(http.post(speech, json={**ok, "voice": "alloy"}, headers=auth), 400)
        assert error["param"] == "voice" and "default" in error["message"] and "Tiny Speaker" in error["message"]
        assert error_of(http.post(speech, json={**ok, "input": "  "}, headers=auth), 400)["param"] == "input"
        lone = b'{"model": "%s", "voice": "default", "input": "\\ud800 hi"}' % run.encode()
        assert error_of(http.post(speech, content=lone, headers=auth), 400)["code"] == "invalid_input"
        secret = "my private text " * 200  # over the server's 2,000 bytes: refused, not echoed
        long = http.post(speech, json={**ok, "input": secret}, headers=auth)
        assert error_of(long, 400)["code"] == "string_above_max_length" and "private" not in long.text
        error = error_of(http.post(speech, json={**ok, "response_format": "aac"}, headers=auth), 400)
        assert error["param"] == "response_format" and "wav, pcm, mp3, opus, flac" in error["message"], error
        for speed in (0.1, 4.5, "fast", True):
            assert error_of(http.post(speech, json={**ok, "speed": speed}, headers=auth), 400)["param"] == "speed"
        assert error_of(http.post(speech, json={**ok, "stream_format": "sse"}, headers=auth), 400)
        assert error_of(http.post(speech, json={**ok, "instructions": "whisper"}, headers=auth), 400)
        assert error_of(http.post(speech, json={**ok, "seed": 1}, headers=auth), 400)["code"] == "unknown_parameter"
        assert error_of(http.post(speech, content=b"{not json", headers=auth), 400)["code"] == "invalid_json"
        assert error_of(http.post(speech, json=["a list"], headers=auth), 400)
        assert error_of(http.post(speech, content=b"x" * 1_000_001, headers=auth), 413)
        assert error_of(http.get(speech, headers=auth), 405)
        assert error_of(http.get(f"{url}/v1/files", headers=auth), 404)["code"] == "unknown_url"
    # The openai client sees the refusal with the reason.
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client(served).audio.speech.create(model="../x", voice="default", input="Hi.")
    with pytest.raises(openai.AuthenticationError):
        client(served, "wrong").models.list()


def test_wrong_keys_lock_out_only_their_address(served):
    url = served["url"]
    guesser = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)
    with guesser, httpx.Client(timeout=30) as owner:
        for _ in range(3):
            error_of(guesser.get(f"{url}/v1/models", headers={"Authorization": "Bearer guess"}), 401)
        locked = guesser.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        assert error_of(locked, 429)["code"] == "login_locked" and int(locked.headers["retry-after"]) > 0
        assert owner.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_a_request_while_a_run_trains_on_the_gpu_is_refused_with_the_reason(served, tmp_path):
    from utils.serving.catalog import Catalog
    from utils.serving.server import build_api, training_in
    from utils.training.recording.run_record import process_identity

    why = "A training run (en-tiny-x) is using the GPU: this server speaks again when it ends (or is stopped)."
    api = build_api([served["output"]], gpu_busy=lambda: why)
    with serving(api) as url:
        body = {"model": served["run"], "voice": "default", "input": "Hello.", "response_format": "wav"}
        refused = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60)
    error = error_of(refused, 503)
    assert error["message"] == why and error["code"] == "gpu_busy" and refused.headers["retry-after"]

    # Standalone, on a GPU, that reason comes from the served folders: a run whose record is active and whose process
    # lives (this test's, here); a finished one does not count.
    output = tmp_path / "output"
    for name, status in (("en-tiny-training", "running"), ("en-tiny-done", "finished")):
        (output / name).mkdir(parents=True)
        (output / name / "run.json").write_text(json.dumps({"status": status, **process_identity()}), encoding="utf-8")
    assert "en-tiny-training" in training_in(Catalog([output]))
    (output / "en-tiny-training" / "run.json").unlink()
    assert training_in(Catalog([output])) == ""
