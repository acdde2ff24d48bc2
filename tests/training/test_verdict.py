"""The verdict of a run against its baseline (utils/training/evaluation/verdict.py), from quality records as a run
writes them."""

from __future__ import annotations

import pytest

from utils.files import append_jsonl
from utils.training.evaluation.verdict import compare, run_verdict


def quality(step: int, *, cer, similarity, naturalness, babbled: list[bool], baseline=False, combined=None) -> dict:
    clips = [{"babbled": flag} for flag in babbled[:3]]
    probes = [{"babbled": flag} for flag in babbled[3:]]
    record = {"type": "quality", "step": step, "files": ["evals/x.wav"], "cer": cer, "similarity": similarity}
    record |= {"naturalness": naturalness, "combined": combined, "clips": clips, "probes": probes}
    return record | ({"baseline": True} if baseline else {})


BASE = quality(0, cer=0.12, similarity=0.71, naturalness=3.1, babbled=[0, 0, 0, 1, 1, 0, 0], combined=0.6, baseline=1)
TUNED = quality(300, cer=0.04, similarity=0.86, naturalness=3.9, babbled=[0] * 7, combined=0.84)


def test_a_better_fine_tune_says_what_changed():
    verdict = compare(BASE, TUNED)
    assert verdict["better"] is True and verdict["step"] == 300 and verdict["baseline_step"] == 0
    assert verdict["text"] == (
        "Against the base model (step 0 -> step 300): CER 12% -> 4%, similarity 0.71 -> 0.86, "
        "naturalness 3.1 -> 3.9, babble 2/7 -> 0/7."
    )
    assert verdict["changes"]["cer"] == [0.12, 0.04]


def test_a_fine_tune_no_better_than_the_base_says_so_plainly():
    worse = quality(300, cer=0.2, similarity=0.70, naturalness=3.0, babbled=[1] * 7, combined=0.605)
    verdict = compare(BASE, worse)
    assert verdict["better"] is False, "a gain under 0.01 of the combined score is noise"
    assert "babble 2/7 -> 7/7" in verdict["text"] and "no better than the base model" in verdict["text"]
    # Without combined scores (no Whisper model), the measures that moved decide.
    no_cer = [dict(r, cer=None, combined=None) for r in (BASE, TUNED)]
    assert compare(*no_cer)["better"] is True and "CER" not in compare(*no_cer)["text"]


def test_the_verdict_of_a_run_compares_its_baseline_with_the_chosen_step(tmp_path):
    assert run_verdict(tmp_path, 300) is None, "no metrics yet"
    append_jsonl(tmp_path / "metrics.jsonl", BASE)
    assert run_verdict(tmp_path, 300) is None, "a baseline alone has nothing to compare"
    append_jsonl(tmp_path / "metrics.jsonl", TUNED)
    append_jsonl(tmp_path / "metrics.jsonl", quality(600, cer=0.5, similarity=0.5, naturalness=2, babbled=[1] * 7))
    assert run_verdict(tmp_path, 300)["step"] == 300
    fallback = run_verdict(tmp_path, 450)
    assert fallback["step"] == 600 and "step 450 was not scored" in fallback["text"]


@pytest.mark.parametrize("missing", ["naturalness", "similarity"])
def test_a_measure_missing_on_one_side_is_left_out_of_the_text(missing):
    assert missing not in compare(BASE, dict(TUNED, **{missing: None}))["text"]
