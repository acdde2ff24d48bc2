"""What fine-tuning changed: the checkpoint ready/ holds against the weights the run started from (step 0).

Every run with scored evaluations scores its starting weights first (the baseline, `baseline: true` in
metrics.jsonl; utils.training.evaluation.best_checkpoint.CheckpointChoice.score_baseline) with the same sentences,
probes and seed as every later evaluation. At the end the evaluation of the chosen checkpoint (or, when that one was not
scored, the last scored one) is compared with it, measure by measure:

    "Against the base model (step 0 -> step 300): CER 12% -> 4%, similarity 0.71 -> 0.86, naturalness 3.1 -> 3.9,
     babble 2/7 -> 0/7."

`better` is the combined score (utils.quality.selection) rising by more than MIN_GAIN; without a combined score on
both sides, more measures improving than worsening. When it is not better the text says so plainly: users fine-tune
on little data and get a voice no better than the base model's, and should know.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.files import read_jsonl
from utils.training.evaluation.retention import retention_changes
from utils.training.recording.records import QualityRecord

MIN_GAIN = 0.01  # of the combined score (0-1): less is noise between two generations
METRICS_FILE = "metrics.jsonl"


def babble_count(record: dict[str, Any]) -> tuple[int, int]:
    """(clips that babbled, clips with a verdict) of a quality record: its sentences and probes."""
    flags = [c.get("babbled") for c in [*(record.get("clips") or []), *(record.get("probes") or [])]]
    known = [f for f in flags if f is not None]
    return sum(bool(f) for f in known), len(known)


def _changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    names = ("cer", "similarity", "naturalness", "babble_rate", "combined")
    return {name: [before.get(name), after.get(name)] for name in names}


def _improved(changes: dict[str, list[Any]]) -> tuple[int, int]:
    """(measures that improved, measures that worsened) among those known on both sides."""
    lower_is_better = {"cer", "babble_rate"}
    up = down = 0
    for name, (old, new) in changes.items():
        if name == "combined" or old is None or new is None or old == new:
            continue
        gained = new < old if name in lower_is_better else new > old
        up, down = up + gained, down + (not gained)
    return up, down


def _better(changes: dict[str, list[Any]]) -> bool:
    """The combined score rising by more than MIN_GAIN; without it on both sides, more measures improving."""
    old, new = changes["combined"]
    if old is not None and new is not None:
        return new - old > MIN_GAIN
    up, down = _improved(changes)
    return up > down


def _text_of(before: dict[str, Any], after: dict[str, Any]) -> str:
    parts = []
    if before.get("cer") is not None and after.get("cer") is not None:
        parts.append(f"CER {before['cer']:.0%} -> {after['cer']:.0%}")
    for name in ("similarity", "naturalness"):
        if before.get(name) is not None and after.get(name) is not None:
            digits = 2 if name == "similarity" else 1
            parts.append(f"{name} {before[name]:.{digits}f} -> {after[name]:.{digits}f}")
    (old, old_of), (new, new_of) = babble_count(before), babble_count(after)
    if old_of and new_of:
        parts.append(f"babble {old}/{old_of} -> {new}/{new_of}")
    return ", ".join(parts) or "no measure on both sides"


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The verdict of two quality records (as JSON): the baseline's and the chosen checkpoint's."""
    changes = _changes(before, after)
    better = _better(changes)
    head = f"Against the base model (step 0 -> step {after.get('step')}): {_text_of(before, after)}."
    if not better:
        head += (
            " The fine-tune is no better than the base model on these measures: more (or cleaner) data, more "
            "epochs or another checkpoint may help; the base model may serve as well."
        )
    verdict = {
        "text": head,
        "better": better,
        "baseline_step": before.get("step"),
        "step": after.get("step"),
        "changes": changes,
    }
    voices = _voices(before, after)
    if voices:
        verdict["voices"] = voices
        verdict["text"] += " " + " ".join(f"{name}: {v['text']}" for name, v in voices.items())
    retention = retention_changes(before, after)
    if retention:
        verdict["retention"] = retention
        verdict["text"] += " Other languages: " + "; ".join(r["text"] for r in retention) + "."
        if any(r["worse"] for r in retention):
            verdict["text"] += (
                " The run is forgetting a language it does not train: mix rows of that language in (a second dataset "
                "at a share of each epoch, e.g. 'en:20%=english.csv') if you need it."
            )
    return verdict


def _voices(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Each voice's own verdict (a run of several speakers), against its own baseline."""
    then, now = before.get("voices") or {}, after.get("voices") or {}
    found = {}
    for name, scores in now.items():
        if name not in then:
            continue
        changes = _changes(then[name], scores)
        better = _better(changes)
        text = _text_of(then[name], scores) + ("" if better else " (no better than the base model)")
        found[name] = {"better": better, "changes": changes, "text": text + "."}
    return found


def run_verdict(run_dir: str | Path, step: int | None) -> dict[str, Any] | None:
    """The verdict of a run folder: its baseline against the evaluation of `step` (the checkpoint ready/ holds), or
    the last scored evaluation when `step` was not scored; None without a baseline or a later scored evaluation."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return None
    quality = [r for r in read_jsonl(path) if r.get("type") == QualityRecord.TYPE and r.get("files")]
    baseline = next((r for r in quality if r.get("baseline")), None)
    scored = [r for r in quality if not r.get("baseline")]
    if baseline is None or not scored:
        return None
    chosen = next((r for r in scored if r.get("step") == step), None)
    result = compare(baseline, chosen or scored[-1])
    if chosen is None:
        result["text"] += f" (step {step} was not scored: the last scored evaluation stands in.)"
    return result
