"""Every sampling setting is checked once, wherever it enters (utils/model/sampling.py): given to synthesize() it is
refused by name with its range; read from a voice's ready/config.json or finetune.json it is never used out of range
(the base model's value is, with a warning naming the file and the setting), and an unreadable file is said to be."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import write_clip
from utils.model import sampling
from utils.model.inference import synthesize
from utils.model.ready import INFERENCE_DEFAULTS, inference_settings, read_inference_settings, write_inference_settings

# Values a hand or another tool put in a voice's files (the tester's list), and what the check says of each.
BAD = [-1, float("nan"), float("inf"), 1e9, "hot", None, [0.5], True, {"value": 0.5}]
# Out of every setting's range, or not a number.
BAD_FOR_ALL = [-1000, 1e12, float("nan"), float("-inf"), "hot", "0.5", None, [0.5], True, False, {"value": 0.5}]


def test_a_given_value_is_refused_by_name_with_its_range():
    with pytest.raises(ValueError) as refused:
        sampling.checked("temperature", "hot")
    assert str(refused.value) == "temperature must be a number from 0.01 to 2 (got 'hot')"
    for name in sampling.SETTINGS:
        for value in BAD_FOR_ALL:
            with pytest.raises(ValueError, match=rf"^{name} must be a (whole )?number from .* \(got "):
                sampling.checked(name, value)
    assert "whole number from 1 to 100 (got 'x')" in _refusal("top_k", "x")
    assert "(got 50.5)" in _refusal("top_k", 50.5), "a whole number is whole"
    assert _refusal("speed", -1) == "speed must be a number from 0.25 to 4 (got -1)"
    assert _refusal("top_p", 0) == "top_p must be a number from 0.01 to 1 (got 0)"
    assert _refusal("repetition_penalty", -3) == "repetition_penalty must be a number from 1 to 20 (got -3)"


def test_numbers_in_range_come_back_as_their_type():
    assert sampling.checked("temperature", 1) == 1.0 and isinstance(sampling.checked("temperature", 1), float)
    assert sampling.checked("top_k", 50.0) == 50 and isinstance(sampling.checked("top_k", 50.0), int)
    assert sampling.checked("top_k", np.int64(7)) == 7 and sampling.checked("top_p", np.float32(0.5)) == 0.5
    assert sampling.checked("speed", 0.25) == 0.25 and sampling.checked("speed", 4) == 4.0, "the ends are in range"
    for name, setting in sampling.SETTINGS.items():
        assert sampling.checked(name, setting.default) == setting.default, f"{name}'s own default is allowed"
    assert INFERENCE_DEFAULTS == {
        "temperature": 0.75,
        "length_penalty": 1.0,
        "repetition_penalty": 5.0,
        "top_k": 50,
        "top_p": 0.85,
    }


def _refusal(name, value):
    with pytest.raises(ValueError) as refused:
        sampling.checked(name, value)
    return str(refused.value)


def _ready(root: Path, config: dict | str, finetune: dict | str | None = None, model: Path | None = None) -> Path:
    """A ready/ folder: config.json and finetune.json as given (a str is written as it is: a truncated file),
    model.pth, vocab.json and speakers from `model` (the tiny base) or empty stand-ins."""
    ready = root / "run" / "ready"
    ready.mkdir(parents=True)
    for name in ("model.pth", "vocab.json", "speakers_xtts.pth"):
        if model is not None:
            os.symlink((model / name).resolve(), ready / name)
        elif name != "speakers_xtts.pth":
            (ready / name).write_bytes(b"")
    (ready / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if finetune is not None:
        (ready / "finetune.json").write_text(finetune if isinstance(finetune, str) else json.dumps(finetune))
    write_clip(ready / "reference.wav", 3.0, seed=1)
    return ready


@pytest.mark.parametrize("value", BAD)
def test_a_bad_value_in_config_json_is_never_used_and_is_named(tmp_path, value):
    ready = _ready(tmp_path, {"temperature": value, "top_k": "x", "top_p": 0.6, "model_args": {}})
    read = read_inference_settings(ready)
    assert read.values == {**INFERENCE_DEFAULTS, "top_p": 0.6}, "the base model's for the bad ones, the file's else"
    config = str(ready / "config.json")
    assert read.problems["temperature"].startswith(f"{config}: temperature must be a number from 0.01 to 2 (got ")
    assert read.problems["temperature"].endswith("the base model's 0.75 is used instead.")
    assert read.problems["top_k"] == (
        f"{config}: top_k must be a whole number from 1 to 100 (got 'x'); the base model's 50 is used instead."
    )
    assert "top_p" not in read.problems and inference_settings(ready) == read.values


def test_an_unreadable_config_or_finetune_json_is_said_and_the_base_settings_are_used(tmp_path):
    ready = _ready(tmp_path, '{"temperature": 0.5, "top_', '{"language": "en", "infer')
    read = read_inference_settings(ready)
    assert read.values == INFERENCE_DEFAULTS
    assert f"{ready / 'config.json'} is unreadable: not valid JSON" in read.problems[""]
    assert read.record == {} and len(read.record_problems) == 1
    assert read.record_problems[0].startswith(f"{ready / 'finetune.json'} is unreadable: not valid JSON")


def test_a_bad_inference_record_in_finetune_json_is_named(tmp_path):
    record = {"settings": {**INFERENCE_DEFAULTS, "temperature": -1, "top_p": 0.5}, "searched": True, "candidates": 3}
    ready = _ready(tmp_path, {"temperature": 0.75}, {"language": "en", "inference": record})
    read = read_inference_settings(ready)
    finetune = ready / "finetune.json"
    assert read.values == INFERENCE_DEFAULTS and not read.problems
    assert read.record_problems == [
        f'{finetune}: "inference" "candidates" is not a list; the candidates tried are unknown.',
        f'{finetune}: "inference" settings: temperature must be a number from 0.01 to 2 (got -1); '
        "ready/config.json's 0.75 is used.",
        f"{finetune} records other settings (top_p 0.5) than the voice's config.json gives it: config.json's are used.",
    ]
    (finetune).write_text(json.dumps({"language": "en", "inference": ["hot"]}))
    assert read_inference_settings(ready).record_problems == [
        f'{finetune}: "inference" is not a record of how the settings were chosen (got list).'
    ]


def test_settings_written_into_ready_are_checked(tmp_path):
    ready = _ready(tmp_path, {"temperature": 0.75}, {"language": "en"})
    with pytest.raises(ValueError, match="top_p must be a number from 0.01 to 1"):
        write_inference_settings(ready, {**INFERENCE_DEFAULTS, "top_p": 0}, {"searched": False})
    assert json.loads((ready / "config.json").read_text()) == {"temperature": 0.75}, "nothing written"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"speed": -1}, "speed must be a number from 0.25 to 4 (got -1)"),
        ({"speed": 0}, "speed must be a number from 0.25 to 4 (got 0)"),
        ({"temperature": "hot"}, "temperature must be a number from 0.01 to 2 (got 'hot')"),
        ({"temperature": float("nan")}, "temperature must be a number from 0.01 to 2 (got nan)"),
        ({"top_k": True}, "top_k must be a whole number from 1 to 100 (got True)"),
        ({"top_p": 0}, "top_p must be a number from 0.01 to 1 (got 0)"),
        ({"repetition_penalty": -3}, "repetition_penalty must be a number from 1 to 20 (got -3)"),
        ({"max_audio_tokens": "x"}, "max_audio_tokens must be a whole number from 2 to 600 (got 'x')"),
        ({"seed": -1}, "seed must be a whole number from 0 to 4294967295 (got -1)"),
    ],
)
def test_synthesize_refuses_a_bad_setting_by_name_before_loading_anything(tmp_path, given, message):
    # The folder holds no model: the refusal comes first.
    with pytest.raises(ValueError) as refused:
        synthesize(tmp_path / "nowhere", "Hello there.", **given)
    assert str(refused.value) == message


@pytest.fixture(scope="module")
def tiny_voice(tmp_path_factory, tiny_base):
    """A ready/ folder of the tiny base model whose config.json a hand edited: temperature 1e9, top_k NaN (which
    coqui's config loader failed on) and top_p 0."""
    config = json.loads((tiny_base.folder / "config.json").read_text())
    config.update(temperature=1e9, top_k=math.nan, top_p=0, repetition_penalty=7.5)
    return _ready(tmp_path_factory.mktemp("voice"), config, {"language": "en"}, model=tiny_base.folder)


def test_synthesize_speaks_with_the_base_settings_for_bad_file_values_and_says_so(tiny_voice, caplog):
    speech = synthesize(tiny_voice, "Hello there.", seed=1, max_audio_tokens=10)
    rate, wav = speech
    assert rate == 24000 and wav.size > 0
    assert speech.settings == {**INFERENCE_DEFAULTS, "repetition_penalty": 7.5, "speed": 1.0}
    config = str(tiny_voice / "config.json")
    assert speech.warnings == [
        f"{config}: temperature must be a number from 0.01 to 2 (got 1000000000.0); the base model's 0.75 is used "
        "instead.",
        f"{config}: top_k must be a whole number from 1 to 100 (got nan); the base model's 50 is used instead.",
        f"{config}: top_p must be a number from 0.01 to 1 (got 0); the base model's 0.85 is used instead.",
    ]
    assert all(w in caplog.text for w in speech.warnings), "and logged"
    given = synthesize(tiny_voice, "Hello there.", seed=1, max_audio_tokens=10, temperature=0.5, top_k=20, top_p=0.9)
    assert given.settings["temperature"] == 0.5 and given.warnings == [], "a given setting is used, no file warning"


def test_synthesize_names_an_unreadable_finetune_json(tmp_path, tiny_base):
    ready = _ready(tmp_path, {}, '{"language": "am", "text_fr', model=tiny_base.folder)
    with pytest.raises(ValueError, match=rf"^{ready / 'finetune.json'} is unreadable: not valid JSON"):
        synthesize(ready, "Hello there.", max_audio_tokens=10)
