"""Turn long recordings of a user's speech into a clip dataset (wavs + ``metadata.csv``).

Pipeline: :func:`load_audio` -> :func:`split_on_silence` -> a :class:`Transcriber` on each speech
segment (word timestamps) -> :func:`segments_to_clips` (sentence-like clips cut on word
boundaries) -> 22.05 kHz mono wavs under ``out_dir/wavs/`` and ``out_dir/metadata.csv``.

The speech recogniser sits behind the small :class:`Transcriber` protocol so the pipeline can be
tested with a fake; :class:`FasterWhisperTranscriber` is the real one. Input recordings are only
read. An existing ``metadata.csv`` in ``out_dir`` is never overwritten: we refuse (ValueError).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from utils.audio.io import load_audio, write_wav
from utils.audio.segmentation import split_on_silence
from utils.constants import PROJECT_ROOT, XTTS_SAMPLE_RATE

DEFAULT_LOCAL_MODELS_DIR = PROJECT_ROOT / "models" / "whisper"
WHISPER_SAMPLE_RATE = 16000
# Segments handed to the recogniser stay under Whisper's 30 s window, so no segment straddles two
# windows; clips are then cut from the words, so segments may be longer than clips.
SEGMENT_MAX_S = 25.0
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
        self.local_models_dir = Path(local_models_dir) if local_models_dir is not None else DEFAULT_LOCAL_MODELS_DIR
        self.cpu_threads = cpu_threads
        self._model = None

    def _looks_like_path(self) -> bool:
        name = self.model_name_or_dir
        # "owner/repo" is a Hub id; anything more path-like is a folder the user meant.
        return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or "\\" in name

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
        direct = Path(self.model_name_or_dir).expanduser()
        if direct.is_dir():
            if not _has_model_files(direct):
                raise self._unavailable(f"folder {direct} lacks some model files")
            return str(direct)
        if self._looks_like_path():
            raise self._unavailable(f"folder {direct} does not exist")
        local = self.local_folder()
        if _has_model_files(local):
            return str(local)

        from faster_whisper.utils import download_model  # heavy import, only when needed

        try:
            return download_model(self.model_name_or_dir, local_files_only=True, cache_dir=self.download_root)
        except ValueError as exc:  # not a known size nor an "owner/repo" id
            raise self._unavailable(str(exc)) from exc
        except Exception:
            pass  # not cached: try the network below
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
                self._model = WhisperModel(path, device=self.device, compute_type=self.compute_type,
                                           cpu_threads=self.cpu_threads)
            except (RuntimeError, ValueError, OSError) as exc:
                raise TranscriberUnavailable(f"could not load the Whisper model in {path}: {exc}") from exc
        return self._model

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


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------

# Full stops that end a sentence wherever they are (no space follows in CJK text):
# CJK 。！？． ; Ethiopic ። ፧ ፨ (፣ is a comma) ; Arabic ؟ ; Urdu ۔ ; Devanagari । ॥
_ENDS_ALWAYS = "。！？．።፧፨؟۔।॥"
# Latin-style ends only count before whitespace or the end of the text (so 3.5, a.m.x do not).
_ENDS_LATIN = ".!?…"
_ENDS = _ENDS_ALWAYS + _ENDS_LATIN
# Closing quotes and brackets stay with the sentence they close.
_CLOSERS = "\"'”’»)]}」』）》〉›"
_OPENERS = "\"'“‘«([{「『（《〈‹¿¡"
# Tokens (lower case, without their final ".") after which a "." does not end a sentence.
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "e.g", "i.e", "cf", "fig", "approx",
    "dept", "gen", "gov", "lt", "col", "sgt", "capt", "rev", "hon", "mt",
})


def _is_abbreviation(token: str) -> bool:
    return token.strip(_OPENERS).rstrip(".").lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping each end mark (and closing quotes) with its sentence.

    Ends: ``. ! ? …`` (Latin: only before whitespace or the end, and ``.`` not after an
    abbreviation such as Mr. / Dr. / e.g., so decimals like 3.5 stay whole), and anywhere:
    ``。 ！ ？ ．`` (CJK), ``። ፧ ፨`` (Ethiopic), ``؟ ۔`` (Arabic/Urdu), ``। ॥`` (Devanagari).
    ``;``, ``:``, ``,`` and Ethiopic ``፣`` are not ends. Empty pieces are dropped.
    """
    out: list[str] = []
    start = i = 0
    n = len(text)
    while i < n:
        if text[i] not in _ENDS:
            i += 1
            continue
        j = i + 1
        while j < n and (text[j] in _ENDS or text[j] in _CLOSERS):  # "?!", "...", '."'
            j += 1
        run = text[i:j]
        if any(c in _ENDS_ALWAYS for c in run):
            is_end = True
        elif j < n and not text[j].isspace():
            is_end = False  # 3.5, example.com, e.g.x
        elif run.rstrip(_CLOSERS) == ".":
            before = text[start:i].split()
            is_end = not (before and _is_abbreviation(before[-1]))
        else:
            is_end = True
        if is_end:
            piece = text[start:j].strip()
            if piece:
                out.append(piece)
            start = j
        i = j
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def ends_sentence(word: str) -> bool:
    """Whether a recognised word closes a sentence (same rules as :func:`split_sentences`)."""
    w = word.strip().rstrip(_CLOSERS)
    if not w or w[-1] not in _ENDS:
        return False
    if w[-1] in _ENDS_ALWAYS or w[-1] != ".":
        return True
    return not _is_abbreviation(w)


