"""The voice's reference clips chosen by measurement: candidates spoken with the ready/ voice and scored.

XTTS clones from the clips it is given (several combine: utils.model.inference.conditioning_latents), and which ones
make the voice most like the speaker, most intelligible and most natural is a matter of measurement, not of loudness.
Candidates are tried in the order of PLAN: the voice's current clips first (so the choice is never worse, by the
measurement, than what it replaces), then clean training clips alone (utils.quality.reference_candidates: cleanest
first) and combinations of 2-3 of the single clips measured best so far. Each candidate speaks the run's held-out
sentences and probes with the ready/ model, the voice's sampling settings and a fixed seed, and is scored as an
evaluation is (utils.training.evaluation.quality_eval: CER, similarity to the speaker's real clips, naturalness,
babble rate).

RANKING, the one ordering: the highest combined score wins, else the measures there are, weighted as in it
(inference_search.search_score); ties keep the earlier candidate, so the current clips stay unless one is better.

The winner's clips go into ready/ (utils.model.references.write_voice_references: reference.wav first, each file
written atomically), and ready/finetune.json "reference" records which clips, why, and every candidate's scores (their
clips under evals/reference/). At the end of a run (`reference_at_run_end`, only with a scored evaluation) the
candidates stay within the run's scoring budget (quality_eval_share) as the inference search's do; on demand
(utils.training.evaluation.reference_on_demand.choose_reference) every candidate asked for is tried.
"""

from __future__ import annotations

import gc
import itertools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from utils.audio.checks import probe_audio
from utils.audio.io import load_audio
from utils.constants import XTTS_SAMPLE_RATE
from utils.files import read_json
from utils.model.ready import finetune_info_or_reason, inference_settings
from utils.model.references import (
    MAX_REFERENCES,
    REFERENCE_RECORD,
    record_reference,
    voice_references,
    write_voice_references,
)
from utils.quality.reference_candidates import ReferenceClip, clean_clips
from utils.training.evaluation.inference_search import scored_candidate
from utils.training.recording.run_record import RUN_FILE, now_iso

log = logging.getLogger(__name__)

CHOICE_DIR = "reference"  # under evals/: the candidates' clips
RANKING = (
    "the highest combined score (else the measures there are, weighted as in it: CER, similarity, naturalness, "
    "babble rate); ties keep the earlier candidate (the voice's current clips first)"
)
# The kinds of candidate, in the order they are tried: a pair or triple joins the single clips measured best so far.
PLAN = ("current", "single", "single", "pair", "single", "triple", "pair", "single", "pair")
CLIPS_OF = {"pair": 2, "triple": 3}
HEURISTIC = "the loudest unclipped of the longest 3-11 s training clips (taken when the run started)"
SAMPLING_KEYS = ("temperature", "repetition_penalty", "top_p", "top_k", "length_penalty")

Progress = Callable[[int, int, str], None]


def ranking_key(index: int, candidate: dict[str, Any]) -> tuple[float, int] | None:
    """RANKING as a sort key (higher is better), None for a candidate that could not be scored."""
    score = candidate.get("score")
    return None if score is None else (float(score), -index)


def chosen_index(candidates: list[dict[str, Any]]) -> int | None:
    """The candidate RANKING puts first, None when none was scored."""
    keys = [(key, i) for i, c in enumerate(candidates) if (key := ranking_key(i, c)) is not None]
    return max(keys)[1] if keys else None


def current_sources(ready: Path) -> list[str]:
    """Where the voice's current clips came from: its "reference" record's, else the run's own clip's (run.json)."""
    info, _ = finetune_info_or_reason(ready)
    record = info.get(REFERENCE_RECORD)
    sources = record.get("sources") if isinstance(record, dict) else None
    if not isinstance(sources, list):
        # The record as written, not read_run's: at a run's end it is read by the run itself, whose recorded pid is a
        # launcher that may be gone (a killed CLI), and read_run would mark the run failed while it still ends.
        run = read_json(ready.parent / RUN_FILE, {})
        run = run if isinstance(run, dict) else {}
        heuristic = run.get("reference") if isinstance(run.get("reference"), dict) else {}
        sources = heuristic.get("sources")
    return [str(s) for s in sources] if isinstance(sources, list) else []


