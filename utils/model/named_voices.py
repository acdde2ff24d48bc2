"""The named voices of a ready/ folder trained on several speakers (utils.training.evaluation.voices).

Each voice is its reference clip in ready/voices/<file>.wav, its entry in ready/finetune.json "voices" ({name:
{files, language}}) and its entry in ready/speakers_xtts.pth under its name (coqui's speaker file: `Xtts.synthesize(
..., speaker_id=name)` and coqui's `tts --speaker_idx name` find it). `synthesize(voice=name)` and the Test tab pick a
voice by name; without a name, the voice is ready/'s own (reference.wav: the first voice).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from utils.files import atomic_output, copy_file_atomic, write_json_atomic
from utils.model.ready import FINETUNE_FILE, read_finetune_info
from utils.model.speaker_latents import coqui_xtts, latents_of

VOICES_RECORD = "voices"
VOICES_FOLDER = "voices"
SPEAKERS_FILE = "speakers_xtts.pth"


def write_named_voices(
    ready_dir: str | os.PathLike, voices: dict[str, dict[str, Any]], run_dir: Path
) -> dict[str, Any]:
    """Copy each voice's reference clip into ready/voices/, list the voices in finetune.json and add each to
    ready/speakers_xtts.pth (computed with ready/'s own model, loaded once). `voices`: run.json's {name: {file,
    language, ...}} (files relative to `run_dir`). Returns finetune.json's "voices"."""
    ready = Path(ready_dir)
    record: dict[str, Any] = {}
    for name, voice in voices.items():
        source = run_dir / voice["file"]
        target = ready / VOICES_FOLDER / Path(voice["file"]).name
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_file_atomic(source, target)
        record[name] = {"files": [f"{VOICES_FOLDER}/{target.name}"], "language": voice["language"]}
    speakers_file = ready / SPEAKERS_FILE
    speakers = torch.load(str(speakers_file), map_location="cpu", weights_only=True) if speakers_file.is_file() else {}
    xtts, config = coqui_xtts(ready)
    for name, entry in record.items():
        speakers[name] = latents_of(xtts, config, [str(ready / f) for f in entry["files"]])
    with atomic_output(speakers_file) as handle:
        torch.save(speakers, handle)
    write_json_atomic(ready / FINETUNE_FILE, {**read_finetune_info(ready), VOICES_RECORD: record})
    return record


def voice_names(ready_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The ready/ folder's named voices ({} for a voice of one speaker)."""
    voices = read_finetune_info(Path(ready_dir)).get(VOICES_RECORD)
    return voices if isinstance(voices, dict) else {}


def named_voice(ready_dir: str | os.PathLike, name: str) -> tuple[list[Path], str]:
    """(the reference clips, the language) of the voice `name`; a ValueError naming the voices there otherwise."""
    ready = Path(ready_dir)
    voices = voice_names(ready)
    if name not in voices:
        there = ", ".join(repr(v) for v in voices) or "none (a voice of one speaker: leave voice empty)"
        raise ValueError(f"voice {name[:80]!r} is not a voice of {ready.parent.name}; its voices: {there}.")
    entry = voices[name]
    files = [
        ready / f
        for f in entry.get("files") or []
        if isinstance(f, str) and not Path(f).is_absolute() and ".." not in f
    ]
    if not files:
        raise ValueError(f"voice {name[:80]!r} of {ready.parent.name} lists no reference clip in ready/finetune.json.")
    return files, str(entry.get("language") or "")
