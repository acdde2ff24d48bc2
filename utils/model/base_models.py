"""Where the XTTS base model files live, checking them, and fetching them when a network allows."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch

from utils.constants import MODEL_FILES, PROJECT_ROOT
from utils.model.tiny import _random_speakers, _save_random_xtts, ensure_tiny_model, tiny_vocab

TINY = "tiny"
HF_REPO = "coqui/XTTS-v2"
# Tags of coqui/XTTS-v2 on the Hugging Face hub; "main" is the newest.
KNOWN_VERSIONS = ("v2.0.0", "v2.0.1", "v2.0.2", "v2.0.3", "main")
# These three are published on the main branch only, not under each version tag.
_MAIN_ONLY = ("dvae.pth", "mel_stats.pth", "speakers_xtts.pth")


class MissingBaseModelFiles(FileNotFoundError):
    """Base model files are missing and could not be downloaded."""


@dataclass(frozen=True)
class BaseModel:
    """Paths of one base model version's files."""

    version: str
    folder: Path

    @property
    def model(self) -> Path:
        return self.folder / "model.pth"

    @property
    def config(self) -> Path:
        return self.folder / "config.json"

    @property
    def vocab(self) -> Path:
        return self.folder / "vocab.json"

    @property
    def dvae(self) -> Path:
        return self.folder / "dvae.pth"

    @property
    def mel_stats(self) -> Path:
        return self.folder / "mel_stats.pth"

    @property
    def speakers(self) -> Path:
        return self.folder / "speakers_xtts.pth"