def not_measured(ready: Path, reason: str) -> dict[str, Any]:
    """At the end of a run: record in finetune.json that the voice keeps the run's own clip, and why no measurement
    chose it; returns the record."""
    record = {
        "measured": False,
        "source": "the run's own clip: " + HEURISTIC,
        "reason": reason,
        "sources": current_sources(ready),
        "ranked_by": RANKING,
        "candidates": [],
        "recorded": now_iso(),
    }
    try:
        record_reference(ready, record)
    except (OSError, ValueError) as exc:
        log.warning("Could not record the reference choice in %s: %s", ready, exc)
    return record


def _seconds(paths: list[str]) -> float | None:
    try:
        return round(sum(probe_audio(path, full=False).duration for path in paths), 2)
    except Exception:  # noqa: BLE001 - a clip that cannot be read: its generation says why
        return None


class _Candidates:
    """The next candidate of PLAN: the current clips, the next clean clip, or a combination of the singles measured
    best so far that was not tried yet."""

    def __init__(self, current: list[str], current_from: list[str], clean: list[ReferenceClip]) -> None:
        self.current = current
        self.clean = iter(clean)
        self.tried: set[frozenset[str]] = {frozenset(current_from)} if current_from else set()
        self.singles: list[tuple[int, dict[str, Any]]] = []  # (index, tried candidate)

    def next(self, kind: str) -> list[str] | None:
        if kind == "current":
            return self.current or None
        if kind == "single":
            for clip in self.clean:
                if frozenset([clip.path]) not in self.tried:
                    return [clip.path]
            return None
        ranked = sorted(
            ((key, c["clips"][0]) for i, c in self.singles if (key := ranking_key(i, c)) is not None), reverse=True
        )
        for combination in itertools.combinations([path for _, path in ranked], CLIPS_OF[kind]):
            if frozenset(combination) not in self.tried:
                return list(combination)
        return None

    def add(self, index: int, kind: str, candidate: dict[str, Any]) -> None:
        self.tried.add(frozenset(candidate["clips"]))
        if kind == "single":
            self.singles.append((index, candidate))


def _try(
    evaluator: Any,
    model: Any,
    index: int,
    kind: str,
    clips: list[str],
    sources: list[str],
    settings: dict,
    folder: Path,
) -> dict[str, Any]:
    """One candidate spoken and scored: its clips, scores, score and generated clips."""
    started = time.monotonic()
    spoken = evaluator.generate(model, -1, sampling=settings, reference=clips)
    scored = scored_candidate(spoken, folder / f"candidate_{index}", started)
    return {"kind": kind, "clips": sources, "clip_seconds": _seconds(clips), **scored}