def _no_space_char(ch: str) -> bool:
    # Scripts written without spaces between words: Han, kana, CJK punctuation, full-width forms,
    # Thai, Lao, Myanmar, Khmer.
    o = ord(ch)
    return (0x3000 <= o <= 0x30FF or 0x3400 <= o <= 0x4DBF or 0x4E00 <= o <= 0x9FFF
            or 0xF900 <= o <= 0xFAFF or 0xFF00 <= o <= 0xFFEF or 0x0E00 <= o <= 0x0EFF
            or 0x1000 <= o <= 0x109F or 0x1780 <= o <= 0x17FF)


def join_words(texts: Iterable[str]) -> str:
    """Join words with spaces, except next to scripts written without spaces (CJK, Thai...)."""
    out = ""
    for t in texts:
        t = t.strip()
        if not t:
            continue
        if out and not (_no_space_char(out[-1]) or _no_space_char(t[0])):
            out += " "
        out += t
    return out


# --------------------------------------------------------------------------------------------
# Clips
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Clip:
    """Samples ``[start, end)`` of the audio given to :func:`segments_to_clips`, and its text."""

    start: int
    end: int
    text: str


def segments_to_clips(
    wav: np.ndarray,
    sr: int,
    words: Sequence[Word],
    *,
    min_clip_s: float = 1.0,
    max_clip_s: float = 11.0,
    pad_s: float = 0.1,
) -> list[Clip]:
    """Group timed words into sentence-like clips of ``min_clip_s..max_clip_s`` seconds (padded).

    A word ending a sentence closes the clip once the clip's words span at least ``min_clip_s``.
    When the next word would make the padded clip longer than ``max_clip_s``, the clip is closed
    at its last sentence end, or failing that at the last word that fits. Clips shorter than
    ``min_clip_s`` are merged with the adjacent clip across the shorter pause when the result
    fits, else dropped; a single word longer than the maximum is dropped. Clips start and end on
    word boundaries plus ``pad_s``, never past the midpoint of the pause to the neighbouring word
    (so never into its time) and never outside the signal.
    """
    if not 0 < min_clip_s < max_clip_s - 2 * pad_s:
        raise ValueError("need 0 < min_clip_s < max_clip_s - 2 * pad_s")
    n = len(wav)
    ws = sorted((w for w in words if w.text.strip() and w.end >= w.start), key=lambda w: w.start)
    max_span = max_clip_s - 2 * pad_s  # room for the padding on both sides

    def span(a: int, b: int) -> float:
        return ws[b].end - ws[a].start

    groups: list[list[int]] = []
    cur: list[int] = []
    for i, w in enumerate(ws):
        if w.end - w.start > max_span:  # a "word" this long is a recognition error
            if cur:
                groups.append(cur)
                cur = []
            groups.append([])  # marks the gap: clips are never merged across a dropped word
            continue
        while cur and w.end - ws[cur[0]].start > max_span:
            ends = [k for k, idx in enumerate(cur) if ends_sentence(ws[idx].text)]
            cut = ends[-1] + 1 if ends else len(cur)
            groups.append(cur[:cut])
            cur = cur[cut:]
        cur.append(i)
        if ends_sentence(w.text) and span(cur[0], i) >= min_clip_s:
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)

    # Merge or drop the short ones. Empty groups stand for dropped words: they block merging.
    while True:
        short = [g for g, grp in enumerate(groups) if grp and span(grp[0], grp[-1]) < min_clip_s]
        if not short:
            break
        g = short[0]
        grp = groups[g]
        options = []
        if g > 0 and groups[g - 1]:
            options.append((ws[grp[0]].start - ws[groups[g - 1][-1]].end, g - 1))
        if g + 1 < len(groups) and groups[g + 1]:
            options.append((ws[groups[g + 1][0]].start - ws[grp[-1]].end, g + 1))
        for _, h in sorted(options):
            merged = sorted(groups[h] + grp)
            if span(merged[0], merged[-1]) <= max_span:
                groups[min(g, h)] = merged
                del groups[max(g, h)]
                break
        else:
            groups[g] = []  # too short and cannot be merged: dropped (its audio unused)

    clips = []
    for grp in groups:
        if not grp:
            continue
        a, b = grp[0], grp[-1]
        first, last = ws[a].start, ws[b].end
        lo = (ws[a - 1].end + first) / 2 if a > 0 else 0.0
        hi = (last + ws[b + 1].start) / 2 if b + 1 < len(ws) else n / sr
        start = max(0, math.ceil(max(first - pad_s, lo) * sr))
        end = min(n, math.floor(min(last + pad_s, hi) * sr))
        # Overlapping word times (recogniser jitter) must not push a clip inside its own words.
        start = min(start, max(0, round(first * sr)))
        end = max(end, min(n, round(last * sr)))
        if end > start:
            clips.append(Clip(start, end, join_words(ws[k].text for k in grp)))
    return clips


