"""How the search for inference settings ranks candidates and when it does not search (utils/training/
inference_search.py); the search itself runs in a tiny run in test_voice_run.py."""

from __future__ import annotations

import json

import pytest

from utils.model.ready import INFERENCE_DEFAULTS, inference_settings, read_finetune_info
from utils.training.evaluation.inference_search import CANDIDATES, candidates, choose_inference_settings, search_score
from utils.training.evaluation.quality_eval import ScoringBudget


def test_a_candidate_is_ranked_by_its_combined_score_else_by_the_measures_it_has():
    assert search_score({"combined": 0.7, "cer": 0.1}) == (0.7, ["combined"])
    score, basis = search_score({"cer": 1.0, "naturalness": 3.0, "babble_rate": 0.5})
    assert basis == ["cer", "naturalness", "babble_rate"]
    assert score == pytest.approx((0.35 * 0.0 + 0.15 * 0.5 + 0.15 * 0.5) / 0.65)
    assert search_score({"cer": None}) == (None, [])


def test_candidates_start_from_the_models_own_settings():
    base = dict(INFERENCE_DEFAULTS, temperature=0.7)
    tried = candidates(base, 3)
    assert tried[0] == base and len(tried) == 3
    assert all(c["top_k"] == 50 and c["length_penalty"] == 1.0 for c in tried), "length_penalty, top_k stay"
    assert tried[1]["temperature"] == CANDIDATES[0]["temperature"]
    assert len(candidates(base, 8)) == 8 and len(candidates(base, 1)) == 1


def ready_folder(tmp_path):
    ready = tmp_path / "run" / "ready"
    ready.mkdir(parents=True)
    (ready / "config.json").write_text(json.dumps({"temperature": 0.65, "model_args": {}}))
    (ready / "finetune.json").write_text(json.dumps({"language": "en"}))
    return ready


def test_off_or_out_of_time_the_models_settings_stay_and_say_why(tmp_path):
    ready = ready_folder(tmp_path)
    record = choose_inference_settings(ready, object(), ScoringBudget(1.0), 0, seed=1)
    assert record["searched"] is False and "inference_search=0" in record["reason"]
    assert inference_settings(ready) == dict(INFERENCE_DEFAULTS, temperature=0.65)
    assert read_finetune_info(ready)["inference"] == record and read_finetune_info(ready)["language"] == "en"
    assert json.loads((ready / "config.json").read_text())["model_args"] == {}, "the rest of config.json is kept"

    times = iter([0.0, 10.0, 10.0, 10.0])
    spent = ScoringBudget(0.2, clock=lambda: next(times))
    spent.record(9.0)  # 9 s of scoring in 10 s of run: another 9 s would exceed 20%
    record = choose_inference_settings(ready, object(), spent, 5, seed=1)
    assert record["searched"] is False and "not searched" in record["reason"] and record["candidates"] == []
    assert choose_inference_settings(ready, None, ScoringBudget(1.0), 5, seed=1)["reason"].startswith("no scored")
