"""A voice's reference clips in ready/: what XTTS conditions on when it speaks.

ready/ holds one clip or a few: `reference.wav` first (what the exports, coqui's loaders and other apps read, so it is
always the best clip, or the first of the best set), then `reference_2.wav`, `reference_3.wav`. ready/finetune.json
`reference.files` lists those that make the voice, in order; without it (runs before it was written) the voice is
reference.wav alone. utils.model.inference.conditioning_latents combines several clips as coqui's
Xtts.get_conditioning_latents does.

`write_voice_references` replaces the set: each clip is written atomically (the previous file stays until the new
one is whole), the extra clips before reference.wav, then finetune.json, then the clips no longer listed are removed.
A crash in between leaves a voice that speaks (every listed file whole), its clips from one set or the other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from utils.audio.io import write_wav
from utils.constants import XTTS_SAMPLE_RATE
from utils.files import write_json_atomic
from utils.model.ready import FINETUNE_FILE, REFERENCE_WAV, finetune_info_or_reason, read_finetune_info

MAX_REFERENCES = 3  # clips a voice holds at most: a combination is 2-3 clips
REFERENCE_RECORD = "reference"  # the key of ready/finetune.json: which clips, how they were chosen
# The names a listed clip may have: only files of ready/ itself, whatever a hand-edited finetune.json says.
_NAME = re.compile(r"reference(?:_[2-9])?\.wav")


def reference_file_name(index: int) -> str:
    """The name in ready/ of the voice's clip number `index` (0: reference.wav)."""
    return REFERENCE_WAV if index == 0 else f"reference_{index + 1}.wav"


def reference_paths(reference: Any) -> list[Path]:
    """A reference argument as a list of paths: nothing (None, "", []) is [], one path is [it], a list or tuple of
    paths is each of them. Anything else is a ValueError."""
    if reference is None or (isinstance(reference, (str, bytes, list, tuple)) and not reference):
        return []
    if isinstance(reference, (str, os.PathLike)):
        return [Path(reference)]
    if isinstance(reference, (list, tuple)) and all(isinstance(r, (str, os.PathLike)) and str(r) for r in reference):
        return [Path(r) for r in reference]
    raise ValueError(f"A reference must be an audio file's path or a list of paths; got {type(reference).__name__}.")


def listed_files(record: Any) -> list[str]:
    """The clip names a finetune.json "reference" record lists, when it lists a usable set (reference.wav first,
    each name once, at most MAX_REFERENCES); [] otherwise."""
    files = record.get("files") if isinstance(record, dict) else None
    if (
        not isinstance(files, list)
        or not files
        or len(files) > MAX_REFERENCES
        or len(set(map(str, files))) < len(files)
    ):
        return []
    if files[0] != REFERENCE_WAV or not all(isinstance(name, str) and _NAME.fullmatch(name) for name in files):
        return []
    return list(files)


def voice_references(ready_dir: str | os.PathLike) -> list[Path]:
    """The clips a ready/ voice speaks with, in order: those finetune.json "reference" lists, else reference.wav
    (also when finetune.json is unreadable: inference says why elsewhere). A listed file that is missing stays in
    the list, so that the check of the reference names it."""
    ready = Path(ready_dir)
    info, _ = finetune_info_or_reason(ready)
    return [ready / name for name in listed_files(info.get(REFERENCE_RECORD))] or [ready / REFERENCE_WAV]


def record_reference(ready_dir: str | os.PathLike, record: dict[str, Any]) -> None:
    """Put `record` (how the voice's clips were chosen) into ready/finetune.json "reference", the clips unchanged:
    its `files` are the voice's current clips."""
    ready = Path(ready_dir)
    files = [path.name for path in voice_references(ready)]
    write_json_atomic(
        ready / FINETUNE_FILE, {**read_finetune_info(ready), REFERENCE_RECORD: {**record, "files": files}}
    )


def write_voice_references(
    ready_dir: str | os.PathLike, clips: Sequence[np.ndarray], record: dict[str, Any]
) -> list[Path]:
    """Make `clips` (mono float samples at 22.05 kHz, best first) the voice's reference clips and `record` its
    finetune.json "reference" (with their `files`), in the order the module docstring gives; returns the paths."""
    if not 1 <= len(clips) <= MAX_REFERENCES:
        raise ValueError(f"A voice holds 1 to {MAX_REFERENCES} reference clips; got {len(clips)}.")
    ready = Path(ready_dir)
    names = [reference_file_name(index) for index in range(len(clips))]
    for name, wav in reversed(list(zip(names, clips, strict=True))):  # reference.wav, which every app reads, last
        write_wav(ready / name, np.asarray(wav, dtype=np.float32), XTTS_SAMPLE_RATE)
    write_json_atomic(
        ready / FINETUNE_FILE, {**read_finetune_info(ready), REFERENCE_RECORD: {**record, "files": names}}
    )
    for stale in ready.glob("reference_*.wav"):
        if _NAME.fullmatch(stale.name) and stale.name not in names:
            stale.unlink(missing_ok=True)
    return [ready / name for name in names]
