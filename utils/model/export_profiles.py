"""A fine-tuned voice exported in the layout each app that speaks XTTS v2 reads, so it loads there as it is.

A profile is a declared layout (`Profile`): the files an app reads, where it reads them, and what makes each one
(`MAKERS`: a file of ready/ copied, a file of the run's base model, or one written here: speakers_xtts.pth holding
the voice under its name, openedai-speech's voice_to_speaker.yaml entry, a README). `export_voice` writes one into
a new folder or zip (never over an existing file: a taken name gets -2, -3...) and says what will not carry over.

What each app reads, from its own code:

- coqui TTS 0.28 (`TTS.api.TTS`, `tts`, `tts-server`): `Xtts.load_checkpoint(checkpoint_dir)` reads model.pth,
  config.json (with the sampling settings `Xtts.synthesize` uses), vocab.json and speakers_xtts.pth; a speaker there
  is `speaker="<name>"` (`tts --speaker_idx`, tts-server's `POST /v1/audio/speech` `"voice"`).
- AllTalk v2 (system/tts_engines/xtts/model_engine.py): lists a model `models/xtts/<model>/` only with config.json,
  model.pth, mel_stats.pth, speakers_xtts.pth, vocab.json and dvae.pth; a voice is `voices/<name>.wav`; temperature
  and repetition penalty are its own settings, length penalty, top_k and top_p are config.json's.
- xtts-api-server 0.9.0 (tts_funcs.py): `--model-folder` / `--version <model>` loads `<model folder>/<model>/` with
  coqui's loader; a voice is `<speaker folder>/<name>.wav`; it samples with its fixed defaults (POST
  /set_tts_settings changes them while it runs).
- openedai-speech 0.18 (speech.py; README "Custom Fine-Tuned Model Support"): `voices/<name>/` with config.json,
  model.pth, vocab.json and sample.wav, and a `tts-1-hd` entry in config/voice_to_speaker.yaml whose keys besides
  model, speaker, model_path, language and comment are passed to XTTS's inference.
- ebook2audiobook (lib/core.py extract_custom_model, lib/conf_models.py): a zip holding config.json, model.pth,
  vocab.json and ref.wav, named as the model; it samples with its own settings.
- Auralis (src/auralis/models/xttsv2/utils/checkpoint_converter.py): converts a model.pth holding "model" and a
  "config" (without one it fails: 'NoneType' object has no attribute 'get'); its tokenizer comes from its hub copy of
  XTTS v2.0.3 (6681 text tokens), so only a voice with that vocabulary speaks right; it samples per request.

None of them applies this product's text front end (a new language, the Amharic normalisation and G2P): the notes
say so, for a voice that has one.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from utils.constants import XTTS_LANGUAGES
from utils.files import atomic_output, check_write_target, copy_file_atomic, read_json, write_text_atomic
from utils.model import sampling
from utils.model.base_models import (
    HF_REPO,
    TINY,
    check_version_name,
    ensure_base_model,
    models_root,
)
from utils.model.ready import (
    FINETUNE_FILE,
    READY_DIR,
    REFERENCE_WAV,
    read_finetune_info,
    read_inference_settings,
    ready_config,
)
from utils.model.references import voice_references
from utils.model.speaker_latents import coqui_xtts, latents_of
from utils.text.frontend import TextFrontEnd
from utils.text.visible import clipped, visible

DEFAULT_PROFILE = "coqui"
EXPORTS_DIR = "exports"
# Auralis's converter takes its tokenizer from its hub copy of XTTS v2.0.3; v2.0.2's vocabulary has 6153.
AURALIS_TEXT_TOKENS = 6681
MAX_NAME_LENGTH = 64
_NAME = re.compile(r"\w[\w .-]*")
_WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}


@dataclass(frozen=True)
class Part:
    """One file of a layout: where it goes (`{name}` is the voice's name) and which maker (`MAKERS`) makes it."""

    path: str
    make: str


@dataclass(frozen=True)
class Sampling:
    """Where an app takes its sampling settings from, when not from config.json: its own `values` (of those
    settings), and `where` a user gives it the voice's."""

    values: dict[str, float | int] = field(default_factory=dict)
    where: str = ""


@dataclass(frozen=True)
class Profile:
    """A declared layout for one app (or, for `all`, for every app at once)."""

    key: str
    app: str
    parts: tuple[Part, ...]
    usage: str  # how to use it: {name}, {language} and {folder} (the export's name) filled in
    sampling: Sampling = Sampling()
    zip: bool = False  # written as a zip unless asked otherwise
    nest_zip: bool = True  # a zip's files under one folder named as the export, or at its top (flat)
    covers: tuple[str, ...] = ()  # the profiles whose notes apply (`all`: every app's)
    needs_text_tokens: int | None = None  # Auralis: the vocabulary size its tokenizer has


def _voice_files(model: str = "model") -> tuple[Part, ...]:
    return (Part("model.pth", model), Part("config.json", "config"), Part("vocab.json", "vocab"))


_COQUI_USAGE = (
    'coqui TTS: TTS(model_path="{folder}", config_path="{folder}/config.json").tts(text, speaker="{name}", '
    'language="{language}"); or tts-server --model_path "{folder}" --config_path "{folder}/config.json" '
    '--language_idx {language}, then POST /v1/audio/speech {{"voice": "{name}", "input": "..."}}; or tts --model_path '
    '"{folder}" --config_path "{folder}/config.json" --speaker_idx "{name}" --language_idx {language} --text "...". '
    "This product's utils.model.inference.synthesize reads the folder too (its finetune.json holds the text front "
    "end)."
)
_ALLTALK_USAGE = (
    "AllTalk v2: copy models/xtts/{name}/ into AllTalk's models/xtts/ and voices/{name}.wav into its voices/, restart "
    'it, pick the model "xtts - {name}" and the voice {name}.wav, language {language}.'
)
_XTTS_API_USAGE = (
    'xtts-api-server: python -m xtts_api_server --model-folder xtts_models --version "{name}" --speaker-folder '
    'speakers (from this folder, or copy both into its own), then POST /tts_to_audio/ {{"text": "...", '
    '"speaker_wav": "{name}", "language": "{language}"}} (SillyTavern: the voice {name}).'
)
_OPENEDAI_USAGE = (
    "openedai-speech: copy voices/{name}/ into its voices/ and add the entry of voices/{name}/voice_to_speaker.yaml "
    'under tts-1-hd: in its config/voice_to_speaker.yaml, then ask model "tts-1-hd", voice "{name}".'
)
_EBOOK_USAGE = (
    "ebook2audiobook: give this zip as the custom XTTS model (the GUI's upload, or --tts_engine XTTS --custom_model "
    "{folder}.zip); it names the model and the voice after the zip."
)
_AURALIS_USAGE = (
    "Auralis: python checkpoint_converter.py {folder}/model.pth --output_dir {name}-auralis (its "
    "src/auralis/models/xttsv2/utils/checkpoint_converter.py), then "
    'TTS().from_pretrained("{name}-auralis/core_xttsv2", gpt_model="{name}-auralis/gpt") and requests with '
    'speaker_files=["{folder}/reference.wav"], language "{language}".'
)

PROFILES: dict[str, Profile] = {
    profile.key: profile
    for profile in (
        Profile(
            "coqui",
            "coqui TTS (TTS.api, tts, tts-server)",
            (
                *_voice_files(),
                Part("speakers_xtts.pth", "speakers"),
                Part(REFERENCE_WAV, "reference"),
                Part(FINETUNE_FILE, "finetune"),
                Part("README.txt", "readme"),
            ),
            _COQUI_USAGE,
        ),
        Profile(
            "alltalk",
            "AllTalk v2",
            (
                *(Part(f"models/xtts/{{name}}/{part.path}", part.make) for part in _voice_files()),
                Part("models/xtts/{name}/speakers_xtts.pth", "speakers"),
                Part("models/xtts/{name}/dvae.pth", "dvae"),
                Part("models/xtts/{name}/mel_stats.pth", "mel_stats"),
                Part("models/xtts/{name}/README.txt", "readme"),
                Part("voices/{name}.wav", "reference"),
            ),
            _ALLTALK_USAGE,
            Sampling(
                {"temperature": 0.75, "repetition_penalty": 10.0},
                "AllTalk's XTTS settings (or each request's temperature and repetition_penalty)",
            ),
            nest_zip=False,
        ),
        Profile(
            "xtts-api-server",
            "xtts-api-server 0.9.0 (SillyTavern)",
            (
                *(Part(f"xtts_models/{{name}}/{part.path}", part.make) for part in _voice_files()),
                Part("xtts_models/{name}/README.txt", "readme"),
                Part("speakers/{name}.wav", "reference"),
            ),
            _XTTS_API_USAGE,
            Sampling(
                sampling.defaults(),
                "POST /set_tts_settings after each start (it accepts temperature up to 1, repetition_penalty up to "
                "10 and top_k up to 100)",
            ),
            nest_zip=False,
        ),
        Profile(
            "openedai-speech",
            "openedai-speech",
            (
                *(Part(f"voices/{{name}}/{part.path}", part.make) for part in _voice_files()),
                Part("voices/{name}/sample.wav", "reference"),
                Part("voices/{name}/voice_to_speaker.yaml", "openedai_yaml"),
                Part("voices/{name}/README.txt", "readme"),
            ),
            _OPENEDAI_USAGE,
            nest_zip=False,
        ),
        Profile(
            "ebook2audiobook",
            "ebook2audiobook",
            (*_voice_files(), Part("ref.wav", "reference"), Part("README.txt", "readme")),
            _EBOOK_USAGE,
            Sampling(
                {"temperature": 0.75, "length_penalty": 1.0, "repetition_penalty": 2.0, "top_k": 40, "top_p": 0.95},
                "its XTTS settings (the GUI's sliders, or --temperature, --length_penalty, --repetition_penalty, "
                "--top_k and --top_p)",
            ),
            zip=True,
            nest_zip=False,
        ),
        Profile(
            "auralis",
            "Auralis",
            (
                *_voice_files("model_with_config"),
                Part(REFERENCE_WAV, "reference"),
                Part("README.txt", "readme"),
            ),
            _AURALIS_USAGE,
            Sampling(sampling.defaults(), "each TTSRequest (temperature=..., top_p=..., top_k=...)"),
            needs_text_tokens=AURALIS_TEXT_TOKENS,
        ),
    )
}
# One folder that is every layout at once where the apps allow it: coqui's folder, AllTalk's and xtts-api-server's
# model folder (dvae.pth, mel_stats.pth; its voice in speakers/), openedai-speech's voice folder (sample.wav and the
# yaml entry), the four files ebook2audiobook takes from a zip (ref.wav), and a model.pth Auralis's converter takes.
PROFILES["all"] = Profile(
    "all",
    "every app at once",
    (
        *_voice_files("model_with_config"),
        Part("speakers_xtts.pth", "speakers"),
        Part("dvae.pth", "dvae"),
        Part("mel_stats.pth", "mel_stats"),
        Part(REFERENCE_WAV, "reference"),
        Part("ref.wav", "reference"),
        Part("sample.wav", "reference"),
        Part("speakers/{name}.wav", "reference"),
        Part("voice_to_speaker.yaml", "openedai_yaml"),
        Part(FINETUNE_FILE, "finetune"),
        Part("README.txt", "readme"),
    ),
    "\n".join(
        [
            "This folder is the model folder of each app.",
            _COQUI_USAGE,
            "AllTalk v2: copy it to models/xtts/{name}/ and reference.wav to voices/{name}.wav.",
            'xtts-api-server: --model-folder <the folder holding this one> --version "{folder}" --speaker-folder '
            '"{folder}/speakers".',
            "openedai-speech: copy it to voices/{name}/ and add voice_to_speaker.yaml's entry under tts-1-hd:.",
            "ebook2audiobook: a zip of config.json, model.pth, vocab.json and ref.wav (the ebook2audiobook profile).",
            'Auralis: python checkpoint_converter.py "{folder}/model.pth" --output_dir "{name}-auralis".',
        ]
    ),
    covers=("coqui", "alltalk", "xtts-api-server", "openedai-speech", "ebook2audiobook", "auralis"),
    needs_text_tokens=AURALIS_TEXT_TOKENS,
)


def profile_choices() -> list[tuple[str, str]]:
    """(label, key) of each profile, for a picker."""
    return [(f"{profile.key}: {profile.app}", profile.key) for profile in PROFILES.values()]


@dataclass
class VoiceExport:
    """What `export_voice` wrote: `path` (a folder or a zip), the profile and the voice's name in it, the files
    (relative to the folder, or the zip's entries), `not_carried` (what the app will not get from the voice: its
    text front end, its tuned sampling settings, its vocabulary) and `usage` (how the app loads it)."""

    path: Path
    profile: str
    name: str
    files: list[str]
    not_carried: list[str]
    usage: str

    def summary(self) -> str:
        lines = [f"Exported the voice {self.name!r} for {PROFILES[self.profile].app} to {self.path}.", self.usage]
        if self.not_carried:
            lines += ["Will not carry over:", *(f"- {note}" for note in self.not_carried)]
        return "\n".join(lines)


def voice_name_from(run_name: str) -> str:
    """A safe voice name from a run's (folder's) name: letters, digits, '_', '-' and '.', at most 64 characters."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^\w.-]+|\.{2,}", "-", str(run_name)))
    slug = slug.strip("-._")[:MAX_NAME_LENGTH].strip("-._")
    try:
        return checked_voice_name(slug)
    except ValueError:
        return "voice"


def checked_voice_name(name: Any) -> str:
    """`name` as a voice name the apps use as a speaker, a file and a folder name, or a ValueError saying why not:
    letters (any script), digits, spaces, '_', '-' and '.', starting with a letter, digit or '_', not ending in a
    space or '.', no '..', at most 64 characters, not a name Windows reserves."""
    if not isinstance(name, str):
        raise ValueError(f"The voice name must be text (got {type(name).__name__}).")
    text = name.strip()
    said = clipped(visible(name), 80)
    if not text:
        raise ValueError("The voice name is empty.")
    if len(text) > MAX_NAME_LENGTH:
        raise ValueError(f"The voice name {said!r} is longer than {MAX_NAME_LENGTH} characters.")
    if not _NAME.fullmatch(text) or ".." in text or text.endswith("."):
        raise ValueError(
            f"The voice name {said!r} is not a plain name: use letters, digits, spaces, '_', '-' and '.' (no '/', "
            "'\\' or '..'), starting with a letter or digit; it names files and folders in the apps."
        )
    if text.split(".")[0].strip().lower() in _WINDOWS_RESERVED:
        raise ValueError(f"The voice name {said!r} is a name Windows reserves for a device; pick another.")
    return text


def _settings_said(values: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value:g}" for key, value in values.items())


def _front_end_note(frontend: TextFrontEnd, app: str) -> str | None:
    """What the voice's text front end means in an app that does not apply it, or None when it has none."""
    if frontend.language in XTTS_LANGUAGES and not frontend.amharic_g2p:
        return None
    what = (
        "the Amharic normalisation" + (" and G2P (text to phonemes)" if frontend.amharic_g2p else "")
        if frontend.language == "amh"
        else f"the new language {frontend.language!r}"
    )
    return (
        f"{app}: the voice's text front end ({what}) is this product's own. coqui's tokenizer, which reads the text "
        f"there, refuses language {frontend.language!r}, and text sent as another language reaches the model without "
        "that processing: it speaks wrongly, without an error. Only this product applies it "
        "(utils.model.inference.synthesize and its server)."
    )


def _lexicon_note(frontend: TextFrontEnd, app: str) -> str | None:
    """The voice's pronunciation lexicon in an app that does not apply it (none does), or None when it has none."""
    if not frontend.lexicon:
        return None
    entries = frontend.lexicon.to_records()
    shown = "; ".join(f"{e['term']} -> {e['respelling']}" for e in entries[:8]) + ("; ..." if len(entries) > 8 else "")
    return (
        f"{app}: the voice's pronunciation lexicon ({len(entries)} entries: {visible(shown)}) is applied only by this "
        "product (synthesize, the Test tab, its server). There, write the respellings into the text you send."
    )


def _references_note(ready: Path, apps: list[str]) -> str | None:
    """A voice of several reference clips in apps that take one clip: they get reference.wav, the first (the best)."""
    count = len(voice_references(ready))
    if count < 2 or not apps:
        return None
    return (
        f"{', '.join(apps)}: the voice is {count} reference clips; these apps take one, reference.wav (the first, "
        "chosen best). coqui's speakers_xtts.pth and this product use all of them."
    )


def _sampling_note(profile: Profile, values: dict[str, Any]) -> str | None:
    """The voice's sampling settings an app replaces by its own, with where to give them, or None."""
    own = profile.sampling.values
    differ = {key: values[key] for key in own if own[key] != values[key]}
    if not differ:
        return None
    return (
        f"{profile.app} samples with its own {_settings_said({key: own[key] for key in differ})}, not the voice's "
        f"{_settings_said(differ)} (its config.json); give it the voice's in {profile.sampling.where}."
    )


def _vocabulary_note(profile: Profile, text_tokens: int, base_version: str) -> str | None:
    if profile.needs_text_tokens is None or text_tokens == profile.needs_text_tokens:
        return None
    return (
        f"Auralis: its converter takes the tokenizer of XTTS v2.0.3 ({profile.needs_text_tokens} text tokens); this "
        f"voice has {text_tokens} (base {base_version or 'unknown'}), so it will not speak right there: train from "
        "v2.0.3 (or main) without new tokens for Auralis."
    )


@dataclass
class _Voice:
    """The voice being exported: its ready/ folder, name and records, and what the makers share (computed once)."""

    ready: Path
    name: str
    run_name: str
    info: dict[str, Any]
    frontend: TextFrontEnd
    settings: dict[str, Any]
    setting_problems: list[str]
    base_version: str
    models_dir: str | None
    base_folder: Path | None = None
    base_problem: str | None = None
    readme: str = ""  # the export's README.txt, set once the export's name is known

    @property
    def language(self) -> str:
        return self.frontend.language

    def base_file(self, file_name: str) -> Path:
        """A file of the run's base model folder (dvae.pth, mel_stats.pth), or a ValueError naming where it is
        missing and where to get it."""
        if self.base_folder is not None and (self.base_folder / file_name).is_file():
            return self.base_folder / file_name
        raise ValueError(self.base_problem or f"{file_name} is not in the base model folder {self.base_folder}.")


def _find_base_folder(voice: _Voice, run_record: dict[str, Any]) -> None:
    """Where the run's base model files are: run.json's base_model folder, else <models_dir>/<version> (the tiny
    one is built when missing). Nothing is downloaded: an export never fetches a model."""
    needed = ("dvae.pth", "mel_stats.pth")
    recorded = run_record.get("base_model") if isinstance(run_record.get("base_model"), dict) else {}
    candidates = [Path(recorded["folder"])] if isinstance(recorded.get("folder"), str) else []
    version = voice.base_version
    try:
        check_version_name(version, voice.models_dir)
        if version == TINY:
            candidates.append(ensure_base_model(TINY, voice.models_dir).folder)
        else:
            candidates.append(models_root(voice.models_dir) / version)
    except (ValueError, OSError):
        pass
    for folder in candidates:
        if all((folder / name).is_file() for name in needed):
            voice.base_folder = folder
            return
    where = (
        "in " + " or ".join(str(folder) for folder in dict.fromkeys(candidates))
        if candidates
        else "found: the run records no base model folder, and none of that version is installed"
    )
    voice.base_problem = (
        f"AllTalk needs dvae.pth and mel_stats.pth of the run's base model ({version or 'unknown'}), which are not "
        f"{where}. Put them there (from https://huggingface.co/{HF_REPO}, branch main)."
    )


def _voice(run_or_ready: str | os.PathLike, name: str | None, needs_base: bool) -> _Voice:
    from utils.model.inference import find_ready_dir

    ready = find_ready_dir(run_or_ready)
    if not (ready / REFERENCE_WAV).is_file():
        raise ValueError(f"{clipped(ready)} has no {REFERENCE_WAV}: the voice's reference clip is needed to export it.")
    info = read_finetune_info(ready)
    run_name = ready.parent.name if ready.name == READY_DIR else ready.name
    voice_name = checked_voice_name(name) if name is not None and str(name).strip() else voice_name_from(run_name)
    run_record = read_json(ready.parent / "run.json", {}) if ready.name == READY_DIR else {}
    run_record = run_record if isinstance(run_record, dict) else {}
    arguments = run_record.get("arguments") if isinstance(run_record.get("arguments"), dict) else {}
    frontend = TextFrontEnd.from_dict(info.get("text_frontend"), info.get("language", "en"))
    read = read_inference_settings(ready)
    voice = _Voice(
        ready=ready,
        name=voice_name,
        run_name=run_name,
        info=info,
        frontend=frontend,
        settings=read.values,
        setting_problems=list(read.problems.values()),
        base_version=str(info.get("base_version") or arguments.get("version") or ""),
        models_dir=arguments.get("models_dir") or None,
    )
    if needs_base:
        _find_base_folder(voice, run_record)
    return voice


@functools.lru_cache(maxsize=4)
def _cached_latents(
    model: str, references: tuple[str, ...], config_path: str, stamps: tuple[int, ...]
) -> dict[str, torch.Tensor]:
    """The voice of its `references` (one clip or several, which coqui combines) as coqui computes it for
    `speaker_wav=`: the model's own get_conditioning_latents
    with config.json's gpt_cond_len, gpt_cond_chunk_len, max_ref_len and sound_norm_refs (Xtts.synthesize passes
    those). Cached by the files' sizes and times: exporting a voice for several apps loads the model once."""
    xtts, config = coqui_xtts(Path(model).parent, model)
    return latents_of(xtts, config, references)


def voice_latents(ready: Path) -> dict[str, torch.Tensor]:
    """The voice of its reference clips (reference.wav and the others ready/finetune.json lists: all of them, as
    synthesize uses them) as coqui's speakers_xtts.pth holds a speaker (see _cached_latents)."""
    clips = voice_references(ready)
    files = (ready / "model.pth", *clips, ready / "config.json")
    stamps = tuple(value for file in files for value in (file.stat().st_size, file.stat().st_mtime_ns))
    model, config = str((ready / "model.pth").resolve()), str((ready / "config.json").resolve())
    return _cached_latents(model, tuple(str(clip.resolve()) for clip in clips), config, stamps)


# The makers: each writes one file of a layout to `target` from the voice (or names the file to copy as it is).
Maker = Callable[[_Voice, Path], Path]


def _copy_of(file_name: str) -> Maker:
    return lambda voice, target: voice.ready / file_name


def _make_config(voice: _Voice, target: Path) -> Path:
    # ready/config.json with every sampling setting valid (coqui's loader fails on a NaN top_k); as it is otherwise.
    write_text_atomic(target, json.dumps(ready_config(voice.ready), indent=2, ensure_ascii=False) + "\n")
    return target


def _make_model_with_config(voice: _Voice, target: Path) -> Path:
    checkpoint = torch.load(str(voice.ready / "model.pth"), map_location="cpu", weights_only=True, mmap=True)
    with atomic_output(target) as handle:
        torch.save({"model": checkpoint.get("model", checkpoint), "config": ready_config(voice.ready)}, handle)
    return target


def _make_speakers(voice: _Voice, target: Path) -> Path:
    """ready/speakers_xtts.pth (the base model's speakers, where it has them) with the voice added under its name."""
    source = voice.ready / "speakers_xtts.pth"
    speakers = torch.load(str(source), map_location="cpu", weights_only=True) if source.is_file() else {}
    speakers[voice.name] = voice_latents(voice.ready)
    with atomic_output(target) as handle:
        torch.save(speakers, handle)
    return target


def openedai_entry(voice_name: str, language: str, settings: dict[str, Any], comment: str) -> dict[str, Any]:
    """openedai-speech's voice_to_speaker.yaml entry of a fine-tuned voice in voices/<name>/ (its README's
    "Custom Fine-Tuned Model Support"), carrying the voice's sampling settings (passed to XTTS's inference)."""
    return {
        "tts-1-hd": {
            voice_name: {
                "model": voice_name,
                "speaker": f"voices/{voice_name}/sample.wav",
                "model_path": f"voices/{voice_name}",
                "language": language,
                **{key: settings[key] for key in sampling.CONFIG_KEYS},
                "comment": comment,
            }
        }
    }


def _make_openedai_yaml(voice: _Voice, target: Path) -> Path:
    import yaml

    entry = openedai_entry(voice.name, voice.language, voice.settings, f"fine-tuned XTTS voice (run {voice.run_name})")
    text = (
        "# Add this entry under tts-1-hd: in openedai-speech's config/voice_to_speaker.yaml, with this folder as\n"
        f"# voices/{voice.name}/.\n" + yaml.safe_dump(entry, sort_keys=False, allow_unicode=True)
    )
    write_text_atomic(target, text)
    return target


def _make_readme(voice: _Voice, target: Path) -> Path:
    write_text_atomic(target, voice.readme)
    return target


# The files of the run's base model an export takes (AllTalk's), by maker.
_BASE_FILES = {"dvae": "dvae.pth", "mel_stats": "mel_stats.pth"}

MAKERS: dict[str, Maker] = {
    "model": _copy_of("model.pth"),
    "model_with_config": _make_model_with_config,
    "config": _make_config,
    "vocab": _copy_of("vocab.json"),
    "speakers": _make_speakers,
    "reference": _copy_of(REFERENCE_WAV),
    "finetune": _copy_of(FINETUNE_FILE),
    **{
        maker: (lambda file_name: lambda voice, target: voice.base_file(file_name))(name)
        for maker, name in _BASE_FILES.items()
    },
    "openedai_yaml": _make_openedai_yaml,
    "readme": _make_readme,
}


def _text_tokens(voice: _Voice) -> int:
    config = read_json(voice.ready / "config.json", {})
    args = config.get("model_args") if isinstance(config, dict) else None
    return int(args.get("gpt_number_text_tokens", 0)) if isinstance(args, dict) else 0


def _not_carried(voice: _Voice, profile: Profile, left_out: list[str]) -> list[str]:
    """What `profile`'s apps will not get from the voice, one plain sentence each."""
    notes = list(voice.setting_problems)
    apps = [PROFILES[key] for key in profile.covers] or [profile]
    if note := _front_end_note(voice.frontend, ", ".join(app.app for app in apps)):
        notes.append(note)
    if note := _lexicon_note(voice.frontend, ", ".join(app.app for app in apps)):
        notes.append(note)
    notes += [note for app in apps if (note := _sampling_note(app, voice.settings))]
    tokens = _text_tokens(voice)
    notes += [note for app in apps if (note := _vocabulary_note(app, tokens, voice.base_version))]
    if note := _references_note(voice.ready, [app.app for app in apps if app.key != "coqui"]):
        notes.append(note)
    if left_out:
        notes.append(f"{', '.join(left_out)} left out: {voice.base_problem}")
    return notes


def _readme(voice: _Voice, profile: Profile, usage: str, notes: list[str]) -> str:
    lines = [
        f"Voice {voice.name!r} (fine-tuned XTTS v2, run {voice.run_name}, base {voice.base_version or 'unknown'}, "
        f"language {voice.language}), exported for {profile.app}.",
        "",
        usage,
        "",
        "Sampling settings chosen for this voice (config.json): " + _settings_said(voice.settings) + ".",
    ]
    if notes:
        lines += ["", "Will not carry over:", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def _free_target(dest: Path, name: str, suffix: str) -> Path:
    """The first of dest/<name><suffix>, dest/<name>-2<suffix>... that nothing holds, reserved (an empty folder or
    file created exclusively), so that no export, however concurrent, writes over anything."""
    for number in range(1, 1000):
        target = dest / f"{name}{'' if number == 1 else f'-{number}'}{suffix}"
        try:
            if suffix:
                os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            else:
                target.mkdir()
        except FileExistsError:
            continue
        return target
    raise ValueError(f"{dest} already holds {name}{suffix} and 998 numbered copies; give another name or folder.")


def export_voice(
    run_or_ready: str | os.PathLike,
    profile: str = DEFAULT_PROFILE,
    dest: str | os.PathLike | None = None,
    name: str | None = None,
    *,
    archive: bool | None = None,
) -> VoiceExport:
    """Export a run's voice (its run folder, its ready/ folder, or a model.pth in it) in the layout `profile`'s app
    reads (PROFILES: coqui, alltalk, xtts-api-server, openedai-speech, ebook2audiobook, auralis, all), under the
    voice's `name` (default: a safe form of the run's name; one of the base model's speakers is refused).

    Written into `dest` (default: <the runs' folder>/exports/<profile>) as a new folder, or a zip with `archive`
    (default: the profile's, a zip for ebook2audiobook): never over anything there (a taken name gets -2, -3...),
    and all at once (a failed export leaves nothing). Returns a VoiceExport: the path, the files, how the app loads
    it, and what will not carry over (a text front end only this product applies, sampling settings the app takes
    from itself, a vocabulary Auralis cannot read)."""
    if profile not in PROFILES:
        raise ValueError(f"Unknown export profile {clipped(visible(profile), 60)!r}: use one of {', '.join(PROFILES)}.")
    chosen = PROFILES[profile]
    voice = _voice(run_or_ready, name, needs_base=any(part.make in _BASE_FILES for part in chosen.parts))
    needs_speakers = any(part.make == "speakers" for part in chosen.parts)
    base_speakers = voice.ready / "speakers_xtts.pth"
    if needs_speakers and base_speakers.is_file():
        taken = torch.load(str(base_speakers), map_location="cpu", weights_only=True)
        if voice.name in taken:
            raise ValueError(
                f"{voice.name!r} is one of the base model's speakers in speakers_xtts.pth: give the voice another name."
            )
    parts, left_out = list(chosen.parts), []
    for part in chosen.parts:
        if part.make in _BASE_FILES and voice.base_problem:
            if profile != "all":
                raise ValueError(voice.base_problem)
            parts.remove(part)  # `all`: every layout where possible; AllTalk's two files are not
            left_out.append(part.path)
    zipped = chosen.zip if archive is None else bool(archive)
    runs = voice.ready.parent.parent if voice.ready.name == READY_DIR else voice.ready.parent
    folder = Path(dest) if dest is not None else runs / EXPORTS_DIR / profile
    check_write_target(folder / voice.name)
    folder.mkdir(parents=True, exist_ok=True)
    notes = _not_carried(voice, chosen, left_out)
    target = _free_target(folder, voice.name, ".zip" if zipped else "")
    export_name = target.name.removesuffix(".zip")
    usage = chosen.usage.format(name=voice.name, language=voice.language, folder=export_name)
    voice.readme = _readme(voice, chosen, usage, notes)
    work = Path(tempfile.mkdtemp(prefix=f".{export_name}.", suffix=".tmp", dir=folder))
    try:
        made = work / "made"
        contents = _make_parts(voice, parts, made)
        if zipped:
            root = f"{export_name}/" if chosen.nest_zip else ""
            with atomic_output(target) as handle, zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as zf:
                for relative, source in contents.items():
                    zf.write(source, arcname=root + relative)
            files = [root + relative for relative in contents]
        else:
            tree = work / "tree"
            for relative, source in contents.items():
                (tree / relative).parent.mkdir(parents=True, exist_ok=True)
                if made in source.parents:
                    os.replace(source, tree / relative)
                else:
                    copy_file_atomic(source, tree / relative)
            os.replace(tree, target)  # over the empty folder reserved for it
            files = list(contents)
    except BaseException:
        if zipped:
            target.unlink(missing_ok=True)
        else:
            shutil.rmtree(target, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return VoiceExport(target, profile, voice.name, files, notes, usage)


def _make_parts(voice: _Voice, parts: list[Part], scratch: Path) -> dict[str, Path]:
    """{relative path in the export: the file holding its content} of each part (a made file lands in `scratch`)."""
    contents: dict[str, Path] = {}
    for index, part in enumerate(parts):
        relative = part.path.format(name=voice.name)
        made = scratch / f"{index}-{Path(relative).name}"
        made.parent.mkdir(parents=True, exist_ok=True)
        contents[relative] = MAKERS[part.make](voice, made)
    return contents
