"""Speech recognition with word timestamps: the small :class:`Transcriber` protocol (so the pipeline can be
tested with a fake) and :class:`FasterWhisperTranscriber`, the real one (a local folder, the Hugging Face
cache, or a download; a clear reason when none works)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from utils.constants import PROJECT_ROOT

DEFAULT_LOCAL_MODELS_DIR = PROJECT_ROOT / "models" / "whisper"
WHISPER_SAMPLE_RATE = 16000
CTRANSLATE2_FILES = "model.bin, config.json, tokenizer.json and vocabulary.* (vocabulary.json or vocabulary.txt)"


# --------------------------------------------------------------------------------------------
# Transcriber interface
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """One recognised word; ``text`` has no surrounding whitespace, times are seconds from the
    start of the audio given to the transcriber."""

    text: str
    start: float
    end: float
    probability: float | None = None


@dataclass
class TranscriptionResult:
    language: str
    words: list[Word] = field(default_factory=list)


@runtime_checkable
class Transcriber(Protocol):
    def transcribe(self, wav: np.ndarray, sample_rate: int, language: str | None) -> TranscriptionResult:
        """Recognise mono float32 ``wav``; ``language=None`` means detect it."""
        ...


class TranscriberUnavailable(RuntimeError):
    """The speech recogniser's model cannot be found or loaded (message says where to put it)."""


def _env_offline() -> bool:
    # huggingface_hub reads HF_HUB_OFFLINE once at import; we read it at call time.
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _has_model_files(folder: Path) -> bool:
    return (
        (folder / "model.bin").is_file()
        and (folder / "config.json").is_file()
        and (folder / "tokenizer.json").is_file()
        and any(folder.glob("vocabulary.*"))
    )


def looks_like_path(name: str) -> bool:
    """Whether a Whisper model given as text is a folder (absolute, ./, ~, a/b/c, backslashes) rather than a
    size name ("small", "large-v3") or a Hub id ("owner/repo")."""
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or "\\" in name


class FasterWhisperTranscriber:
    """:class:`Transcriber` backed by faster-whisper (CTranslate2), loaded on first use.

    Model lookup, in order: ``model_name_or_dir`` as an existing folder; the folder
    ``local_models_dir/<name>/`` (default ``<repo>/models/whisper/<name>/``); the Hugging Face cache
    without network; then, unless ``HF_HUB_OFFLINE`` is set, a download via huggingface_hub into
    ``download_root`` (the HF cache when None). When none works, :class:`TranscriberUnavailable`
    names the local folder to put the model files in.
    """

    def __init__(
        self,
        model_name_or_dir: str | os.PathLike = "large-v3",
        device: str = "auto",
        compute_type: str = "auto",
        download_root: str | os.PathLike | None = None,
        *,
        local_models_dir: str | os.PathLike | None = None,
        cpu_threads: int = 0,
    ) -> None:
        self.model_name_or_dir = str(model_name_or_dir)
        self.device = device
        self.compute_type = compute_type
        self.download_root = None if download_root is None else str(download_root)
        # The models folder the page confines Whisper folders to ($XTTS_MODELS_DIR, as for the base models).
        models = os.environ.get("XTTS_MODELS_DIR")
        default = Path(models) / "whisper" if models else DEFAULT_LOCAL_MODELS_DIR
        self.local_models_dir = Path(local_models_dir) if local_models_dir is not None else default
        self.cpu_threads = cpu_threads
        self._model = None

    def _looks_like_path(self) -> bool:
        return looks_like_path(self.model_name_or_dir)

    def local_folder(self) -> Path:
        """The folder where this model is looked for (and named in errors)."""
        if self._looks_like_path():
            return Path(self.model_name_or_dir).expanduser()
        return self.local_models_dir / self.model_name_or_dir.rstrip("/").split("/")[-1]

    def _unavailable(self, why: str) -> TranscriberUnavailable:
        return TranscriberUnavailable(
            f"Whisper model {self.model_name_or_dir!r} is not available: {why}. "
            f"Put a CTranslate2 conversion of it in {self.local_folder()}/ "
            f"with the files {CTRANSLATE2_FILES} "
            f"(for example from https://huggingface.co/Systran/faster-whisper-{self.local_folder().name})."
        )

    def resolve_model_dir(self) -> str:
        """Find (or download) the model folder without loading the model."""
        if self._looks_like_path():  # a name is never looked up as a folder of the working directory
            direct = Path(self.model_name_or_dir).expanduser()
            if not direct.is_dir():
                raise self._unavailable(f"folder {direct} does not exist")
            if not _has_model_files(direct):
                raise self._unavailable(f"folder {direct} lacks some model files")
            return str(direct)
        local = self.local_folder()
        if _has_model_files(local):
            return str(local)

        from faster_whisper.utils import download_model  # heavy import, only when needed

        try:
            return download_model(self.model_name_or_dir, local_files_only=True, cache_dir=self.download_root)
        except ValueError as exc:  # not a known size nor an "owner/repo" id
            raise self._unavailable(str(exc)) from exc
        except Exception:  # noqa: BLE001 - not cached, whatever the reason: try the network below
            pass
        if _env_offline():
            raise self._unavailable("it is not on this machine and HF_HUB_OFFLINE forbids downloading it")
        try:
            return download_model(self.model_name_or_dir, cache_dir=self.download_root)
        except Exception as exc:  # no network, hub down, proxy, disk full...
            raise self._unavailable(f"download failed ({type(exc).__name__}: {exc})") from exc

    def _load(self):
        if self._model is None:
            path = self.resolve_model_dir()
            from faster_whisper import WhisperModel

            try:
                self._model = WhisperModel(
                    path, device=self.device, compute_type=self.compute_type, cpu_threads=self.cpu_threads
                )
            except (RuntimeError, ValueError, OSError) as exc:
                raise TranscriberUnavailable(f"could not load the Whisper model in {path}: {exc}") from exc
        return self._model

    @property
    def english_only(self) -> bool:
        """Whether the model transcribes English alone (a Whisper *.en model): other languages come out as English."""
        return not self._load().model.is_multilingual

    def transcribe(self, wav: np.ndarray, sample_rate: int, language: str | None) -> TranscriptionResult:
        model = self._load()
        audio = np.asarray(wav, dtype=np.float32)
        if sample_rate != WHISPER_SAMPLE_RATE:  # Whisper only takes 16 kHz
            import torch
            import torchaudio.functional as AF

            audio = AF.resample(torch.from_numpy(np.ascontiguousarray(audio)), sample_rate, WHISPER_SAMPLE_RATE).numpy()
        segments, info = model.transcribe(audio, language=language, word_timestamps=True, vad_filter=False)
        words = [
            Word(w.word.strip(), float(w.start), float(w.end), None if w.probability is None else float(w.probability))
            for seg in segments  # a generator: iterating runs the decoding
            for w in (seg.words or ())
            if w.word.strip()
        ]
        return TranscriptionResult(language=info.language, words=words)
