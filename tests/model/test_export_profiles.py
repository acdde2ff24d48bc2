"""Export profiles (issue 36): each exported layout is checked by the loading rule of the app that reads it.

coqui's own loader (Xtts.init_from_config + load_checkpoint) and its speaker manager speak the coqui export's named
voice, and coqui's `tts-server`, started as its users start it, answers an OpenAI client asking for that voice by
name. For AllTalk, xtts-api-server, openedai-speech, ebook2audiobook and Auralis, each app's rule (read from its own
code, see utils/model/export_profiles.py) is stated here as a test: the files it looks for, by the names it reads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml

from tests.helpers import cpu_seconds, digests, file_growth, wait_until
from utils.model.export_profiles import (
    AURALIS_TEXT_TOKENS,
    PROFILES,
    checked_voice_name,
    export_voice,
    voice_name_from,
)
from utils.model.ready import FINETUNE_FILE, READY_DIR, REFERENCE_WAV, write_inference_settings

# Settings unlike every app's own, so that an app taking its own is seen to.
TUNED = {"temperature": 0.6, "length_penalty": 1.2, "repetition_penalty": 7.5, "top_k": 30, "top_p": 0.9}
# What AllTalk v2's scan_models_folder requires of models/xtts/<model>/ (system/tts_engines/xtts/model_engine.py).
ALLTALK_FILES = {"config.json", "model.pth", "mel_stats.pth", "speakers_xtts.pth", "vocab.json", "dvae.pth"}
# What ebook2audiobook's extract_custom_model takes from a custom XTTS zip (lib/conf_models.py "files").
EBOOK_FILES = {"config.json", "model.pth", "vocab.json", "ref.wav"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_copy(finished_run: Path, folder: Path) -> Path:
    """A run folder with the finished run's record and ready/ (the checkpoints are not needed to export)."""
    folder.mkdir(parents=True)
    shutil.copy2(finished_run / "run.json", folder / "run.json")
    shutil.copytree(finished_run / READY_DIR, folder / READY_DIR)
    return folder


@pytest.fixture(scope="module")
def tuned_run(finished_run, tmp_path_factory) -> Path:
    """The session's finished tiny run, copied, with sampling settings chosen for it that no app has as its own."""
    run = _run_copy(finished_run, tmp_path_factory.mktemp("tuned") / "en-tiny-tuned")
    write_inference_settings(run / READY_DIR, TUNED, {"settings": TUNED, "source": "test"})
    return run


@pytest.fixture(scope="module")
def exports(tuned_run, tmp_path_factory) -> dict[str, object]:
    """The tuned run exported once per profile (the model is loaded once for the voice's latents), and the run's
    files before, to show that exporting changes nothing of the run."""
    before = digests(tuned_run)
    dest = tmp_path_factory.mktemp("exports")
    done = {profile: export_voice(tuned_run, profile, dest / profile, name="Tuned Voice") for profile in PROFILES}
    assert digests(tuned_run) == before, "an export only reads the run"
    return done


def _coqui_model(folder: Path):
    """A voice folder loaded the way coqui's users load a local XTTS (its docs; xtts-api-server and openedai-speech
    do the same)."""
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts

    config = XttsConfig()
    config.load_json(str(folder / "config.json"))
    with warnings.catch_warnings():  # coqui 0.28 deprecates what these apps call
        warnings.filterwarnings("ignore", "Xtts.init_from_config", UserWarning)
        model = Xtts.init_from_config(config)
    model.load_checkpoint(config, checkpoint_dir=str(folder), eval=True)
    return config, model


