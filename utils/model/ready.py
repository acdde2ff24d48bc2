"""The `ready/` folder of a run: what inference needs and nothing else.

`ready/model.pth` is the fine-tuned XTTS without optimizer state or DVAE weights, beside
`config.json`, `vocab.json`, `speakers_xtts.pth` (where the base model has one), a reference wav
and `finetune.json` (base version, language, text front end with its pronunciation lexicon) so inference applies the
same text processing as training. `set_voice_lexicon` sets or replaces a finished voice's lexicon.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import shutil
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from utils.audio.io import AudioError, load_audio, write_wav
from utils.constants import XTTS_SAMPLE_RATE
from utils.files import atomic_output, copy_file_atomic, save_torch_atomic, write_json_atomic
from utils.model import sampling
from utils.text.frontend import TextFrontEnd
from utils.text.lexicon import Lexicon, lexicon_from
from utils.text.visible import clipped, visible

log = logging.getLogger(__name__)

READY_DIR = "ready"
FINETUNE_FILE = "finetune.json"
REFERENCE_WAV = "reference.wav"
LEXICON_EDITED = "lexicon_edited"  # finetune.json: when the voice's lexicon was set after its run (kept on a resume)
# The sampling settings of XTTS's config.json (XttsConfig) and the base model's values of them (declared, with their
# ranges, in utils.model.sampling).
INFERENCE_DEFAULTS: dict[str, Any] = sampling.defaults(sampling.CONFIG_KEYS)
# Keys of coqui's GPTTrainer that inference never reads.
_TRAINING_ONLY = ("dvae.", "torch_mel_spectrogram_style_encoder.", "torch_mel_spectrogram_dvae.")


def load_checkpoint_state(path: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint written by our runs (or coqui's trainer), loaded as plain tensors only."""
    return torch.load(str(path), map_location="cpu", weights_only=True)


