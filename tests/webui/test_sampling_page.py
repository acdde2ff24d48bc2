"""The Test tab and its API check every sampling setting against its one declaration (utils/model/sampling.py): the
sliders offer exactly the declared ranges, a voice's out-of-range file value is never put in a slider nor called the
base model's (the page says which file and setting), an unreadable finetune.json does not break picking the run,
and a bad value sent to /synthesize is refused by name, not with Gradio's generic error."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest

from tests.helpers import page_text
from tests.webui.test_handlers import make_context
from utils.model import sampling
from utils.model.ready import INFERENCE_DEFAULTS
from webui.test_tab import SAMPLING_KEYS, SLIDER_KEYS, _voice_section, compare_handler, run_selected, synthesize_handler

SAMPLING = dict(temperature=0.75, length_penalty=1.0, repetition_penalty=5.0, top_k=50, top_p=0.85, speed=1.0)


def _run(ctx, name: str, config: dict | str, finetune: dict | str | None) -> Path:
    """A run folder in the app's output with a ready/ folder (the model files are empty stand-ins: picking a run reads
    only its JSON files)."""
    ready = ctx.output_dir / name / "ready"
    ready.mkdir(parents=True)
    for file in ("model.pth", "vocab.json"):
        (ready / file).write_bytes(b"")
    (ready / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if finetune is not None:
        (ready / "finetune.json").write_text(finetune if isinstance(finetune, str) else json.dumps(finetune))
    return ready


def _picked(ctx, name: str) -> tuple[dict, dict[str, float], str]:
    """(the language update, the sliders' values, the settings' Markdown as text) of picking run `name`."""
    language, _reference, *sliders, markdown = run_selected(ctx, name, "")
    return language, {k: s["value"] for k, s in zip(SAMPLING_KEYS, sliders, strict=True)}, page_text(markdown)


def test_the_sliders_offer_the_declared_ranges_and_pass_what_a_script_sends_to_the_check(tmp_path):
    with gr.Blocks():
        ui = _voice_section(make_context(tmp_path))
    for name, slider in zip(SLIDER_KEYS, ui["sampling"], strict=True):
        setting = sampling.SETTINGS[name]
        assert (slider.minimum, slider.maximum, slider.value) == (setting.low, setting.high, setting.default), name
        assert slider.label == setting.label and slider.info == setting.help
        assert slider.preprocess("hot") == "hot", "to the handler, which names the setting (Gradio's TypeError did not)"


@pytest.mark.parametrize("value", [-1, 1e9, "hot", None, [0.5], float("nan")])
def test_an_out_of_range_file_value_is_not_prefilled_and_the_page_names_file_and_setting(tmp_path, value):
    ctx = make_context(tmp_path)
    config = {"temperature": value, "top_p": 0, "repetition_penalty": -3, "top_k": "x", "length_penalty": 1.0}
    ready = _run(ctx, "edited", config, {"language": "en", "inference": {"searched": False, "reason": "off"}})
    language, values, text = _picked(ctx, "edited")
    assert language["value"] == "en"
    assert values == INFERENCE_DEFAULTS, "the base model's for each bad value"
    for name, value_shown in values.items():
        setting = sampling.SETTINGS[name]
        assert setting.low <= value_shown <= setting.high
    config_path = ready / "config.json"
    for line in (
        f"⚠ {config_path}: temperature must be a number from 0.01 to 2 (got ",
        f"⚠ {config_path}: top_p must be a number from 0.01 to 1 (got 0); the base model's 0.85 is used instead.",
        f"⚠ {config_path}: repetition_penalty must be a number from 1 to 20 (got -3); the base model's 5 is used",
        f"⚠ {config_path}: top_k must be a whole number from 1 to 100 (got 'x'); the base model's 50 is used instead.",
    ):
        assert line in text, (line, text)


def test_the_base_models_settings_are_called_so_only_when_they_are(tmp_path):
    ctx = make_context(tmp_path)
    _run(ctx, "base", {"model_args": {}}, {"language": "en"})
    _, values, text = _picked(ctx, "base")
    assert values == INFERENCE_DEFAULTS and ": the base model's (this run did not search for them)." in text
    assert "⚠" not in text
    _run(ctx, "edited", {"temperature": 0.6}, {"language": "en"})
    _, values, text = _picked(ctx, "edited")
    assert values["temperature"] == 0.6 and "the base model's" not in text
    assert "temperature 0.6, " in text and "ready/config.json's, not measured" in text


def test_a_truncated_or_odd_finetune_json_does_not_break_picking_the_run(tmp_path):
    ctx = make_context(tmp_path)
    ready = _run(ctx, "cut", {"temperature": 0.6}, '{"language": "en", "inference": {"sett')
    language, values, text = _picked(ctx, "cut")
    assert "value" not in language, "the language is left as it is: unknown"
    assert values["temperature"] == 0.6
    assert f"⚠ {ready / 'finetune.json'} is unreadable: not valid JSON" in text
    measured = {"settings": {**INFERENCE_DEFAULTS, "top_p": 0}, "searched": True, "source": "measured", "candidates": 2}
    ready = _run(ctx, "odd", {}, {"language": "en", "inference": measured})
    _, values, text = _picked(ctx, "odd")
    assert values == INFERENCE_DEFAULTS
    assert f'⚠ {ready / "finetune.json"}: "inference" "candidates" is not a list' in text
    assert f'⚠ {ready / "finetune.json"}: "inference" settings: top_p must be a number from 0.01 to 1 (got 0)' in text
    _run(ctx, "listed", {}, {"language": "en", "inference": "hot"})
    assert '"inference" is not a record of how the settings were chosen (got str).' in _picked(ctx, "listed")[2]


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("temperature", "hot", "temperature must be a number from 0.01 to 2 (got 'hot')"),
        ("top_k", "x", "top_k must be a whole number from 1 to 100 (got 'x')"),
        ("speed", -1, "speed must be a number from 0.25 to 4 (got -1)"),
        ("top_p", 0, "top_p must be a number from 0.01 to 1 (got 0)"),
        ("max_tokens", 2.5, "max_audio_tokens must be a whole number from 2 to 600 (got 2.5)"),
    ],
)
def test_generate_and_compare_refuse_a_bad_setting_by_name(tmp_path, setting, value, message):
    ctx = make_context(tmp_path)
    _run(ctx, "voice", {}, {"language": "en"})
    form = {**SAMPLING, "max_tokens": 20, setting: value}
    with pytest.raises(gr.Error) as refused:
        synthesize_handler(ctx, "voice", "", None, "Hello there.", "en", **form)
    assert refused.value.message == message
    with pytest.raises(gr.Error) as refused:
        compare_handler(ctx, "voice", "", None, "Hello there.", "en", 1, "small", **form)
    assert refused.value.message == message
    with pytest.raises(gr.Error, match=r"seed must be a whole number from 0 to 4294967295 \(got 'x'\)"):
        compare_handler(ctx, "voice", "", None, "Hello there.", "en", "x", "small", **SAMPLING, max_tokens=20)


@pytest.mark.slow
def test_a_script_sending_a_string_to_synthesize_is_told_which_setting(tmp_path):
    from tests.webui.app_server import running_app

    with running_app(tmp_path) as server:
        client = server.client()
        args = ["any-run", "", None, "Hello there.", "en", 0.75, 1.0, 5.0, 50, 0.85, 1.0, 20]
        for index, value, message in (
            (5, "hot", "temperature must be a number from 0.01 to 2 (got 'hot')"),
            (8, "7", "top_k must be a whole number from 1 to 100 (got '7')"),
            (10, 9.0, "speed must be a number from 0.25 to 4 (got 9.0)"),
        ):
            sent = list(args)
            sent[index] = value
            with pytest.raises(Exception) as refused:
                client.predict(*sent, api_name="/synthesize")
            assert str(refused.value) == message