def models_root(models_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding one sub-folder per base version: argument, $XTTS_MODELS_DIR, or ./models."""
    if models_dir:
        return Path(models_dir)
    return Path(os.environ.get("XTTS_MODELS_DIR") or PROJECT_ROOT / "models")


def available_versions(models_dir: str | os.PathLike | None = None) -> list[str]:
    """Versions a user can pick: the tiny model, the published ones, and any complete local folder."""
    root = models_root(models_dir)
    local = sorted(p.name for p in root.glob("*") if p.is_dir() and not missing_files(p)) if root.is_dir() else []
    return list(dict.fromkeys([TINY, *KNOWN_VERSIONS, *local]))


def version_choices(models_dir: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """(label, version) for a picker, saying which versions are on disk and which need a download."""
    root = models_root(models_dir)
    labels = []
    for version in available_versions(models_dir):
        if version == TINY:
            state = "small random model, built in seconds"
        else:
            state = "installed" if not missing_files(root / version) else "not downloaded"
        labels.append((f"{version} ({state})", version))
    return labels


def missing_files(folder: Path) -> list[str]:
    return [name for name in MODEL_FILES if not (folder / name).is_file()]


_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_version_name(version: str, models_dir: str | os.PathLike | None = None) -> None:
    """Raise ValueError for a version that is neither published, tiny, nor an existing local folder."""
    if not version or not isinstance(version, str):
        raise ValueError("version is empty: use 'tiny' or one of " + ", ".join(KNOWN_VERSIONS) + ".")
    if version in (TINY, *KNOWN_VERSIONS):
        return
    if not _FOLDER_NAME.fullmatch(version) or ".." in version:
        # A name, never a path: the web passes it through, and a path would read (and tell of) any folder.
        raise ValueError(
            f"version {version!r} is not a folder name: give the name of a folder under {models_root(models_dir)} "
            "(letters, digits, '.', '_' and '-'), or pass models_dir to use another folder of models."
        )
    if (models_root(models_dir) / version).is_dir():
        return
    raise ValueError(
        f"Unknown base model version {version!r}. Use 'tiny' (a small random model for trying things), "
        f"one of {', '.join(KNOWN_VERSIONS)}, or the name of a folder under {models_root(models_dir)} "
        f"holding {', '.join(MODEL_FILES)}."
    )


# Entries a folder of base models may hold beside its model folders (./models ships a README).
_MODELS_FOLDER_FILES = ("README.md", "README.txt", "README")
WHISPER_FOLDER = "whisper"  # models/whisper/<name>/ (utils.quality.asr)


def run_vocab_file(version: str, custom_model: str = "", models_dir: str | os.PathLike | None = None) -> Path | None:
    """The vocab a run with these settings tokenizes with, when it is on disk: a custom model's, else the base
    model's (the tiny model's vocab is built alone, without the model). Raises ValueError for an unknown version."""
    check_version_name(version, models_dir)
    custom_vocab = Path(custom_model).expanduser().parent / "vocab.json" if custom_model else None
    if custom_vocab is not None and custom_vocab.is_file():
        return custom_vocab
    vocab = (
        tiny_vocab(models_root(models_dir) / TINY)
        if version == TINY
        else models_root(models_dir) / version / "vocab.json"
    )
    return vocab if vocab.is_file() else None


def _is_model_folder(entry: Path) -> bool:
    """A version folder: empty, holding base model files, or only hidden entries (a download's .cache)."""
    names = [child.name for child in entry.iterdir() if not child.name.startswith(".")]
    return not names or any(name in MODEL_FILES for name in names)


def check_models_folder(version: str, models_dir: str | os.PathLike | None = None) -> None:
    """Refuse (ValueError) to write base model `version` into a folder that is not a folder of base models.

    Nothing is refused where nothing would be written (the version's files are all there). Otherwise the folder
    must not exist yet, be empty, or hold only what ./models holds: one folder per version (with model files, or
    nothing yet), whisper/, a README and hidden entries. So models_dir='/etc' (or any folder of other files) is
    refused before a model of hundreds of MB lands among someone's files."""
    root = models_root(models_dir)
    if not missing_files(root / version):
        return
    if not root.exists():
        return
    if not root.is_dir():
        raise ValueError(f"models_dir {str(root)!r} is a file, not a folder of base models.")
    foreign = sorted(
        entry.name
        for entry in root.iterdir()
        if not entry.name.startswith(".")
        and entry.name not in _MODELS_FOLDER_FILES
        and not (entry.is_dir() and (entry.name == WHISPER_FOLDER or _is_model_folder(entry)))
    )
    if foreign:
        shown = ", ".join(repr(name) for name in foreign[:3]) + (
            f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        )
        raise ValueError(
            f"models_dir {str(root)!r} is not a folder of base models: it holds {shown}, so base model {version!r} "
            f"is not written into it. Give a new or empty folder, or one laid out as <models_dir>/<version>/ "
            f"({', '.join(MODEL_FILES)}), as ./models is."
        )


def hub_unreachable(timeout: float = 4.0) -> str:
    """Why the model hub cannot be reached now ("" when it can): offline mode, or no connection within
    `timeout` seconds. Asked once before any download, so an offline machine fails in seconds."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return f"{host} cannot be reached ({type(exc).__name__}: {exc})"


def _download(version: str, names: list[str], folder: Path) -> dict[str, str]:
    """Fetch missing files from the hub (tqdm progress bars); returns the errors by file name."""
    why = hub_unreachable()
    if why:
        return dict.fromkeys(names, why)
    from huggingface_hub import hf_hub_download

    errors: dict[str, str] = {}
    for name in names:
        revision = "main" if name in _MAIN_ONLY else version
        try:
            print(f"Downloading {name} ({HF_REPO}@{revision}) to {folder} ...", flush=True)
            hf_hub_download(HF_REPO, name, revision=revision, local_dir=str(folder))
        except Exception as exc:  # noqa: BLE001 - any failure means "not there": reported below
            errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return errors


def _missing_message(version: str, folder: Path, missing: list[str], errors: dict[str, str]) -> str:
    """One short message: the folder, each missing file once, and why the download failed, once."""
    reasons = sorted(set(errors.values()))
    why = f" The download failed: {reasons[0]}." if len(reasons) == 1 else ""
    lines = [
        f"  - {name}" + (f" (download failed: {errors[name]})" if name in errors and not why else "")
        for name in missing
    ]
    return (
        f"Base model {version!r} is incomplete: {len(missing)} file(s) missing from {folder}:\n"
        + "\n".join(lines)
        + (f"\n{why.strip()}" if why else "")
        + f"\nPut them in {folder} (from https://huggingface.co/{HF_REPO}, tag {version}; dvae.pth, "
        "mel_stats.pth and speakers_xtts.pth are on main), or use version='tiny' to try the tool without them."
    )


def ensure_base_model(version: str, models_dir: str | os.PathLike | None = None, *, download: bool = True) -> BaseModel:
    """Return the base model's paths, building `tiny` or downloading missing files first.

    Raises MissingBaseModelFiles, naming every missing file and the folder to put it in, when files
    are missing and cannot be downloaded.
    """
    check_version_name(version, models_dir)
    folder = models_root(models_dir) / version
    if download or version == TINY:
        check_models_folder(version, models_dir)  # before anything is built or fetched into it
    if version == TINY:
        return BaseModel(version, ensure_tiny_model(folder))
    missing = missing_files(folder)
    errors: dict[str, str] = {}
    if missing and download and version in KNOWN_VERSIONS:
        created = not folder.exists()
        why = hub_unreachable()  # asked before the folder exists: an offline machine leaves nothing behind
        if why:
            errors = dict.fromkeys(missing, why)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            errors = _download(version, missing, folder)
            missing = missing_files(folder)
            if created and missing and not any(folder.iterdir()):
                folder.rmdir()  # nothing came: no empty models/<version>/ that looks like a model
    if missing:
        raise MissingBaseModelFiles(_missing_message(version, folder, missing, errors))
    return BaseModel(version, folder)


def build_resized_model(
    folder: str | os.PathLike, model_args: dict[str, int], models_dir: str | os.PathLike | None = None, seed: int = 0
) -> Path:
    """A base-model folder laid out like the tiny one (its vocab, DVAE and mel stats) whose GPT has these
    `model_args` (e.g. gpt_layers, gpt_n_model_channels), with random weights and a random speaker of the
    matching width: for checks and benchmarks at sizes no hub provides without their weights. Built once,
    beside the target and renamed into place. Returns the folder."""
    folder = Path(folder)
    if (folder / "model.pth").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        shutil.copytree(ensure_base_model(TINY, models_dir).folder, staging, dirs_exist_ok=True)
        config = json.loads((staging / "config.json").read_text(encoding="utf-8"))
        config["model_args"].update(model_args)
        (staging / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        _save_random_xtts(config, staging)
        width = config["model_args"]["gpt_n_model_channels"]
        torch.save({"Random Speaker": _random_speakers(width)}, staging / "speakers_xtts.pth")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        torch.random.set_rng_state(generator_state)
        shutil.rmtree(staging, ignore_errors=True)
    return folder