def test_coqui_loads_the_export_and_speaks_the_voice_by_its_name(exports, tuned_run):
    exported = exports["coqui"]
    folder = exported.path
    assert folder.name == "Tuned Voice" and exported.name == "Tuned Voice"
    config, model = _coqui_model(folder)
    speakers = model.speaker_manager.speakers
    assert "Tuned Voice" in speakers and "Tiny Speaker" in speakers, "the voice beside the base model's speakers"
    assert {name: getattr(config, name) for name in TUNED} == TUNED, "coqui's synthesize samples with the voice's own"

    # The named voice is the reference's, as coqui computes it for speaker_wav= (the settings synthesize passes).
    reference = folder / REFERENCE_WAV
    assert _sha(reference) == _sha(tuned_run / READY_DIR / REFERENCE_WAV)
    latent, embedding = model.get_conditioning_latents(
        str(reference),
        max_ref_length=config.max_ref_len,
        gpt_cond_len=config.gpt_cond_len,
        gpt_cond_chunk_len=config.gpt_cond_chunk_len,
        sound_norm_refs=config.sound_norm_refs,
    )
    stored = speakers["Tuned Voice"]
    assert list(stored) == ["gpt_cond_latent", "speaker_embedding"], "coqui unpacks the two by position"
    assert torch.allclose(stored["gpt_cond_latent"], latent, atol=1e-5)
    assert torch.allclose(stored["speaker_embedding"], embedding, atol=1e-5)

    # Spoken through coqui's own synthesize by name: the same speech as from the reference clip, with one seed.
    model.gpt.max_gen_mel_tokens = 6  # a few audio tokens: the tiny random model would speak noise for 30 s
    spoken = []
    for voice in ({"speaker": "Tuned Voice"}, {"speaker_wav": str(reference)}):
        torch.manual_seed(7)
        spoken.append(np.asarray(model.synthesize("Hello there.", language="en", **voice)["wav"]))
    assert spoken[0].size > 0 and np.allclose(spoken[0], spoken[1], atol=1e-5)
    assert not np.allclose(spoken[0], 0)


def _tts_server() -> str:
    script = Path(sys.executable).parent / "tts-server"
    return str(script) if script.is_file() else shutil.which("tts-server") or ""


def _stopping_at_once(model_folder: Path) -> None:
    """The tiny random model speaks until its 605-token limit (30 s of noise, half a minute of CPU): its GPT is made to
    say "stop" at once, in this exported copy only, so an app's answer takes a second. Loading and the voice's lookup
    are untouched."""
    checkpoint = torch.load(model_folder / "model.pth", weights_only=True)
    stop = json.loads((model_folder / "config.json").read_text())["model_args"]["gpt_stop_audio_token"]
    checkpoint["model"]["gpt.mel_head.bias"][stop] = 1e4
    torch.save(checkpoint, model_folder / "model.pth")


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("flask") is None, reason="coqui's tts-server needs flask (coqui-tts[server])"
)
def test_coqui_tts_server_answers_an_openai_client_with_the_named_voice(tuned_run, tmp_path):
    from openai import InternalServerError, OpenAI

    from tests.webui.app_server import free_port

    exported = export_voice(tuned_run, "coqui", tmp_path / "exports", name="Server Voice")
    _stopping_at_once(exported.path)

    port, log = free_port(), tmp_path / "tts-server.log"
    cwd = tmp_path / "elsewhere"  # not beside the export: the server takes a voice that names a path as a wav
    cwd.mkdir()
    command = [_tts_server(), "--model_path", str(exported.path), "--config_path", str(exported.path / "config.json")]
    with open(log, "w") as out:
        server = subprocess.Popen(
            [*command, "--port", str(port), "--language_idx", "en"], cwd=cwd, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)

        def up() -> bool:
            if server.poll() is not None:
                if "Address family not supported" in log.read_text():  # it listens on "::", IPv6 only
                    pytest.skip("tts-server listens on IPv6 (::), which this machine does not have")
                raise AssertionError(f"tts-server ended:\n{log.read_text()[-3000:]}")
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                return response.status == 200

        wait_until(up, "tts-server to serve", progress=(file_growth(log), cpu_seconds(server, quantum=0.5)))
        speech = client.audio.speech.create(model="tts-1", voice="Server Voice", input="Hello.", response_format="wav")
        wav = tmp_path / "speech.wav"
        wav.write_bytes(speech.content)
        samples, rate = sf.read(wav)
        assert rate == 24000 and len(samples) > 0
        assert "Speaker wav: None" in log.read_text(), "spoken from speakers_xtts.pth, not from a clip"
        with pytest.raises(InternalServerError):  # a name it does not hold is no voice (what ready/ alone gives)
            client.audio.speech.create(model="tts-1", voice="Nobody", input="Hello.", response_format="wav")
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def test_alltalk_lists_the_model_folder_and_the_voice(exports, tiny_base):
    exported = exports["alltalk"]
    models = exported.path / "models" / "xtts"
    assert [p.name for p in models.iterdir()] == ["Tuned Voice"]
    model_folder = models / "Tuned Voice"
    assert {p.name for p in model_folder.iterdir()} >= ALLTALK_FILES, "AllTalk lists a model only with all six"
    assert _sha(model_folder / "dvae.pth") == _sha(tiny_base.dvae), "the run's base model's DVAE"
    assert _sha(model_folder / "mel_stats.pth") == _sha(tiny_base.mel_stats)
    assert "Tuned Voice" in torch.load(model_folder / "speakers_xtts.pth", weights_only=True)
    voices = [p.name for p in (exported.path / "voices").iterdir() if p.name.endswith(".wav")]
    assert voices == ["Tuned Voice.wav"], "AllTalk's voices are the wav files in voices/"
    # AllTalk takes temperature and repetition penalty from its own settings: the voice's are said.
    (note,) = [n for n in exported.not_carried if n.startswith("AllTalk")]
    assert "temperature 0.75, repetition_penalty 10" in note and "temperature 0.6, repetition_penalty 7.5" in note