def slim_state_dict(checkpoint: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The Xtts weights of a training checkpoint, keys as `Xtts.load_state_dict` expects them."""
    model_state = checkpoint.get("model", checkpoint)
    slim = {}
    for key, tensor in model_state.items():
        if key.startswith(_TRAINING_ONLY):
            continue
        key = key.removeprefix("xtts.")
        if key.startswith("gpt.gpt_inference."):
            continue  # rebuilt from the GPT weights by init_gpt_for_inference
        slim[key] = tensor
    return slim


def _reference_candidates(rows: Iterable[tuple[str, float]], count: int) -> list[tuple[str, float]]:
    """The `count` longest clips of 3-11 s (the range XTTS clones from best), or the longest clips
    when none is in range; one pass, keeping only `count` of each (datasets can be huge)."""
    in_range: list[tuple[float, str]] = []
    longest: list[tuple[float, str]] = []
    for path, duration in rows:
        for heap, wanted in ((in_range, 3.0 <= duration <= 11.0), (longest, True)):
            if wanted:
                (heapq.heappush if len(heap) < count else heapq.heappushpop)(heap, (duration, path))
    chosen = in_range or longest
    return [(path, duration) for duration, path in sorted(chosen, reverse=True)]


def write_reference_wav(rows: Iterable[tuple[str, float]], target: Path, max_candidates: int = 12) -> dict[str, Any]:
    """Write a clean reference clip from the training data to `target` (22.05 kHz mono).

    Among the longest clips of 3-11 s, the loudest one that is not clipped is copied. When every
    clip is shorter than 3 s, the loudest clips are joined (0.25 s apart) up to about 6 s.
    Returns what was used, for the run's records.
    """
    scored = []
    for audio_path, duration in _reference_candidates(rows, max_candidates):
        try:
            wav, _ = load_audio(audio_path)
        except AudioError:
            continue  # moved or unreadable since validation: another clip will do
        peak = float(np.abs(wav).max()) if wav.size else 0.0
        rms = float(np.sqrt(np.mean(np.square(wav)))) if wav.size else 0.0
        scored.append((peak < 0.999, rms, audio_path, duration, wav))
    if not scored:
        raise ValueError("No usable clip to take a reference voice from.")
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    if scored[0][3] >= 3.0:
        chosen = [scored[0]]
    else:
        chosen, total = [], 0.0
        for item in scored:
            chosen.append(item)
            total += item[3] + 0.25
            if total >= 6.0:
                break
    gap = np.zeros(int(0.25 * XTTS_SAMPLE_RATE), dtype=np.float32)
    pieces = [part for item in chosen for part in (item[4].astype(np.float32), gap)][:-1]
    write_wav(target, np.concatenate(pieces), XTTS_SAMPLE_RATE)
    return {"sources": [item[2] for item in chosen], "seconds": round(sum(i[3] for i in chosen), 2)}


def complete_state(checkpoint_path: str | os.PathLike, base_weights: str | os.PathLike | None) -> dict[str, Any]:
    """The Xtts weights of a run's checkpoint, completed with the frozen parts (HiFi-GAN) from the base model,
    which training checkpoints leave out."""
    from utils.model.lora import merge_lora_state

    # A LoRA run's checkpoint holds base weights and adapters: ready/ holds them merged, plain XTTS weights.
    state = merge_lora_state(slim_state_dict(load_checkpoint_state(checkpoint_path)))
    if base_weights:
        base = torch.load(str(base_weights), map_location="cpu", weights_only=True, mmap=True)
        for key, tensor in slim_state_dict(base).items():
            state.setdefault(key, tensor)
    return state


def recover_ready(run_dir: str | os.PathLike) -> None:
    """Finish a swap of ready/ that a crash interrupted: the previous complete folder comes back."""
    ready, previous = Path(run_dir) / READY_DIR, Path(run_dir) / (READY_DIR + ".old")
    if not ready.exists() and previous.is_dir():
        os.replace(previous, ready)


def export_ready(
    run_dir: str | os.PathLike,
    checkpoint_path: str | os.PathLike,
    *,
    config: dict[str, Any],
    vocab_path: str | os.PathLike,
    speakers_path: str | os.PathLike | None,
    reference_wav: str | os.PathLike,
    finetune_info: dict[str, Any],
    base_weights: str | os.PathLike | None = None,
) -> Path:
    """(Re)write `run_dir/ready/` from a checkpoint (frozen parts from `base_weights`); returns the folder."""
    recover_ready(run_dir)
    ready = Path(run_dir) / READY_DIR
    staging = Path(run_dir) / (READY_DIR + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    save_torch_atomic({"model": complete_state(checkpoint_path, base_weights)}, staging / "model.pth")
    write_json_atomic(staging / "config.json", config)
    copy_file_atomic(vocab_path, staging / "vocab.json")
    if speakers_path and Path(speakers_path).is_file():
        copy_file_atomic(speakers_path, staging / "speakers_xtts.pth")
    copy_file_atomic(reference_wav, staging / REFERENCE_WAV)
    finetune_info = _with_edited_lexicon(finetune_info, ready)
    write_json_atomic(staging / FINETUNE_FILE, {**finetune_info, "checkpoint": str(checkpoint_path)})
    # Swap in whole: the old folder is moved aside first, so a crash leaves one complete folder
    # (recover_ready moves it back if the crash came between the two renames).
    previous = Path(run_dir) / (READY_DIR + ".old")
    shutil.rmtree(previous, ignore_errors=True)
    if ready.exists():
        os.replace(ready, previous)
    os.replace(staging, ready)
    shutil.rmtree(previous, ignore_errors=True)
    return ready


def _with_edited_lexicon(finetune_info: dict[str, Any], ready: Path) -> dict[str, Any]:
    """finetune_info with the lexicon set on the voice since (set_voice_lexicon, the Test tab) in place of the run's:
    a resumed run rewrites ready/, and the user's newer edit must not be lost."""
    try:
        before = read_finetune_info(ready) if ready.is_dir() else {}
    except ValueError:
        return finetune_info
    edited = before.get(LEXICON_EDITED)
    previous = (before.get("text_frontend") or {}) if isinstance(before.get("text_frontend"), dict) else {}
    if not edited or not isinstance(finetune_info.get("text_frontend"), dict):
        return finetune_info
    frontend = {k: v for k, v in finetune_info["text_frontend"].items() if k != "lexicon"}
    if previous.get("lexicon"):
        frontend["lexicon"] = previous["lexicon"]
    return {**finetune_info, "text_frontend": frontend, LEXICON_EDITED: edited}


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object, or a ValueError naming the file and what is wrong with it."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is unreadable: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is unreadable: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path} is unreadable: it holds {type(value).__name__}, not a JSON object")
    return value


