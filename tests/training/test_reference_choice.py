"""The reference clips chosen by measurement (utils/training/evaluation/reference_choice.py, reference_on_demand.py,
utils/quality/reference_candidates.py): which training clips are candidates, the order candidates are tried in, the
declared ranking, and a choice on the finished tiny run with the real scorers (Whisper tiny.en, Resemblyzer,
DistillMOS). The choice at the end of a run is asserted in test_voice_run.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import synth_speech, write_clip
from utils.audio.io import load_audio
from utils.data.validation import validate_dataset
from utils.quality.asr import bundled_whisper_dir
from utils.quality.reference_candidates import clean_clips, reference_pool
from utils.training.evaluation.inference_search import SCORES
from utils.training.evaluation.reference_choice import PLAN, RANKING, _Candidates, chosen_index
from utils.training.evaluation.reference_on_demand import choose_reference


def test_candidates_follow_the_plan_and_combine_the_singles_measured_best():
    clean = [type("Clip", (), {"path": name})() for name in ("a", "b", "c", "d")]
    candidates = _Candidates(["ready/reference.wav"], ["a"], clean)  # the voice's clip came from "a"
    scores = {"b": 0.2, "c": 0.5, "d": 0.4}
    tried = []
    for kind in PLAN[:7]:
        clips = candidates.next(kind)
        candidate = {"kind": kind, "clips": ["a"] if kind == "current" else clips}
        candidate["score"] = scores.get(clips[0]) if kind == "single" else 0.1
        tried.append((kind, clips))
        candidates.add(len(tried) - 1, kind, candidate)
    assert tried == [
        ("current", ["ready/reference.wav"]),
        ("single", ["b"]),  # "a" is the voice's own clip already
        ("single", ["c"]),
        ("pair", ["c", "b"]),  # the best measured first: it becomes reference.wav
        ("single", ["d"]),
        ("triple", ["c", "d", "b"]),
        ("pair", ["c", "d"]),
    ]
    assert candidates.next("single") is None, "no clean clip left"


def test_the_ranking_is_the_score_and_a_tie_keeps_the_earlier_candidate():
    assert "ties keep the earlier candidate" in RANKING
    assert chosen_index([{"score": 0.3}, {"score": 0.5}, {"score": 0.5}, {"score": None}]) == 1
    assert chosen_index([{"score": None}, {"score": 0.1}]) == 1
    assert chosen_index([{"score": None}]) is None


def test_candidates_are_clean_training_clips_of_5_to_15_s_then_shorter_ones(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = ["audio_file|text|speaker_name"]
    rng = np.random.default_rng(0)
    clips = {
        "long_clean": synth_speech(7.0, 1),
        "long_at_full_scale": (synth_speech(6.0, 3) + 0.2 * rng.standard_normal(22050 * 6)).astype(np.float32),
        "long_quiet": synth_speech(8.0, 2) * 0.02,  # -52 LUFS: the validation uses it, the dataset check flags it
        "long_noisy": (synth_speech(6.0, 3) + 0.05 * rng.standard_normal(22050 * 6)).astype(np.float32),  # 11 dB
        "mid_clean": synth_speech(4.0, 4),
        "short": synth_speech(1.8, 5),
    }
    for name, wav in clips.items():
        sf.write(str(data / f"{name}.wav"), wav, 22050)
        rows.append(f"{name}.wav|a sentence for {name.replace('_', ' ')}|speaker")
    for i in range(4):  # held out
        write_clip(data / f"held_{i}.wav", 2.0, seed=20 + i)
        rows.append(f"held_{i}.wav|a held out sentence number {i}|speaker")
    (data / "train.csv").write_text("\n".join(rows[:7]) + "\n")
    (data / "eval.csv").write_text("\n".join([rows[0], *rows[7:]]) + "\n")
    report = validate_dataset(data / "train.csv", data / "eval.csv", "en")
    assert [p.audio_file for p in report.problems] == ["long_at_full_scale.wav"], "a warning of the validation"
    pool = reference_pool(report, seed=1)
    assert sorted(Path(p).stem for p, _ in pool[0]) == ["long_clean", "long_noisy", "long_quiet"]
    assert [Path(p).stem for p, _ in pool[1]] == ["mid_clean"] and [Path(p).stem for p, _ in pool[2]] == ["short"]
    clean, left_out = clean_clips(pool, wanted=1)
    assert [Path(c.path).stem for c in clean] == ["long_clean"] and clean[0].seconds == pytest.approx(7.0)
    assert any("long_quiet" in why and "very quiet" in why for why in left_out)
    assert any("long_noisy" in why and "noisy" in why for why in left_out)
    clean, _ = clean_clips(pool, wanted=3)  # too few of 5-15 s: then 3-11 s, then any of at least 1 s
    assert [Path(c.path).stem for c in clean] == ["long_clean", "mid_clean", "short"]


def test_choose_reference_measures_each_candidate_and_writes_the_best_into_ready(finished_run, tmp_path):
    run = Path(shutil.copytree(finished_run, tmp_path / finished_run.name))
    ready = run / "ready"
    heuristic = json.loads((run / "run.json").read_text())["reference"]["sources"]
    before = (ready / "reference.wav").read_bytes()
    seen = []
    record = choose_reference(
        run,
        candidates=3,
        sentences=1,
        whisper_model=str(bundled_whisper_dir()),
        max_audio_tokens=10,
        probes=False,
        progress=lambda done, total, message: seen.append((done, total)),
    )
    stored = json.loads((ready / "finetune.json").read_text())["reference"]
    assert stored == json.loads(json.dumps(record)), "finetune.json holds what was returned"
    candidates = record["candidates"]
    assert [c["kind"] for c in candidates] == ["current", "single", "single"] and record["measured"] is True
    assert candidates[0]["clips"] == heuristic, "the voice's own clip first, named by where it came from"
    assert all(c["clips"][0] not in heuristic for c in candidates[1:])
    for candidate in candidates:
        assert set(candidate["scores"]) == set(SCORES) and candidate["score"] is not None, candidate
        assert candidate["scores"]["cer"] is not None and candidate["scores"]["naturalness"] is not None
        assert candidate["files"] and all((run / f).is_file() for f in candidate["files"])
    best = max(range(len(candidates)), key=lambda i: (candidates[i]["score"], -i))
    assert record["chosen"] == best and record["sources"] == candidates[best]["clips"]
    assert record["source"] == f"measured on demand: candidate {best} of 3 (seed 1)"
    assert record["ranked_by"] == RANKING and len(record["sentences"]) == 1 and record["probes"] == []
    assert seen[0] == (0, 3) and (3, 3) in seen, "progress per candidate"
    assert record["files"] == ["reference.wav"]
    if best == 0:
        assert (ready / "reference.wav").read_bytes() == before
    else:
        written = sf.read(str(ready / "reference.wav"), dtype="float32")[0]
        source = load_audio(candidates[best]["clips"][0])[0]
        np.testing.assert_allclose(written, source, atol=1e-4)