def test_xtts_api_server_finds_the_model_by_version_and_the_voice_by_name(exports):
    exported = exports["xtts-api-server"]
    # --model-folder xtts_models --version "Tuned Voice": load_checkpoint(checkpoint_dir=xtts_models/Tuned Voice).
    model_folder = exported.path / "xtts_models" / "Tuned Voice"
    assert {"config.json", "model.pth", "vocab.json"} <= {p.name for p in model_folder.iterdir()}
    # Its _get_speakers: each .wav of the speaker folder is a voice named by the file's stem.
    speakers = exported.path / "speakers"
    assert [os.path.splitext(f)[0] for f in os.listdir(speakers) if f.endswith(".wav")] == ["Tuned Voice"]
    (note,) = exported.not_carried
    assert note.startswith("xtts-api-server") and "/set_tts_settings" in note
    assert exported.summary().endswith(f"Will not carry over:\n- {note}")
    assert "temperature 0.6, length_penalty 1.2, repetition_penalty 7.5, top_k 30, top_p 0.9" in note


def test_openedai_speech_entry_carries_the_voice_and_its_settings(exports):
    from TTS.tts.models.xtts import Xtts

    exported = exports["openedai-speech"]
    assert not exported.not_carried, "openedai-speech takes every setting from the entry"
    voice = exported.path / "voices" / "Tuned Voice"
    assert {"config.json", "model.pth", "vocab.json", "sample.wav"} <= {p.name for p in voice.iterdir()}
    entry = yaml.safe_load((voice / "voice_to_speaker.yaml").read_text(encoding="utf-8"))["tts-1-hd"]["Tuned Voice"]
    # Paths as openedai-speech resolves them, from its own folder (where voices/ is).
    assert (exported.path / entry["speaker"]).is_file() and (exported.path / entry["model_path"]).is_dir()
    assert entry["model"] == "Tuned Voice" and entry["language"] == "en"
    # speech.py pops model, speaker, model_path, language and comment, and passes the rest to inference_stream.
    passed = {k: v for k, v in entry.items() if k not in ("model", "speaker", "model_path", "language", "comment")}
    assert passed == TUNED
    assert set(passed) <= set(inspect.signature(Xtts.inference_stream).parameters)