def choose_voice_reference(
    ready_dir: str | Path,
    evaluator: Any,
    budget: Any,
    count: int,
    seed: int,
    clean: list[ReferenceClip],
    *,
    when: str,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Try up to `count` candidates (PLAN) on the ready/ voice with `evaluator` (a QualityEvaluator of the run's
    held-out sentences), the clean clips `clean` and, when `budget` (a ScoringBudget) is given, while it allows;
    write the winner into ready/ and return what finetune.json "reference" now holds. `when` says in the record
    where it was measured ("at the end of the run", "on demand")."""
    from utils.model.inference import check_reference, load_voice_uncached

    ready = Path(ready_dir)
    current = [str(p) for p in voice_references(ready)]
    problems = []
    try:
        check_reference(current)
    except ValueError as exc:  # a broken clip is no candidate; a clean clip may replace it
        problems.append(f"the voice's own clips were not tried: {exc}")
        current = []
    current_from = current_sources(ready)
    settings = {k: v for k, v in inference_settings(ready).items() if k in SAMPLING_KEYS}
    folder = ready.parent / "evals" / CHOICE_DIR
    candidates = _Candidates(current, current_from, clean)
    tried: list[dict[str, Any]] = []
    reason = None
    voice = load_voice_uncached(ready)
    try:
        for kind in PLAN:
            if len(tried) >= count:
                break
            clips = candidates.next(kind)
            if clips is None:
                continue
            if tried and budget is not None and not budget.should_score(final=False):
                reason = f"{len(tried)} of {count} candidates tried: " + budget.reason_skipped()
                break
            if progress:
                progress(len(tried), count, f"Candidate {len(tried) + 1} of {count} ({kind}): speaking and scoring")
            sources = (current_from or current) if kind == "current" else clips
            tried.append(_try(evaluator, voice.model, len(tried), kind, clips, sources, settings, folder))
            candidates.add(len(tried) - 1, kind, tried[-1])
            if budget is not None:
                budget.record(tried[-1]["seconds"])
    finally:
        del voice
        gc.collect()
        _empty_cuda_cache()
    if len(tried) < count and reason is None:
        reason = f"{len(tried)} of {count} candidates tried: no more clean clips of the training data to try"
    if progress:
        progress(len(tried), len(tried), "Writing the chosen clips")
    reason = "; ".join([*problems, *([reason] if reason else [])]) or None
    return _write_choice(ready, tried, current_from or current, reason, seed, evaluator, settings, when, clean)


def _write_choice(
    ready: Path,
    tried: list[dict[str, Any]],
    current: list[str],  # where the voice's clips came from, as far as it is known
    reason: str | None,
    seed: int,
    evaluator: Any,
    settings: dict[str, Any],
    when: str,
    clean: list[ReferenceClip],
) -> dict[str, Any]:
    chosen = chosen_index(tried)
    record = {
        "measured": True,
        "source": (
            f"measured {when}: candidate {chosen} of {len(tried)} (seed {seed})"
            if chosen is not None
            else "the voice's clips as they were: no candidate could be scored"
        ),
        "reason": reason,
        "ranked_by": RANKING,
        "chosen": 0 if chosen is None else chosen,
        "sources": tried[chosen]["clips"] if chosen is not None else current,
        "seed": seed,
        "sentences": [s.text for s in evaluator.sentences],
        "probes": [p.text for p in evaluator.probes],
        "settings": settings,
        "clean_clips": [clip.to_dict() for clip in clean],
        "candidates": tried,
        "recorded": now_iso(),
    }
    if chosen is None or tried[chosen]["kind"] == "current":  # the voice's clips stay as they are
        record_reference(ready, record)
    else:
        winner = tried[chosen]["clips"]
        if len(winner) > MAX_REFERENCES:
            raise ValueError(f"A candidate of {len(winner)} clips cannot be a voice's reference.")
        write_voice_references(ready, [load_audio(path, XTTS_SAMPLE_RATE)[0] for path in winner], record)
    return {**record, "files": [p.name for p in voice_references(ready)]}


def reference_at_run_end(
    ready_dir: str | Path, choice: Any, count: int, seed: int, interrupted: bool
) -> dict[str, Any]:
    """The end of a run: its voice's clips chosen by measurement when its scored evaluation is on (`choice`, the run's
    CheckpointChoice, holds the evaluator, the budget and the pool of training clips), else its own clip kept and the
    reason recorded. Never raises: a failure keeps the clip, with why."""
    from utils.quality.reference_candidates import DURATION_TIERS

    ready = Path(ready_dir)
    evaluator = choice.evaluator if choice is not None else None
    if interrupted:
        return not_measured(ready, "the run was interrupted (Ctrl-C): not measured")
    if count <= 0:
        return not_measured(ready, "reference_search=0: not measured")
    if evaluator is None:
        return not_measured(ready, "no scored evaluation in this run (quality_eval=0): nothing to measure with")
    if getattr(evaluator, "several_voices", False):
        return not_measured(ready, "several voices: each keeps the reference clip taken from its own training clips")
    if not choice.budget.should_score(final=False):
        return not_measured(ready, choice.budget.reason_skipped().replace("not scored", "not measured"))
    try:
        clean, _ = clean_clips(choice.reference_pool, count)
        if not clean:
            low, high = DURATION_TIERS[-1]
            return not_measured(ready, f"no clean training clip of {low:g}-{high:g} s to try")
        return choose_voice_reference(ready, evaluator, choice.budget, count, seed, clean, when="at the end of the run")
    except Exception as exc:  # a model that will not load, a disk error: the voice keeps its clip
        log.warning("The choice of the reference clips failed: %s", exc, exc_info=True)
        return not_measured(ready, f"measurement failed: {type(exc).__name__}: {exc}")


def _empty_cuda_cache() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