def read_finetune_info(ready_dir: str | os.PathLike) -> dict[str, Any]:
    """ready/finetune.json ({} when there is none), or a ValueError naming the file when it is unreadable: it holds
    the voice's language and text front end, which inference must not guess."""
    path = Path(ready_dir) / FINETUNE_FILE
    return _json_object(path) if path.is_file() else {}


def finetune_info_or_reason(ready_dir: str | os.PathLike) -> tuple[dict[str, Any], str | None]:
    """(ready/finetune.json, None), or ({}, why it cannot be read): for pages that show a voice, which say so and
    go on."""
    try:
        return read_finetune_info(ready_dir), None
    except (OSError, ValueError) as exc:
        return {}, str(exc)


def read_voice_frontend(ready_dir: str | os.PathLike) -> TextFrontEnd:
    """The text front end ready/finetune.json gives the voice (`text_frontend`, its lexicon included), read afresh:
    a lexicon set after the model was loaded applies to the next text. A ValueError names what is unreadable."""
    info = read_finetune_info(ready_dir)
    try:
        return TextFrontEnd.from_dict(info.get("text_frontend"), info.get("language", "en"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{Path(ready_dir) / FINETUNE_FILE}: {exc}") from None


def voice_ready_dir(path: str | os.PathLike) -> Path:
    """The ready/ folder of a run folder, the folder itself when it is one (its finetune.json), or a ValueError."""
    folder = Path(path).expanduser()
    if folder.is_file():
        folder = folder.parent
    if (folder / READY_DIR).is_dir() or (folder / (READY_DIR + ".old")).is_dir():
        recover_ready(folder)
        folder = folder / READY_DIR
    if not (folder / FINETUNE_FILE).is_file():
        raise ValueError(
            f"{clipped(visible(str(path)))} is not a finished voice: no {READY_DIR}/{FINETUNE_FILE} (its language and "
            "text front end). Give a run folder whose training finished or was stopped, or its ready/ folder."
        )
    return folder


def set_voice_lexicon(run_or_ready: str | os.PathLike, entries_or_file: Any) -> Lexicon:
    """Set or replace the pronunciation lexicon of a finished voice (a run folder or its ready/): a Lexicon, a file
    (term<TAB>respelling lines, or JSON; docs/lexicon.md), `{term: respelling}` or a list of records; None or {}
    removes it. Only ready/finetune.json changes (`text_frontend.lexicon`), written atomically; a bad lexicon is a
    ValueError naming its line, and nothing is written. Returns the lexicon the voice now has."""
    ready = voice_ready_dir(run_or_ready)
    info = read_finetune_info(ready)
    frontend = read_voice_frontend(ready)
    lexicon = lexicon_from(entries_or_file, frontend.language)
    updated = TextFrontEnd(frontend.language, frontend.amharic_g2p, lexicon)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json_atomic(ready / FINETUNE_FILE, {**info, "text_frontend": updated.to_dict(), LEXICON_EDITED: stamp})
    return lexicon


@dataclass
class InferenceSettings:
    """A ready/ voice's sampling settings as inference uses them, and what was wrong in its files.

    `values`: every setting of sampling.CONFIG_KEYS, each valid: ready/config.json's, else the base model's
    (missing, or a value outside its range, which is never used). `problems`: per setting (or "" for the whole
    file), why config.json's value was not used, naming the file and the setting. `record`: finetune.json
    "inference" (how the settings were chosen), {} when there is none or it is not a record; `record_problems`:
    what is wrong with it or with finetune.json."""

    values: dict[str, Any]
    problems: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    record_problems: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [*self.problems.values(), *self.record_problems]


def sanitized_settings(values: dict[str, Any], source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(each sampling setting of `values` (a config.json) checked, the base model's for a missing or bad one,
    {setting: why its value in `source` was not used})."""
    chosen, problems = {}, {}
    for name, default in INFERENCE_DEFAULTS.items():
        if name not in values:
            chosen[name] = default
            continue
        try:
            chosen[name] = sampling.checked(name, values[name])
        except ValueError as exc:
            chosen[name] = default
            problems[name] = f"{source}: {exc}; the base model's {default:g} is used instead."
    return chosen, problems


def _record_problems(record: Any, values: dict[str, Any], path: Path) -> tuple[dict[str, Any], list[str]]:
    """finetune.json "inference" as a record, and what is wrong with it: not a record, settings out of range, or
    settings other than those config.json gives the voice (config.json edited since)."""
    if not isinstance(record, dict):
        return {}, [
            f'{path}: "inference" is not a record of how the settings were chosen (got {type(record).__name__}).'
        ]
    problems = []
    if not isinstance(record.get("candidates", []), list):
        problems.append(f'{path}: "inference" "candidates" is not a list; the candidates tried are unknown.')
        record = {**record, "candidates": []}
    recorded = record.get("settings")
    if recorded is None:
        return record, problems
    if not isinstance(recorded, dict):
        return record, [*problems, f'{path}: "inference" "settings" is not a record (got {type(recorded).__name__}).']
    different = []
    for name in INFERENCE_DEFAULTS:
        if name not in recorded:
            continue
        try:
            value = sampling.checked(name, recorded[name])
        except ValueError as exc:
            problems.append(f'{path}: "inference" settings: {exc}; ready/config.json\'s {values[name]:g} is used.')
            continue
        if value != values[name]:
            different.append(f"{name} {value:g}")
    if different:
        problems.append(
            f"{path} records other settings ({', '.join(different)}) than the voice's config.json gives it: "
            "config.json's are used."
        )
    return record, problems


def read_inference_settings(ready_dir: str | os.PathLike) -> InferenceSettings:
    """The sampling settings a ready/ folder carries in its config.json (what coqui's own Xtts.synthesize reads),
    checked against their declared ranges (utils.model.sampling): the base model's for any it lacks and, with a
    problem naming the file and the setting, for any out of range or not a number. Never raises for a bad file:
    an unreadable config.json or finetune.json is a problem, and the base model's settings are used."""
    ready = Path(ready_dir)
    path = ready / "config.json"
    try:
        config = _json_object(path) if path.is_file() else {}
    except (OSError, ValueError) as exc:
        config, unreadable = {}, {"": f"{exc}; the base model's sampling settings are used."}
    else:
        unreadable = {}
    values, problems = sanitized_settings(config, str(path))
    info, why = finetune_info_or_reason(ready)
    if why:
        return InferenceSettings(values, {**unreadable, **problems}, {}, [why + "."])
    record, record_problems = (
        ({}, []) if "inference" not in info else _record_problems(info["inference"], values, ready / FINETUNE_FILE)
    )
    return InferenceSettings(values, {**unreadable, **problems}, record, record_problems)


def inference_settings(ready_dir: str | os.PathLike) -> dict[str, Any]:
    """The sampling settings of a ready/ folder's config.json, each valid (read_inference_settings: the base
    model's for any it lacks or holds out of range, with a logged warning)."""
    read = read_inference_settings(ready_dir)
    for problem in read.problems.values():
        log.warning("%s", problem)
    return read.values


def ready_config(ready_dir: str | os.PathLike) -> dict[str, Any]:
    """ready/config.json for coqui's XttsConfig: a ValueError naming the file when it is unreadable, and each
    sampling setting checked (the base model's for a bad one, which coqui's loader would fail on: a NaN top_k)."""
    config = _json_object(Path(ready_dir) / "config.json")
    values, _ = sanitized_settings(config, "config.json")
    return {**config, **{name: values[name] for name in config.keys() & set(values)}}


def write_inference_settings(ready_dir: str | os.PathLike, settings: dict[str, Any], record: dict[str, Any]) -> None:
    """Put chosen sampling `settings` into ready/config.json (coqui's loader, the Test tab and the export read them
    there) and `record` (how they were chosen) into ready/finetune.json "inference"; each file written atomically.
    A setting out of its range is a ValueError: none is written."""
    ready = Path(ready_dir)
    config = json.loads((ready / "config.json").read_text(encoding="utf-8"))
    chosen = {k: sampling.checked(k, settings[k]) for k in INFERENCE_DEFAULTS if k in settings}
    write_json_atomic(ready / "config.json", {**config, **chosen})
    write_json_atomic(ready / FINETUNE_FILE, {**read_finetune_info(ready), "inference": record})


def zip_ready(ready_dir: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Zip a ready folder (model, config, vocab, speakers, reference wav, finetune.json), atomically."""
    ready_dir = Path(ready_dir)
    with atomic_output(target) as handle, zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
        for file in sorted(ready_dir.iterdir()):
            if file.is_file():
                archive.write(file, arcname=f"{ready_dir.parent.name}/{file.name}")
    return Path(target)