def test_ebook2audiobook_gets_a_flat_zip_named_as_the_voice(exports):
    exported = exports["ebook2audiobook"]
    assert exported.path.name == "Tuned Voice.zip", "ebook2audiobook names the model after the zip"
    with zipfile.ZipFile(exported.path) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    assert all("/" not in name for name in infos), "flat"
    assert set(infos) >= EBOOK_FILES and all(infos[name].file_size > 0 for name in EBOOK_FILES)
    (note,) = exported.not_carried
    assert note.startswith("ebook2audiobook samples with its own") and "--repetition_penalty" in note


def test_auralis_converter_gets_a_checkpoint_with_its_config(exports, tuned_run):
    exported = exports["auralis"]
    checkpoint = torch.load(exported.path / "model.pth", weights_only=True)
    # Its converter reads checkpoint["model"] and the first of "config", "model_config"... (None fails it).
    assert isinstance(checkpoint["config"], dict) and checkpoint["config"]["languages"]
    original = torch.load(tuned_run / READY_DIR / "model.pth", weights_only=True)["model"]
    assert checkpoint["model"].keys() == original.keys()
    rows = checkpoint["model"]["gpt.text_embedding.weight"].shape[0]
    assert rows == checkpoint["config"]["model_args"]["gpt_number_text_tokens"] != AURALIS_TEXT_TOKENS
    (note,) = [note for note in exported.not_carried if note.startswith("Auralis: its converter")]
    assert f"{AURALIS_TEXT_TOKENS} text tokens" in note and f"has {rows}" in note


def test_all_is_every_layout_at_once(exports):
    exported = exports["all"]
    folder = exported.path
    names = {p.name for p in folder.iterdir()}
    assert ALLTALK_FILES | EBOOK_FILES | {"sample.wav", REFERENCE_WAV, FINETUNE_FILE} <= names
    assert [p.name for p in (folder / "speakers").iterdir()] == ["Tuned Voice.wav"], "xtts-api-server's speakers"
    assert "Tuned Voice" in torch.load(folder / "speakers_xtts.pth", weights_only=True)
    assert "config" in torch.load(folder / "model.pth", weights_only=True), "Auralis's converter"
    _, model = _coqui_model(folder)  # and coqui's loader (AllTalk's, xtts-api-server's, openedai-speech's)
    assert "Tuned Voice" in model.speaker_manager.speakers
    entry = yaml.safe_load((folder / "voice_to_speaker.yaml").read_text(encoding="utf-8"))
    assert entry["tts-1-hd"]["Tuned Voice"]["top_k"] == 30
    said = "\n".join(exported.not_carried)
    for app in ("AllTalk", "xtts-api-server", "ebook2audiobook", "Auralis"):
        assert app in said
    readme = (folder / "README.txt").read_text(encoding="utf-8")
    assert "Will not carry over" in readme and "tts-server" in readme and "ebook2audiobook" in readme


def test_a_voice_name_is_a_name_never_a_path():
    assert voice_name_from("en-tiny-20261127-233017") == "en-tiny-20261127-233017"
    assert voice_name_from("my run/../x\\y") == "my-run-x-y"
    slug = voice_name_from("../../etc/passwd")
    assert "/" not in slug and ".." not in slug and slug == checked_voice_name(slug)
    assert voice_name_from("///") == "voice" and len(voice_name_from("x" * 300)) == 64
    for good in ("My voice", "Абеба", "አበበ", "voice_2.1"):
        assert checked_voice_name(f" {good} ") == good
    for bad, why in [
        ("", "empty"),
        ("../x", "not a plain name"),
        ("a/b", "not a plain name"),
        ("a\\b", "not a plain name"),
        (".hidden", "not a plain name"),
        ("x.", "not a plain name"),
        ("a\u202eb", "not a plain name"),
        ("x" * 65, "longer than 64"),
        ("CON", "Windows reserves"),
        (3, "must be text"),
    ]:
        with pytest.raises(ValueError, match=why):
            checked_voice_name(bad)


