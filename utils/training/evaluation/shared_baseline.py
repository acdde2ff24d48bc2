"""A baseline scored once and taken by other runs: the step-0 evaluation of another run folder, when it is the same
evaluation this run would score (TrainArguments.quality_baseline_from).

A sweep's trials start from the same weights and speak the same sentences and probes with the same seed: scoring
step 0 again in every trial costs a full scored evaluation per trial and would only add generation noise between
trials. A run takes another's baseline only when nothing that decides the baseline differs (the starting weights,
the text front end, what is spoken and how it is heard); otherwise it scores its own and says why. The clips are
copied into this run's evals/, so the record reads as any baseline of the run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from utils.files import read_jsonl
from utils.training.recording.run_record import METRICS_FILE, read_run

# The arguments that decide the weights at step 0 and how the evaluation is spoken and heard.
_SAME_ARGUMENTS = (
    "custom_model",
    "version",
    "language",
    "use_amharic_g2p",
    "new_language",
    "vocab_new_tokens",
    "lexicon_file",
    "precision",
    "quality_max_audio_tokens",
    "max_audio_length",
)
_SAME_SETUP = ("sentences", "real_clips", "whisper_model", "seed", "probes", "voices", "retention")


def _differences(source: dict[str, Any], here: dict[str, Any]) -> list[str]:
    said = []
    theirs, ours = source.get("arguments") or {}, here.get("arguments") or {}
    said += [
        f"{name} {theirs.get(name)!r} vs {ours.get(name)!r}"
        for name in _SAME_ARGUMENTS
        if theirs.get(name) != ours.get(name)
    ]
    theirs, ours = source.get("quality") or {}, here.get("quality") or {}
    said += [f"the evaluation's {name}" for name in _SAME_SETUP if theirs.get(name) != ours.get(name)]
    if source.get("text_frontend") != here.get("text_frontend"):
        said.append("the text front end")
    return said


def _inside(folder: Path, name: Any) -> bool:
    if not isinstance(name, str) or not name or Path(name).is_absolute():
        return False
    root = folder.resolve()
    return (root / name).resolve().is_relative_to(root)


def shared_baseline(source_dir: str | Path, run_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """(the baseline record of `source_dir`, with its clips copied into `run_dir`, ready to log as this run's; "")
    or (None, why it cannot be taken)."""
    source = Path(source_dir).expanduser()
    if not (source / "run.json").is_file():
        return None, f"{source} is not a run folder"
    if source.resolve() == Path(run_dir).resolve():
        return None, "it is this run"
    baselines = [r for r in read_jsonl(source / METRICS_FILE) if r.get("type") == "quality" and r.get("baseline")]
    if not baselines:
        return None, f"{source.name} has no scored baseline"
    differences = _differences(read_run(source), read_run(run_dir))
    if differences:
        return None, f"{source.name} scored another baseline ({'; '.join(differences)})"
    record = dict(baselines[-1])
    probes = [p.get("file") for p in record.get("probes") or [] if isinstance(p, dict) and p.get("file")]
    retention = [f for part in (record.get("retention") or {}).values() for f in part.get("files") or []]
    names = [*(record.get("files") or []), *probes, *retention]
    # The names come from the other run's metrics.jsonl: each must stay inside both folders.
    if any(not _inside(source, name) or not _inside(Path(run_dir), name) for name in names):
        return None, f"{source.name}'s baseline names clips outside its folder"
    try:
        for name in names:
            target = Path(run_dir) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target)
    except OSError as exc:
        return None, f"its clips could not be copied: {exc}"
    record["baseline_from"] = str(source.resolve())
    return record, ""
