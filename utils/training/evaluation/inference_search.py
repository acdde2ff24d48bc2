"""Sampling settings chosen by measurement: at the end of a run, a few candidates tried on the voice ready/ holds.

Users tune temperature, repetition_penalty and top_p by ear, per voice, because the base model's values do not suit
every fine-tune (a voice that babbles at 0.75 may stop at 0.5). Here `inference_search` candidates (CANDIDATES, the
base model's own settings first) each speak the run's scored sentences and probes with the ready/ model, the run's
reference clip and a fixed seed, and are scored as an evaluation is (CER, similarity, naturalness, babble rate:
utils.training.evaluation.quality_eval). The highest combined score wins (ties keep the earlier, so the base settings
unless a candidate is better); without a CER or similarity (no Whisper model, a voice too noisy to embed) the measures
there are, weighted as in the combined score, decide.

length_penalty and top_k stay the model's: XTTS samples with one beam, where transformers ignores length_penalty
(it scales beam scores only), so trying values of it would spend time measuring nothing.

The result goes into ready/config.json (temperature, repetition_penalty, top_p...: coqui's own Xtts.synthesize
reads them there, as do the Test tab and utils.model.inference.synthesize) and into ready/finetune.json
"inference": the settings, where they came from, and every candidate with its scores. The search respects the
run's scoring budget (quality_eval_share, utils.training.evaluation.quality_eval.ScoringBudget): a candidate is tried
only while scoring so far plus one more stays within the share; `inference_search=0` turns it off.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from pathlib import Path
from typing import Any

from utils.model.ready import inference_settings, write_inference_settings
from utils.quality.selection import CORE_WEIGHT, NATURALNESS_WEIGHT, STOPPING_WEIGHT

log = logging.getLogger(__name__)

SEARCH_DIR = "inference"  # under evals/: the candidates' clips
# Tried in this order after the model's own settings (temperature, repetition_penalty, top_p).
CANDIDATES = (
    {"temperature": 0.5, "repetition_penalty": 5.0, "top_p": 0.8},
    {"temperature": 0.65, "repetition_penalty": 10.0, "top_p": 0.85},
    {"temperature": 0.85, "repetition_penalty": 5.0, "top_p": 0.9},
    {"temperature": 0.6, "repetition_penalty": 7.5, "top_p": 0.7},
    {"temperature": 0.75, "repetition_penalty": 2.0, "top_p": 0.85},
    {"temperature": 0.4, "repetition_penalty": 10.0, "top_p": 0.6},
    {"temperature": 0.9, "repetition_penalty": 3.0, "top_p": 0.95},
)
SCORES = ("cer", "similarity", "naturalness", "babble_rate", "combined")


def search_score(scores: dict[str, Any]) -> tuple[float | None, list[str]]:
    """(the score a candidate is ranked by, the measures it rests on): its combined score, else the measures it
    has, each weighted as in the combined score (utils.quality.selection)."""
    if scores.get("combined") is not None:
        return float(scores["combined"]), ["combined"]
    terms = []
    if scores.get("cer") is not None:
        terms.append(("cer", CORE_WEIGHT / 2, 1.0 - min(max(scores["cer"], 0.0), 1.0)))
    if scores.get("similarity") is not None:
        terms.append(("similarity", CORE_WEIGHT / 2, min(max(scores["similarity"], 0.0), 1.0)))
    if scores.get("naturalness") is not None:
        terms.append(("naturalness", NATURALNESS_WEIGHT, (scores["naturalness"] - 1.0) / 4.0))
    if scores.get("babble_rate") is not None:
        terms.append(("babble_rate", STOPPING_WEIGHT, 1.0 - scores["babble_rate"]))
    if not terms:
        return None, []
    return sum(w * v for _, w, v in terms) / sum(w for _, w, _ in terms), [name for name, _, _ in terms]


def candidates(base: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The model's own settings, then `count` - 1 of CANDIDATES over them."""
    return [dict(base)] + [{**base, **change} for change in CANDIDATES[: max(0, count - 1)]]


