"""Whether one spoken sentence says its text, measured as a scored evaluation measures a clip, for speaking a text
sentence by sentence with the best of N tries (utils.model.long_text).

A try of a sentence is measured by what the evaluation measures (utils.quality.babble, utils.quality.intelligibility):
whether the GPT stopped before its cap, its length against the speaker's pace (`SpeakingPace`), and, when it is
transcribed, the CER of the transcript, its immediate repeats and the words it says after the text. It fails a check
when a measure is beyond its threshold (declared here, once); among a sentence's tries the best is the first with the
lowest `TryScores.rank`: fewer failed checks, then a lower CER, then a length nearer the pace.

Transcription: English with the bundled Whisper tiny.en (fast on a CPU; a check has to catch babble and dropped
words, not score finely); another language with a multilingual Whisper when one is on this machine
(models/whisper/small/), else its CER is not checked and `SentenceCheck.unheard` says why (stop and length still are).
Whisper runs on the CPU, leaving the GPU to XTTS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from utils.audio.io import resample
from utils.quality import babble, intelligibility
from utils.quality.asr import BUNDLED_WHISPER, available_locally, transcribe_text, transcriber_or_reason
from utils.quality.babble import SpeakingPace
from utils.text.languages import canonical_language, whisper_language

# The thresholds of a try, each declared once.
MAX_CER = 0.35  # tiny.en is rough: a clean sentence measures ~0.05-0.15, a garbled or babbled one 0.5 and more
MAX_DURATION_RATIO = babble.BABBLE_RATIO  # longer than 1.5 times the speaker's pace: the evaluation's babble
MIN_DURATION_RATIO = 0.4  # shorter than 0.4 times: words were dropped (the only sign of it without a transcript)
MAX_REPEATS = 0  # immediate repeats of a word or group beyond the text's own ("the the")
MAX_WORDS_BEYOND = 1  # words said after the text ended (one spares Whisper's occasional extra word)
# The speaker's pace when the run measured none (it scored no evaluation): slower than most speakers (English is read
# at ~14-16 characters a second), so an unknown speaker is not called a babbler for being slow.
UNKNOWN_PACE = SpeakingPace(chars_per_second=11.0, overhead_seconds=0.5)
MULTILINGUAL_WHISPER = "small"  # used for a language other than English when it is on this machine
WHISPER_RATE = 16000


@dataclass(frozen=True)
class TryScores:
    """One try of a sentence: its seed, its measures, and the checks it failed (empty: it passed). `transcript`, `cer`,
    `repeats` and `words_beyond` are None when it was not transcribed."""

    number: int  # the try, from 1
    seed: int
    seconds: float
    stopped: bool
    expected_seconds: float
    duration_ratio: float
    transcript: str | None = None
    cer: float | None = None
    repeats: int | None = None
    words_beyond: int | None = None
    failures: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def rank(self) -> tuple[float, ...]:
        """The ordering of a sentence's tries, lower is better: fewer failed checks, then a lower CER (not heard counts
        as 0), then a length nearer the speaker's pace, then the earlier try."""
        length = abs(math.log(max(self.duration_ratio, 1e-6)))
        return (len(self.failures), self.cer if self.cer is not None else 0.0, length, self.number)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failures": list(self.failures)}


def best_try(tries: Sequence[TryScores]) -> TryScores:
    """The try to keep: the lowest rank (the first of equals)."""
    return min(tries, key=TryScores.rank)


def failures(
    stopped: bool, ratio: float, cer: float | None, repeats: int | None, beyond: int | None
) -> tuple[str, ...]:
    """The checks a try fails, each with its measure and threshold."""
    found = []
    if not stopped:
        found.append("did not stop (cut at its token cap)")
    if ratio > MAX_DURATION_RATIO:
        found.append(f"{ratio:.2f} times the speaker's length (over {MAX_DURATION_RATIO:g})")
    elif ratio < MIN_DURATION_RATIO:
        found.append(f"{ratio:.2f} times the speaker's length (under {MIN_DURATION_RATIO:g})")
    if cer is not None and cer > MAX_CER:
        found.append(f"CER {cer:.2f} (over {MAX_CER:g})")
    if repeats is not None and repeats > MAX_REPEATS:
        found.append(f"{repeats} repeated word{'s' * (repeats != 1)}")
    if beyond is not None and beyond > MAX_WORDS_BEYOND:
        found.append(f"{beyond} words after the text (over {MAX_WORDS_BEYOND})")
    return tuple(found)