def test_an_export_never_writes_over_anything(tuned_run, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    users = dest / "Mine.zip"
    users.write_bytes(b"the user's own file")
    first = export_voice(tuned_run, "ebook2audiobook", dest, name="Mine")
    second = export_voice(tuned_run, "ebook2audiobook", dest, name="Mine")
    assert users.read_bytes() == b"the user's own file"
    assert (first.path.name, second.path.name) == ("Mine-2.zip", "Mine-3.zip")
    folder = export_voice(tuned_run, "openedai-speech", dest, name="Mine")
    assert folder.path.name == "Mine" and folder.path.is_dir()
    assert export_voice(tuned_run, "openedai-speech", dest, name="Mine").path.name == "Mine-2"
    before = sorted(p.name for p in dest.iterdir())
    with pytest.raises(ValueError, match="one of the base model's speakers"):
        export_voice(tuned_run, "coqui", dest, name="Tiny Speaker")
    with pytest.raises(ValueError, match="Unknown export profile"):
        export_voice(tuned_run, "sillytavern", dest)
    assert sorted(p.name for p in dest.iterdir()) == before, "a refused export leaves nothing, not even a folder"


def test_a_custom_text_front_end_and_a_missing_base_are_said(finished_run, tmp_path):
    run = _run_copy(finished_run, tmp_path / "amh-run")
    (run / "run.json").unlink()  # no record of the base model's folder
    info_path = run / READY_DIR / FINETUNE_FILE
    info = json.loads(info_path.read_text())
    info.update(language="amh", text_frontend={"language": "amh", "amharic_g2p": True}, base_version="v9.9.9")
    info_path.write_text(json.dumps(info))
    exported = export_voice(run, "ebook2audiobook", tmp_path / "dest", name="Amharic")
    (front_end,) = [note for note in exported.not_carried if "front end" in note]
    assert "Amharic normalisation and G2P" in front_end and "refuses language 'amh'" in front_end
    assert "it speaks wrongly, without an error" in front_end
    with zipfile.ZipFile(exported.path) as archive:
        assert "Amharic normalisation" in archive.read("README.txt").decode()
    with pytest.raises(ValueError, match=r"dvae.pth and mel_stats.pth of the run's base model \(v9.9.9\)"):
        export_voice(run, "alltalk", tmp_path / "dest", name="Amharic")
    assert not (tmp_path / "dest" / "Amharic").exists()


# xtts-api-server 0.9.0's own code (its TTSWrapper: what `python -m xtts_api_server` runs) loading the export. Its
# declared dependencies (coqui-tts 0.24.1, transformers 4.36.2, spacy, PyAudio) take minutes and a C toolchain to
# install, so the package alone goes into a throwaway folder over this environment's coqui-tts; opt in with
# XTTS_CHECK_XTTS_API_SERVER=1 (it downloads xtts-api-server 0.9.0 and loguru from PyPI).
_XTTS_API_SERVER_RUN = """
import sys
from xtts_api_server.tts_funcs import TTSWrapper

name = sys.argv[1]
server = TTSWrapper("output", "speakers", "xtts_models", False, "local", name, "cpu", False, False)
server.load_model()  # load_local_model, then the latents of every voice in speakers/
assert server.get_speakers() == [name], server.get_speakers()
print("SPOKE", server.process_tts_to_file("Hello.", name, "en", "hello.wav"))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("XTTS_CHECK_XTTS_API_SERVER"), reason="opt in: XTTS_CHECK_XTTS_API_SERVER=1")
def test_xtts_api_server_0_9_0_loads_the_export_and_speaks_the_voice(tuned_run, tmp_path):
    exported = export_voice(tuned_run, "xtts-api-server", tmp_path / "exports", name="Api Voice")
    _stopping_at_once(exported.path / "xtts_models" / "Api Voice")
    packages = tmp_path / "packages"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(packages)]
    subprocess.run([*pip, "xtts-api-server==0.9.0", "loguru"], check=True, timeout=600)
    done = subprocess.run(
        [sys.executable, "-c", _XTTS_API_SERVER_RUN, "Api Voice"],
        cwd=exported.path,
        env={**os.environ, "PYTHONPATH": str(packages)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    spoken = Path(done.stdout.split("SPOKE ")[-1].strip())
    samples, rate = sf.read(exported.path / spoken)
    assert rate == 24000 and len(samples) > 0