def _kept(base: dict[str, Any], reason: str) -> dict[str, Any]:
    return {
        "settings": base,
        "source": "the base model's settings",
        "searched": False,
        "reason": reason,
        "candidates": [],
    }


def _try(evaluator: Any, model: Any, index: int, settings: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One candidate spoken and scored: its settings, scores, score and clips."""
    started = time.monotonic()
    spoken = evaluator.generate(
        model,
        -1,
        sampling={k: settings[k] for k in ("temperature", "repetition_penalty", "top_p", "top_k", "length_penalty")},
    )
    return {"settings": settings, **scored_candidate(spoken, folder / f"candidate_{index}", started)}


def scored_candidate(spoken: Any, folder: Path, started: float) -> dict[str, Any]:
    """A candidate's spoken clips (an evaluator's `generate`) scored into `folder`: its scores, score and what it was
    scored on, its clips (probes included), the reasons of any left unscored, and the seconds since `started`. The
    settings search and the reference choice record their candidates alike."""
    quality = dataclasses.replace(spoken, folder=folder).finish()
    scores = {name: quality.get(name) for name in SCORES}
    score, basis = search_score(scores)
    files = quality.get("files", []) + [p["file"] for p in quality.get("probes") or [] if p.get("file")]
    return {
        "scores": scores,
        "score": None if score is None else round(score, 4),
        "scored_on": basis,
        "files": files,
        "reasons": quality.get("reasons", []),
        "seconds": round(time.monotonic() - started, 2),
    }


def choose_inference_settings(
    ready_dir: str | Path, evaluator: Any, budget: Any, count: int, seed: int
) -> dict[str, Any]:
    """Try up to `count` candidates on the ready/ voice (see the module docstring), write the winner into ready/, and
    return what finetune.json "inference" now holds. Never raises: a failure keeps the model's settings, with why."""
    ready = Path(ready_dir)
    base = inference_settings(ready)
    if count <= 0:
        record = _kept(base, "inference_search=0: not searched")
    elif evaluator is None:
        record = _kept(base, "no scored evaluation in this run (quality_eval=0): nothing to measure with")
    elif not budget.should_score(final=False):
        record = _kept(base, budget.reason_skipped().replace("not scored", "not searched"))
    else:
        try:
            record = _search(ready, evaluator, budget, candidates(base, count), seed)
        except Exception as exc:  # a model that will not load, a disk error: the run keeps its settings
            log.warning("The search for inference settings failed: %s", exc, exc_info=True)
            record = _kept(base, f"search failed: {type(exc).__name__}: {exc}")
    try:
        write_inference_settings(ready, record["settings"], record)
    except OSError as exc:
        log.warning("Could not record the inference settings in %s: %s", ready, exc)
    return record


def _search(ready: Path, evaluator: Any, budget: Any, settings: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    from utils.model.inference import load_voice_uncached

    folder = ready.parent / "evals" / SEARCH_DIR
    voice = load_voice_uncached(ready)
    tried, reason = [], None
    try:
        for index, candidate in enumerate(settings):
            if index and not budget.should_score(final=False):
                reason = f"{index} of {len(settings)} candidates tried: " + budget.reason_skipped()
                break
            tried.append(_try(evaluator, voice.model, index, candidate, folder))
            budget.record(tried[-1]["seconds"])
    finally:
        del voice
        gc.collect()
        _empty_cuda_cache()
    ranked = [(c["score"], -i) for i, c in enumerate(tried) if c["score"] is not None]
    chosen = -max(ranked)[1] if ranked else 0
    source = (
        f"measured at the end of the run: candidate {chosen} of {len(tried)} (seed {seed})"
        if ranked
        else "the base model's settings: no candidate could be scored"
    )
    return {
        "settings": tried[chosen]["settings"] if tried else settings[0],
        "source": source,
        "searched": True,
        "chosen": chosen,
        "seed": seed,
        "reason": reason,
        "candidates": tried,
    }


def _empty_cuda_cache() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