def whisper_for(language: str) -> str:
    """The Whisper model that hears a language's tries: the bundled tiny.en for English, else the multilingual one."""
    return BUNDLED_WHISPER if canonical_language(language).split("-")[0] == "en" else MULTILINGUAL_WHISPER


def check_transcriber(language: str) -> tuple[Any, str | None]:
    """(the Whisper that hears `language`'s tries, None) or (None, why its CER is not checked)."""
    lang = canonical_language(language)
    name = whisper_for(lang)
    if name != BUNDLED_WHISPER and not available_locally(name):
        return None, (
            f"CER not checked: the bundled Whisper {BUNDLED_WHISPER} hears English only; for {lang}, put a "
            f"multilingual Whisper in models/whisper/{name}/ (stop and length are checked)"
        )
    transcriber, why = transcriber_or_reason(name, device="cpu", compute_type="int8")
    return transcriber, None if transcriber is not None else f"CER not checked: {why} (stop and length are checked)"


class SentenceCheck:
    """Measures the tries of a text's sentences in `language` against `pace` at `speed`; with `transcribe`, each try is
    heard by Whisper (loaded here once) and its CER, repeats and words beyond the text are checked too."""

    def __init__(self, language: str, pace: SpeakingPace, *, speed: float = 1.0, transcribe: bool = True) -> None:
        self.language = canonical_language(language)
        self.pace = pace
        self.speed = float(speed)
        self.transcriber: Any = None
        self.unheard: str | None = "not transcribed: one try per sentence, nothing to choose between"
        self.whisper = ""
        if transcribe:
            self.transcriber, self.unheard = check_transcriber(self.language)
            self.whisper = whisper_for(self.language) if self.transcriber is not None else ""

    def expected_seconds(self, text: str) -> float:
        """How long the speaker takes for `text` at this speed."""
        return self.pace.expected_seconds(text) / self.speed

    def score(self, text: str, wav: np.ndarray, rate: int, stopped: bool, number: int, seed: int) -> TryScores:
        """The measures of one try of `text` (what it should say, as written) and the checks it fails."""
        seconds = len(wav) / rate
        expected = self.expected_seconds(text)
        ratio = seconds / expected if expected > 0 else 1.0
        transcript = self._heard(wav, rate)
        cer = repeats = beyond = None
        if transcript is not None:
            cer = intelligibility.cer(text, transcript, self.language)
            repeats = babble.repeats(text, transcript, self.language)
            beyond = babble.words_beyond(text, transcript, self.language)
        return TryScores(
            number=number,
            seed=seed,
            seconds=round(seconds, 3),
            stopped=bool(stopped),
            expected_seconds=round(expected, 3),
            duration_ratio=round(ratio, 4),
            transcript=transcript,
            cer=None if cer is None else round(cer, 4),
            repeats=repeats,
            words_beyond=beyond,
            failures=failures(bool(stopped), ratio, cer, repeats, beyond),
        )

    def _heard(self, wav: np.ndarray, rate: int) -> str | None:
        if self.transcriber is None or not len(wav):
            return None
        audio = resample(np.asarray(wav, dtype=np.float32), rate, WHISPER_RATE)
        try:
            return transcribe_text(self.transcriber, audio, WHISPER_RATE, whisper_language(self.language))
        except RuntimeError as exc:  # a decoding failure of this clip: the others are still heard
            self.unheard = f"CER not checked for some tries: transcription failed ({exc})"
            return None
