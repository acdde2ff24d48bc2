"""Long recordings of a user's speech turned into a clip dataset (wavs + ``metadata.csv``).

Pipeline: :func:`load_audio` -> :func:`split_on_silence` -> a :class:`Transcriber` on each speech segment
(word timestamps) -> :func:`segments_to_clips` (sentence-like clips cut on word boundaries) -> 22.05 kHz mono
wavs under ``out_dir/wavs/`` and ``out_dir/metadata.csv``. Input recordings are only read. An existing
``metadata.csv`` in ``out_dir`` is never overwritten: we refuse (ValueError).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from utils.audio.io import AudioError, load_audio, write_wav
from utils.audio.segmentation import Segment, split_on_silence
from utils.constants import XTTS_SAMPLE_RATE
from utils.data.clips import segments_to_clips
from utils.data.csv_text import coqui_field
from utils.data.prepare import HEADER
from utils.data.transcription import Transcriber
from utils.files import check_write_target, write_text_atomic

# Segments handed to the recogniser stay under Whisper's 30 s window, so no segment straddles two
# windows; clips are then cut from the words, so segments may be longer than clips.
SEGMENT_MAX_S = 25.0

ProgressFn = Callable[[int, int, str], None]


def _stem(path: Path) -> str:
    return re.sub(r"[^\w.-]+", "_", path.stem).strip("._") or "recording"


def _check_outputs(paths: list[Path], out: Path, speaker_name: str) -> None:
    if (out / "metadata.csv").exists():
        raise ValueError(
            f"{out / 'metadata.csv'} already exists; choose an empty output folder (it is never overwritten)"
        )
    if not speaker_name or coqui_field(speaker_name) != speaker_name:
        raise ValueError(f"speaker_name {speaker_name!r} must be non-empty without '|' or line breaks")
    for p in paths:
        if not p.is_file():
            raise ValueError(f"Recording not found: {p}. Upload it again.")
        if p.parent in (out.resolve(), (out / "wavs").resolve()):
            raise ValueError(f"output folder {out} holds the input {p}; write the dataset somewhere else")


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
    _check_outputs(paths, out, speaker_name)
    check_write_target(out / "wavs" / "clip.wav")  # neither out/ nor out/wavs a link out of its folder
    # Pass 1: segment boundaries only, so progress reports a true total without every recording in memory.
    plans = []
    for p in paths:
        wav, sr = _load_recording(p)
        plans.append(split_on_silence(wav, sr, min_segment_s=min_clip_s, max_segment_s=SEGMENT_MAX_S))
        del wav
    if not any(plans):
        names = ", ".join(p.name for p in paths[:5])
        raise ValueError(
            f"No speech found in {names}: silence or too quiet throughout, so no clip was made and nothing was "
            "written. Upload recordings of speech."
        )
    writer = _ClipWriter(out / "wavs", speaker_name, sum(len(segs) for segs in plans), progress)
    try:
        stems: set[str] = set()
        for r, (p, segs) in enumerate(zip(paths, plans, strict=True)):
            stem = _stem(p) if _stem(p) not in stems else f"{_stem(p)}_{r}"  # two inputs called take.wav
            stems.add(stem)
            writer.recording(
                p, stem, segs, transcriber, language, dict(min_clip_s=min_clip_s, max_clip_s=max_clip_s, pad_s=pad_s)
            )
        if not writer.rows:
            raise ValueError(
                f"No words were recognised in {', '.join(p.name for p in paths[:5])}, so no clip was made and "
                "nothing was kept. Check the language, or try a larger Whisper model."
            )
        # Complete before it gets its name, and never over a metadata.csv that appeared while we worked.
        staged = write_text_atomic(out / f".metadata-{os.getpid()}.csv.tmp", "".join([HEADER + "\n", *writer.rows]))
        try:
            os.link(staged, out / "metadata.csv")
        finally:
            staged.unlink(missing_ok=True)
    except BaseException:
        for w in writer.written:
            w.unlink(missing_ok=True)
        raise
    return out / "metadata.csv"


def _load_recording(path: Path) -> tuple[np.ndarray, int]:
    """The recording at 22.05 kHz, or a ValueError naming it: unreadable (an empty file, not audio), or samples
    that are not numbers (a float file of NaN/inf would otherwise be silence and "succeed" with no clip)."""
    try:
        wav, sr = load_audio(path, XTTS_SAMPLE_RATE)
    except AudioError as exc:
        raise ValueError(
            f"{path.name} cannot be read as audio ({exc}): upload a WAV, FLAC, MP3 or OGG recording."
        ) from exc
    if wav.size == 0:
        raise ValueError(f"{path.name} holds no audio (0 samples): upload the recording again.")
    bad = int(np.count_nonzero(~np.isfinite(wav)))
    if bad:
        raise ValueError(
            f"{path.name}: {bad} of {wav.size} samples are not numbers (NaN or infinite), so the file is damaged; "
            "export the recording again."
        )
    return wav, sr


class _ClipWriter:
    """Writes the clips of each recording's segments and collects their metadata rows."""

    def __init__(self, wav_dir: Path, speaker: str, total: int, progress: ProgressFn | None) -> None:
        self.wav_dir, self.speaker, self.total, self.progress = wav_dir, speaker, total, progress
        self.written: list[Path] = []
        self.rows: list[str] = []
        self.done = 0
        wav_dir.mkdir(parents=True, exist_ok=True)

    def recording(
        self,
        path: Path,
        stem: str,
        segs: list[Segment],
        transcriber: Transcriber,
        language: str | None,
        clip_options: dict,
    ) -> None:
        wav, sr = _load_recording(path)
        count = 0
        for k, seg in enumerate(segs):
            piece: np.ndarray = wav[seg.start : seg.end]
            words = transcriber.transcribe(piece, sr, language).words
            for clip in segments_to_clips(piece, sr, words, **clip_options):
                text = coqui_field(clip.text)
                if not text:
                    continue
                count += 1
                name = f"{stem}_{count:05d}.wav"
                # write_wav refuses to replace an existing file.
                self.written.append(write_wav(self.wav_dir / name, piece[clip.start : clip.end], sr, overwrite=False))
                self.rows.append(f"wavs/{name}|{text}|{self.speaker}\n")
            self.done += 1
            if self.progress is not None:
                self.progress(self.done, self.total, f"{path.name}: segment {k + 1}/{len(segs)}")
