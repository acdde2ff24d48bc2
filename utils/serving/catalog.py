"""The models and voices a speech server offers: the finished runs (those with a ready/ folder) in the folders it
was given, found anew at each request, and each run's voices.

A model is a run, named by its folder's name. A request's `model` is looked up among the names found, never joined
to a path, so "../x", an absolute path or a name outside the served folders is simply not there; a run folder (or a
file of its ready/) that is a link leading out of its served folder is not offered. Nothing here writes.

A run's voices: its own (the reference clip of ready/, as the Test tab and `synthesize` use it), named "default",
the run's folder name or its `run_name`; and the speakers stored in its ready/speakers_xtts.pth (coqui's
conditioning latents per name, copied from the base model), by their names.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.files import read_json
from utils.model.ready import FINETUNE_FILE, READY_DIR, REFERENCE_WAV
from utils.serving.errors import ApiError, said
from utils.text.visible import clipped

log = logging.getLogger(__name__)

DEFAULT_VOICE = "default"
SPEAKERS_FILE = "speakers_xtts.pth"
READY_FILES = ("model.pth", "config.json", "vocab.json", REFERENCE_WAV)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")
LISTED_IN_ERRORS = 20  # names an error lists before saying how many more there are


def _inside(path: Path, root: Path) -> bool:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return False
    return resolved == root or root in resolved.parents


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED_IN_ERRORS]) or "none"
    more = len(names) - LISTED_IN_ERRORS
    return shown + (f" (and {more} more)" if more > 0 else "")


@functools.lru_cache(maxsize=32)
def _speaker_names(path: str, stamp: tuple[int, int]) -> tuple[str, ...]:
    import torch

    try:
        speakers = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - an unreadable file offers no speakers; the run's own voice speaks
        log.warning("%s is unreadable (%s: %s); its speakers are not offered.", path, type(exc).__name__, exc)
        return ()
    if not isinstance(speakers, dict):
        return ()
    return tuple(
        str(name)
        for name, latents in speakers.items()
        if isinstance(latents, dict) and {"gpt_cond_latent", "speaker_embedding"} <= latents.keys()
    )


@dataclass(frozen=True)
class Voice:
    id: str
    kind: str  # "reference": the run's own (ready/reference.wav); "speaker": a name of ready/speakers_xtts.pth
    aliases: tuple[str, ...] = ()

    def describe(self, model: str) -> dict[str, Any]:
        source = REFERENCE_WAV if self.kind == "reference" else SPEAKERS_FILE
        return {"id": self.id, "object": "voice", "model": model, "source": source, "aliases": list(self.aliases)}


@dataclass(frozen=True)
class Model:
    name: str
    run_dir: Path
    ready_dir: Path

    @property
    def info(self) -> dict[str, Any]:
        info = read_json(self.ready_dir / FINETUNE_FILE, {})
        return info if isinstance(info, dict) else {}

    def run_name(self) -> str:
        record = read_json(self.run_dir / "run.json", {})
        arguments = record.get("arguments") if isinstance(record, dict) else None
        name = arguments.get("run_name") if isinstance(arguments, dict) else None
        return name.strip() if isinstance(name, str) else ""

    def speakers(self) -> tuple[str, ...]:
        path = self.ready_dir / SPEAKERS_FILE
        if not path.is_file() or not _inside(path, self.run_dir.resolve()):
            return ()
        stat = path.stat()
        return _speaker_names(str(path), (stat.st_size, stat.st_mtime_ns))

    def voices(self) -> list[Voice]:
        aliases = tuple(dict.fromkeys(n for n in (self.name, self.run_name()) if n and n != DEFAULT_VOICE))
        own = Voice(DEFAULT_VOICE, "reference", aliases)
        taken = {DEFAULT_VOICE, *aliases}
        return [own, *(Voice(name, "speaker") for name in self.speakers() if name not in taken)]

    def voice(self, requested: Any) -> Voice:
        """The voice a request names (a name, or OpenAI's {"id": name}); a 400 naming the voices otherwise."""
        name = requested.get("id") if isinstance(requested, dict) else requested
        if not isinstance(name, str) or not name.strip():
            raise ApiError(400, 'voice: give the name of a voice of this model (e.g. "default").', param="voice")
        voices = self.voices()
        for voice in voices:
            if name == voice.id or name in voice.aliases:
                return voice
        names = [n for v in voices for n in (v.id, *v.aliases)]
        raise ApiError(
            400,
            f"voice {said(name)} is not a voice of model {self.name}. Its voices: {_listed(names)}.",
            param="voice",
            code="voice_not_found",
        )

    def describe(self) -> dict[str, Any]:
        info = self.info
        stamp = (self.ready_dir / "model.pth").stat().st_mtime
        return {
            "id": self.name,
            "object": "model",
            "created": int(stamp),
            "owned_by": "xtts-finetune-studio",
            "language": info.get("language"),
            "base_version": info.get("base_version"),
            "voices": [n for v in self.voices() for n in (v.id, *v.aliases)],
        }


def _ready_model(run_dir: Path, root: Path) -> Model | None:
    """The run in `run_dir` as a model, if it is finished (its ready/ holds what inference needs) and every file
    of it lies inside `root`."""
    ready = run_dir / READY_DIR
    if not _NAME.fullmatch(run_dir.name) or not _inside(run_dir, root):
        return None
    if not all((ready / name).is_file() and _inside(ready / name, root) for name in READY_FILES):
        return None
    return Model(run_dir.name, run_dir, ready)


class Catalog:
    """The finished runs of the folders given: an output folder (each of its runs) or one run folder (or its
    ready/). A name found in two folders is the first folder's."""

    def __init__(self, folders: list[str | Path] | tuple[str | Path, ...]) -> None:
        self.sources: list[tuple[Path, bool]] = []  # (resolved folder, whether it is one run)
        for folder in folders:
            path = Path(folder).expanduser().resolve()
            if not path.is_dir():
                raise ValueError(f"{clipped(path)} is not a folder: give a run folder or an output folder.")
            if path.name == READY_DIR and (path / "model.pth").is_file():
                path = path.parent
            single = (path / READY_DIR).is_dir() or (path / "run.json").is_file()
            if (path, single) not in self.sources:
                self.sources.append((path, single))

    @property
    def roots(self) -> list[Path]:
        """Every folder this catalog serves from: nothing outside them is read."""
        return [path for path, _ in self.sources]

    def models(self) -> dict[str, Model]:
        found: dict[str, Model] = {}
        for path, single in self.sources:
            runs = [path] if single else sorted(p for p in _folders(path))
            for run_dir in runs:
                model = _ready_model(run_dir, path)
                if model is not None:
                    found.setdefault(model.name, model)
        return found

    def model(self, requested: Any) -> Model:
        """The model a request names; a 404 naming the models otherwise (a path is no name)."""
        if not isinstance(requested, str) or not requested.strip():
            raise ApiError(400, "model: give the name of a finished run (GET /v1/models lists them).", param="model")
        models = self.models()
        if requested in models:
            return models[requested]
        raise ApiError(
            404,
            f"model {said(requested)} does not exist here: a model is a finished run's folder name. The models: "
            f"{_listed(list(models))}.",
            param="model",
            code="model_not_found",
        )


def _folders(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []
