"""A tiny run end to end for the voice measures: probes in every scored evaluation, the base weights scored at
step 0 and the run's verdict against them, sampling settings chosen by measurement into ready/, and the page and
the Test tab showing and using them (tiny model, real Whisper tiny.en, DistillMOS and Resemblyzer)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import page_text, write_dataset
from utils.files import read_jsonl
from utils.model.inference import synthesize
from utils.model.ready import INFERENCE_DEFAULTS
from utils.quality.asr import bundled_whisper_dir
from utils.training.process.runner import TrainingRunner
from webui.context import UIContext

pytestmark = pytest.mark.slow  # one epoch, a baseline, a final evaluation and two candidates: ~2 min here


@pytest.fixture(scope="module")
def voice_run(tmp_path_factory, tiny_base):
    from utils.gpt_train import train_gpt

    root = tmp_path_factory.mktemp("voice")
    (root / "data").mkdir()
    (root / "names.tsv").write_text("voice\tvoys\n", encoding="utf-8")  # in the transcripts and the scored sentences
    ctx = UIContext(output_dir=root / "out", runner=TrainingRunner(root / "out"), data_dirs=((root / "data"),))
    result = train_gpt(
        version="tiny",
        language="en",
        train_csv=str(write_dataset(root / "data", n=12)),
        output_path=str(ctx.output_dir),
        num_epochs=1,
        batch_size=4,
        grad_acumm=1,
        learning_rate=1e-3,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=1,
        quality_max_audio_tokens=10,
        quality_eval_share=1.0,
        best_by="combined",
        inference_search=2,
        reference_search=2,  # the run's own clip and one clean clip
        whisper_model=str(bundled_whisper_dir()),
        lexicon_file=str(root / "names.tsv"),
    )
    quality = [r for r in read_jsonl(Path(result.run_dir) / "metrics.jsonl") if r["type"] == "quality"]
    return ctx, result, quality


def test_the_last_quality_record_holds_the_probes_with_their_measures(voice_run):
    _, result, quality = voice_run
    last = quality[-1]
    probes = last["probes"]
    assert [p["kind"] for p in probes] == ["short", "question", "exclamation", "long"]
    assert len(probes[0]["text"].split()) <= 3 and probes[1]["text"].endswith("?")
    for probe in probes:
        assert isinstance(probe["stopped"], bool), probe
        assert probe["duration_ratio"] > 0 and 1.0 <= probe["naturalness"] <= 5.0
        assert probe["file"] == f"evals/step_{last['step']}/probe_{probe['kind']}.wav"
        assert (Path(result.run_dir) / probe["file"]).is_file() and probe["transcript"] is not None
        assert isinstance(probe["words_beyond"], int) and isinstance(probe["repeats"], int)
    # A cap of 10 tokens (quality_max_audio_tokens) cuts every clip before the tiny model's random stop.
    assert last["babble_rate"] == 1.0 and all(c["stopped"] is False for c in last["clips"])
    assert 1.0 <= last["naturalness"] <= 5.0 and 1.0 <= last["naturalness_real"] <= 5.0
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    assert run["quality"]["probes"] == [p["text"] for p in probes] and run["quality"]["pace"]["chars_per_second"] > 5


def test_the_base_weights_are_scored_at_step_0_and_the_run_states_its_change(voice_run):
    _, result, quality = voice_run
    assert [(q["step"], q.get("baseline", False)) for q in quality] == [(0, True), (3, False)]
    base = quality[0]
    assert base["texts"] == quality[-1]["texts"] and [p["text"] for p in base["probes"]] == [
        p["text"] for p in quality[-1]["probes"]
    ]
    assert base["files"] == ["evals/step_0/0.wav"] and base["naturalness"] is not None
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    verdict = run["verdict"]
    assert verdict["baseline_step"] == 0 and verdict["step"] == 3 and isinstance(verdict["better"], bool)
    assert verdict["text"].startswith("Against the base model (step 0 -> step 3): CER ")
    assert "naturalness" in verdict["text"] and "babble 5/5 -> 5/5" in verdict["text"]
    assert verdict["better"] or "no better than the base model" in verdict["text"]
    assert run["message"].endswith(verdict["text"]), "the run's summary says it"
    finetune = json.loads((Path(result.ready_dir) / "finetune.json").read_text())
    assert finetune["verdict"] == verdict


def test_ready_holds_the_sampling_settings_chosen_by_measurement(voice_run):
    _, result, _ = voice_run
    finetune = json.loads((Path(result.ready_dir) / "finetune.json").read_text())
    config = json.loads((Path(result.ready_dir) / "config.json").read_text())
    inference = finetune["inference"]
    assert inference["searched"] is True and len(inference["candidates"]) == 2 and inference["seed"] == 1
    first, second = inference["candidates"]
    assert first["settings"] == INFERENCE_DEFAULTS, "the base settings are the first candidate"
    assert second["settings"]["temperature"] != first["settings"]["temperature"]
    for candidate in inference["candidates"]:
        assert candidate["score"] is not None and set(candidate["scores"]) >= {"cer", "naturalness", "babble_rate"}
        assert all((Path(result.run_dir) / f).is_file() for f in candidate["files"]) and len(candidate["files"]) == 5
    chosen = inference["candidates"][inference["chosen"]]
    assert chosen["score"] == max(c["score"] for c in inference["candidates"])
    assert inference["settings"] == chosen["settings"]
    assert {k: config[k] for k in INFERENCE_DEFAULTS} == chosen["settings"]
    from TTS.tts.configs.xtts_config import XttsConfig

    loaded = XttsConfig()
    loaded.load_json(str(Path(result.ready_dir) / "config.json"))  # coqui's own loader; Xtts.synthesize reads these
    assert {k: getattr(loaded, k) for k in INFERENCE_DEFAULTS} == chosen["settings"]
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    assert run["inference"]["settings"] == chosen["settings"] and "measured" in run["inference"]["source"]
    lexicon = [{"term": "voice", "respelling": "voys", "language": "en"}]
    assert finetune["text_frontend"]["lexicon"] == lexicon == run["text_frontend"]["lexicon"], "the run's lexicon"


def test_ready_holds_the_reference_clips_chosen_by_measurement(voice_run):
    _, result, _ = voice_run
    run_dir = Path(result.run_dir)
    reference = json.loads((Path(result.ready_dir) / "finetune.json").read_text())["reference"]
    assert reference["measured"] is True and reference["source"].startswith("measured at the end of the run: ")
    candidates = reference["candidates"]
    assert [c["kind"] for c in candidates] == ["current", "single"]
    run = json.loads((run_dir / "run.json").read_text())
    assert candidates[0]["clips"] == run["reference"]["sources"], "the run's own clip is tried first"
    for candidate in candidates:
        assert candidate["score"] is not None and len(candidate["files"]) == 5, "its sentence and the 4 probes"
        assert all(f.startswith("evals/reference/candidate_") and (run_dir / f).is_file() for f in candidate["files"])
    best = max(range(2), key=lambda i: (candidates[i]["score"], -i))
    assert reference["chosen"] == best and reference["sources"] == candidates[best]["clips"]
    assert reference["files"] == ["reference.wav"] and "reference_choice" in run["timings"]["phases"]
    # A search's candidates speak the voice alone; the retention language (Spanish) is each evaluation's measure.
    assert list(run_dir.glob("evals/step_*/retention_es/0.wav")) and not list(run_dir.glob("evals/*/*/retention_*"))


def test_the_test_tab_starts_from_the_runs_settings_and_synthesize_uses_them(voice_run):
    from webui.test_tab import SAMPLING_KEYS, run_selected

    ctx, result, _ = voice_run
    settings = json.loads((Path(result.ready_dir) / "finetune.json").read_text())["inference"]["settings"]
    language, _, *sliders, source = run_selected(ctx, str(result.run_dir), "")
    assert language["value"] == "en" and [s["value"] for s in sliders] == [settings[k] for k in SAMPLING_KEYS]
    assert "measured at the end of the run" in page_text(source) and "2 tried" in page_text(source)
    text = "hello there"
    _, default = synthesize(result.ready_dir, text, seed=3, max_audio_tokens=30)
    _, explicit = synthesize(result.ready_dir, text, seed=3, max_audio_tokens=30, **settings)
    warmer = {**settings, "temperature": settings["temperature"] + 0.4}
    _, other = synthesize(result.ready_dir, text, seed=3, max_audio_tokens=30, **warmer)
    np.testing.assert_array_equal(default, explicit)
    assert default.shape != other.shape or not np.array_equal(default, other), "the settings change the speech"


def test_the_page_shows_babble_naturalness_the_baseline_and_the_probe_clips(voice_run):
    from webui.train_tab import QUALITY_PLAYERS, quality_refresh
    from webui.voice_view import PROBE_PLAYERS, QUALITY_SERIES

    ctx, result, _ = voice_run
    ctx.runner.state.run_dir = str(result.run_dir)
    from webui.quality_view import evaluation_rows

    shown_table, _best, voice, plot, *players, _seen = quality_refresh(ctx, "")
    table = evaluation_rows(shown_table)
    assert list(table["step"]) == [3, 0] and list(table["best"]) == ["★", "base"]
    assert all(1.0 <= float(v) <= 5.0 for v in table["naturalness"]) and list(table["babble"]) == ["1.000", "1.000"]
    lines = page_text(voice)
    assert "Step 3: 4 of 4 probes did not stop" in lines and "Naturalness" in lines and "real clips" in lines
    assert "Against the base model (step 0 -> step 3)" in lines
    # Resemblyzer hears no speech in the tiny model's noise: no similarity to plot.
    drawn = {html.unescape(name) for name in re.findall(r'class="plot-series" data-series="([^"]*)"', plot)}
    assert drawn == set(QUALITY_SERIES.values()) - {"similarity"}, plot
    assert [html.unescape(t) for t in re.findall(r'class="x-tick"[^>]*>([^<]*)<', plot)][0] == "0", "from step 0"
    probes = players[QUALITY_PLAYERS:]
    assert len(probes) == PROBE_PLAYERS and all(p["visible"] for p in probes)
    assert "did not stop" in probes[1]["label"] and "question" in probes[1]["label"]
    rate, wav = probes[0]["value"]
    assert rate == 24000 and len(wav) > 0
