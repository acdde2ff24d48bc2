"""Blind A/B listening: two voices (two runs, or a run and its base model) speak the same text with the same
reference clip and seed; the person hears them as A and B in an order drawn at random, picks one (or "same"), and
only then learns which was which. Each choice is kept in the output folder (`listening/choices.jsonl`) beside the
runs' scores, so the Runs view shows each run's wins and losses, and how often the ears agreed with the combined
score.

A pair's clips are `synthesized/listening/<id>/A.wav` and `B.wav` (the folder the web app serves); which voice each
letter is stays in `listening/<id>/pair.json`, never served: the page and the notebook get the clips and the id, not
the labels.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.files import append_jsonl, read_json, read_jsonl, write_json_atomic

log = logging.getLogger(__name__)
FOLDER = "listening"
SERVED = "synthesized"  # the output folder's part the web app serves (its clips only)
CHOICES = "choices.jsonl"
BASE = "base"
CHOICE_WORDS = ("A", "B", "same")


@dataclass(frozen=True)
class BlindPair:
    pair_id: str
    text: str
    clips: tuple[str, str]  # A, B


def _ready(run: str | os.PathLike) -> Path:
    from utils.model.inference import find_ready_dir

    return find_ready_dir(run)


def _combined(run_dir: str) -> float | None:
    if run_dir == BASE:
        return None
    from utils.sweep.run_scores import chosen_scores

    return chosen_scores(run_dir).get("combined")


def blind_pair(
    output_dir: str | os.PathLike,
    first: str | os.PathLike,
    second: str | os.PathLike,
    text: str,
    *,
    seed: int = 1,
    language: str | None = None,
    models_dir: str | os.PathLike | None = None,
    **sampling: Any,
) -> BlindPair:
    """Speak `text` with two voices for a blind choice: `first` a finished run folder, `second` another run or
    "base" (first's base model). Same reference (first's own clips), seed, language and sampling settings
    (temperature, top_p, max_audio_tokens... as utils.model.inference.synthesize takes them) for both."""
    from utils.model.base_models import ensure_base_model
    from utils.model.compare import speak_side
    from utils.model.ready import read_finetune_info
    from utils.model.references import voice_references

    if not text or not text.strip():
        raise ValueError("Text is empty: type what both voices should say.")
    ready = _ready(first)
    info = read_finetune_info(ready)
    if str(second) == BASE:
        version = info.get("base_version")
        if not version:
            raise ValueError(f"{ready}/finetune.json does not name its base model version.")
        other_model, other = ensure_base_model(version, models_dir).folder, BASE
    else:
        other_ready = _ready(second)
        if other_ready.resolve() == ready.resolve():
            raise ValueError("Both sides are the same voice: pick two runs, or a run and the base model.")
        other_model, other = other_ready, str(other_ready.parent.resolve())
    sides = [(str(ready.parent.resolve()), ready), (other, other_model)]
    if secrets.randbelow(2):
        sides.reverse()
    pair_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    folder = Path(output_dir) / FOLDER / pair_id
    clips = Path(output_dir) / SERVED / FOLDER / pair_id
    folder.mkdir(parents=True, exist_ok=True)
    clips.mkdir(parents=True, exist_ok=True)
    options = {
        **sampling,
        "language": language or info.get("language") or "en",
        "reference_wav": voice_references(ready),
        "seed": int(seed),
    }
    spoken = [
        speak_side(letter, model, text.strip(), clips / f"{letter}.wav", options)
        for letter, (_, model) in zip("AB", sides, strict=True)
    ]
    failed = [side.reason for side in spoken if side.reason]
    if failed:  # its reason would name the voice: said apart from the pair, which is thrown away
        log.warning("A blind pair could not be made: %s", "; ".join(failed))
        shutil.rmtree(clips, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        raise ValueError(
            "One of the two voices could not speak this text, so there is nothing to compare; the log says why."
        )
    write_json_atomic(
        folder / "pair.json",
        {
            "id": pair_id,
            "text": text.strip(),
            "seed": int(seed),
            "sides": [run for run, _ in sides],
            "created": time.time(),
        },
    )
    return BlindPair(pair_id, text.strip(), (str(clips / "A.wav"), str(clips / "B.wav")))


def record_choice(output_dir: str | os.PathLike, pair_id: str, choice: str) -> dict[str, Any]:
    """Keep the person's choice for a pair ("A", "B" or "same") and reveal it: the record written, with `text`
    saying which voice each letter was."""
    if choice not in CHOICE_WORDS:
        raise ValueError(f"The choice is A, B or same; got {choice!r}.")
    if not pair_id or any(c not in "0123456789abcdef-" for c in pair_id):
        raise ValueError(f"No such listening pair: {pair_id!r}.")
    folder = Path(output_dir) / FOLDER
    pair = read_json(folder / pair_id / "pair.json")
    if not isinstance(pair, dict):
        raise ValueError(f"No such listening pair: {pair_id!r}.")
    try:  # one choice per pair, whatever clicks race: the marker is created once
        os.close(os.open(folder / pair_id / "chosen", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        raise ValueError("This pair's choice is already recorded: make a new pair to listen again.") from None
    a, b = pair["sides"]
    preferred = {"A": a, "B": b}.get(choice)
    scores = {side: _combined(side) for side in (a, b)}
    agreed = None
    if preferred is not None and None not in scores.values() and scores[a] != scores[b]:
        agreed = scores[preferred] == max(scores.values())
    record = {
        "id": pair_id,
        "time": time.time(),
        "text": pair["text"],
        "seed": pair["seed"],
        "A": a,
        "B": b,
        "choice": choice,
        "preferred": preferred,
        "combined": scores,
        "scores_agree": agreed,
    }
    append_jsonl(folder / CHOICES, record)
    name = lambda side: "the base model" if side == BASE else Path(side).name
    said = "No preference" if preferred is None else f"You preferred {name(preferred)}"
    record["reveal"] = f"{said}. A was {name(a)}, B was {name(b)}." + (
        "" if agreed is None else " The combined scores agree." if agreed else " The combined scores say otherwise."
    )
    return record


def listening_tally(output_dir: str | os.PathLike) -> dict[str, dict[str, int]]:
    """Per run folder (and "base"): {won, lost, same} over the recorded choices."""
    tally: dict[str, dict[str, int]] = {}
    for record in read_jsonl(Path(output_dir) / FOLDER / CHOICES):
        sides = [record.get("A"), record.get("B")]
        for side in sides:
            entry = tally.setdefault(str(side), {"won": 0, "lost": 0, "same": 0})
            if record.get("preferred") is None:
                entry["same"] += 1
            else:
                entry["won" if side == record["preferred"] else "lost"] += 1
    return tally


def agreement(output_dir: str | os.PathLike) -> tuple[int, int]:
    """(choices where the ears agreed with the combined score, choices where both sides had one and differed)."""
    known = [r.get("scores_agree") for r in read_jsonl(Path(output_dir) / FOLDER / CHOICES)]
    decided = [k for k in known if k is not None]
    return sum(decided), len(decided)
