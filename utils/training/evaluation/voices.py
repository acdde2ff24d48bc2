"""Speakers as voices: a dataset of several speakers gives each its own reference, scores and named voice.

Rows are grouped by `speaker_name`. A speaker with at least MIN_VOICE_SECONDS of training audio and one held-out row
is a voice of the run: its reference clip (from its own training clips, run_dir/voices/<file>.wav), its own scored
evaluation (its held-out sentences, similarity to its own real clips, its language), its own baseline and verdict, and
its own named voice in ready/ (utils.model.named_voices). A speaker with less is trained with the others and said to
have no voice of its own. A dataset of one speaker (or of one that qualifies) is one voice, as before.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_VOICE_SECONDS = 10.0
# Training clips kept per speaker to take its reference from (a huge dataset is not held in memory whole).
REFERENCE_POOL = 2000
VOICES_DIR = "voices"
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def voice_file_name(name: str) -> str:
    """A speaker's name as a file name: itself when it is one, else its safe letters and a digest."""
    if SAFE_NAME.fullmatch(name) and ".." not in name:
        return name
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:40] or "voice"
    return f"{safe}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


@dataclass
class SpeakerRows:
    """One speaker's rows in the dataset: training clips (audio, seconds), held-out rows and their languages."""

    name: str
    train: list[tuple[str, float]] = field(default_factory=list)  # the first REFERENCE_POOL training clips
    train_rows: int = 0
    train_seconds: float = 0.0
    eval_rows: list[tuple[Any, float, str]] = field(default_factory=list)  # (row, seconds, its dataset's language)
    languages: Counter = field(default_factory=Counter)

    @property
    def seconds(self) -> float:
        return self.train_seconds

    @property
    def language(self) -> str:
        return self.languages.most_common(1)[0][0]

    @property
    def file_name(self) -> str:
        return voice_file_name(self.name)

    def eval_rows_in(self, language: str) -> list[tuple[Any, float]]:
        """Its held-out rows in `language` (what its evaluation speaks, in that language)."""
        return [(row, seconds) for row, seconds, spoken in self.eval_rows if spoken == language]


def dataset_voices(report: Any) -> tuple[list[SpeakerRows], list[str]]:
    """The run's voices (two or more speakers with enough data; [] for a run of one voice) and a note for each
    speaker left without a voice of its own."""
    speakers: dict[str, SpeakerRows] = {}
    for split, row, seconds in report.iter_usable_splits():
        name = (row.speaker_name or "").strip() or "speaker"
        speaker = speakers.setdefault(name, SpeakerRows(name))
        language = report.language_of(row.csv_file)
        speaker.languages[language] += 1
        if split == "train":
            speaker.train_rows += 1
            speaker.train_seconds += seconds
            if len(speaker.train) < REFERENCE_POOL:
                speaker.train.append((row.audio_location, seconds))
        else:
            speaker.eval_rows.append((row, seconds, language))
    if len(speakers) < 2:
        return [], []
    voices, notes = [], []
    for speaker in speakers.values():
        if speaker.seconds < MIN_VOICE_SECONDS or not speaker.eval_rows_in(speaker.language):
            lacks = (
                f"{speaker.seconds:.1f} s of training audio, below {MIN_VOICE_SECONDS:g} s"
                if speaker.seconds < MIN_VOICE_SECONDS
                else "no held-out row to score it on"
            )
            notes.append(f"Speaker {speaker.name!r}: {lacks}: trained with the others, no voice of its own.")
        else:
            voices.append(speaker)
    names = Counter(v.file_name.lower() for v in voices)  # one file each, on a case-insensitive disk too
    if any(count > 1 for count in names.values()):
        clash = [v.name for v in voices if names[v.file_name.lower()] > 1]
        raise ValueError(
            f"The speakers {', '.join(repr(n) for n in clash)} would share a voice file name: rename one in its CSV."
        )
    # The run's own voice (ready/reference.wav) first: a speaker of the run's language.
    voices.sort(key=lambda voice: voice.language != report.language)
    if len(voices) < 2:
        if voices:
            notes.append(f"One voice: {voices[0].name!r}.")
        return [], notes
    return voices, notes


def write_voice_references(voices: list[SpeakerRows], run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each voice's reference clip from its own training clips (utils.model.ready.write_reference_wav) in
    run_dir/voices/; what run.json `voices` records of each."""
    from utils.model.ready import write_reference_wav

    record = {}
    for voice in voices:
        target = run_dir / VOICES_DIR / f"{voice.file_name}.wav"
        chosen = write_reference_wav(voice.train, target)
        record[voice.name] = {
            "file": f"{VOICES_DIR}/{target.name}",
            "language": voice.language,
            "train_seconds": round(voice.seconds, 2),
            "train_rows": voice.train_rows,
            "eval_rows": len(voice.eval_rows),
            "reference": chosen,
        }
    return record