# --------------------------------------------------------------------------------------------
# Recordings -> dataset
# --------------------------------------------------------------------------------------------

ProgressFn = Callable[[int, int, str], None]


def _clean_field(text: str) -> str:
    # "|" separates columns and a newline would split the row: neither may appear in a field.
    return re.sub(r"\s+", " ", text.replace("|", " ")).strip()


def _stem(path: Path) -> str:
    return re.sub(r"[^\w.-]+", "_", path.stem).strip("._") or "recording"


def transcribe_recordings(
    audio_paths: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    transcriber: Transcriber,
    *,
    language: str | None = None,
    speaker_name: str = "speaker",
    progress: ProgressFn | None = None,
    min_clip_s: float = 1.0,
    max_clip_s: float = 11.0,
    pad_s: float = 0.1,
) -> Path:
    """Cut long recordings into transcribed clips; return the path of the new ``metadata.csv``.

    Writes ``out_dir/wavs/<recording>_<n>.wav`` (22.05 kHz mono 16-bit) and ``out_dir/metadata.csv``
    (``audio_file|text|speaker_name``, paths relative to ``out_dir``). ``progress(done, total,
    message)`` is called after each speech segment (total = segments of all recordings).

    Refuses with ValueError when ``out_dir/metadata.csv`` already exists (a user's dataset is
    never overwritten) or when ``out_dir`` or ``out_dir/wavs`` is a folder holding an input.
    Inputs are only read. If anything fails, the wavs written by this call are removed again.
    """
    paths = [Path(p).resolve() for p in audio_paths]
    out = Path(out_dir)
    metadata = out / "metadata.csv"
    if metadata.exists():
        raise ValueError(f"{metadata} already exists; choose an empty output folder (it is never overwritten)")
    if not speaker_name or _clean_field(speaker_name) != speaker_name:
        raise ValueError(f"speaker_name {speaker_name!r} must be non-empty without '|' or line breaks")
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(p)
        if p.parent in (out.resolve(), (out / "wavs").resolve()):
            raise ValueError(f"output folder {out} holds the input {p}; write the dataset somewhere else")

    # Pass 1: segment boundaries only, so progress can report a true total without keeping
    # every recording in memory at once.
    plans = []
    for p in paths:
        wav, sr = load_audio(p, XTTS_SAMPLE_RATE)
        plans.append(split_on_silence(wav, sr, min_segment_s=min_clip_s, max_segment_s=SEGMENT_MAX_S))
        del wav
    total = sum(len(segs) for segs in plans)

    wav_dir = out / "wavs"
    wav_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    rows: list[str] = []
    stems: set[str] = set()
    done = 0
    try:
        for r, (p, segs) in enumerate(zip(paths, plans)):
            stem = _stem(p)
            if stem in stems:  # two inputs called take.wav in different folders
                stem = f"{stem}_{r}"
            stems.add(stem)
            wav, sr = load_audio(p, XTTS_SAMPLE_RATE)
            n_clip = 0
            for k, seg in enumerate(segs):
                piece = wav[seg.start:seg.end]
                result = transcriber.transcribe(piece, sr, language)
                for clip in segments_to_clips(piece, sr, result.words, min_clip_s=min_clip_s,
                                              max_clip_s=max_clip_s, pad_s=pad_s):
                    text = _clean_field(clip.text)
                    if not text:
                        continue
                    n_clip += 1
                    name = f"{stem}_{n_clip:05d}.wav"
                    # write_wav refuses to replace an existing file.
                    written.append(write_wav(wav_dir / name, piece[clip.start:clip.end], sr, overwrite=False))
                    rows.append(f"wavs/{name}|{text}|{speaker_name}\n")
                done += 1
                if progress is not None:
                    progress(done, total, f"{p.name}: segment {k + 1}/{len(segs)}")
            del wav
        # "x": exclusive create, in case a metadata.csv appeared while we worked.
        with open(metadata, "x", encoding="utf-8", newline="\n") as f:
            f.write("audio_file|text|speaker_name\n")
            f.writelines(rows)
    except BaseException:
        for w in written:
            try:
                w.unlink()
            except FileNotFoundError:
                pass
        raise
    return metadata
