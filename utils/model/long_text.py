"""A text of any length spoken by a voice, sentence by sentence, each sentence checked as it is spoken and the best
of N tries kept: what `utils.model.inference.synthesize` (so the Test tab and the CLI's `speak`) does with a text.

The text is cut by the product's one splitter (utils.text.split.speech_pieces: paragraphs, sentences, and a sentence
over its language's character limit cut at a clause mark, else between words); each piece goes through the voice's
text front end (read afresh: a lexicon edited since the model loaded applies) and is spoken with the conditioning
latents of the one reference clip, computed once, and the call's seed. The pieces are joined with the pause their
punctuation asks for (PAUSE_SECONDS, after each piece's own silence at its ends is trimmed), into one clip.

Each try of a piece is measured (utils.quality.sentence_check: whether the GPT stopped, its length against the
speaker's pace, and, with tries > 1, the CER of a Whisper transcript, repeats and words beyond the text); one that
fails a check is spoken again with the next seed (seed + 1, + 2...), up to `tries`, and the best is kept. With one
try nothing is transcribed: a piece is one generation, as before this module, and its stop and length (free to
measure) are still reported. The speaker's pace is the one its run measured (run.json `quality.pace`); a run that
scored no evaluation has none, and a slow typical pace stands in (utils.quality.sentence_check.UNKNOWN_PACE).

Every piece gets a `SentenceReport`: its text as written and as the model read it, where it sits in the clip, its
tries, the kept try's measures, why earlier tries were retried and what the kept one still fails.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utils.constants import SAMPLES_PER_AUDIO_TOKEN, XTTS_SAMPLE_RATE
from utils.files import read_json
from utils.model import sampling
from utils.model.ready import READY_DIR
from utils.quality.babble import SpeakingPace
from utils.quality.sentence_check import MAX_DURATION_RATIO, UNKNOWN_PACE, SentenceCheck, TryScores, best_try
from utils.text.languages import char_limit
from utils.text.split import CLAUSE, END, NO_SPACE, PARAGRAPH, SENTENCE, WORD, Piece, speech_pieces
from utils.text.visible import clipped

MAX_TEXT_CHARS = 100_000  # one call: a long chapter; a book is spoken a chapter at a time
# The silence after a piece, by what follows it (utils.text.split), in seconds.
PAUSE_SECONDS = {PARAGRAPH: 0.8, SENTENCE: 0.45, CLAUSE: 0.25, WORD: 0.12, NO_SPACE: 0.05, END: 0.0}
# A piece's own silence at its ends is cut to TRIM_KEEP_S, below TRIM_DB under its loudest 10 ms, so the pause is
# the punctuation's and not whatever silence the model ended with.
TRIM_DB = -40.0
TRIM_KEEP_S = 0.05
TOKENS_PER_SECOND = XTTS_SAMPLE_RATE / SAMPLES_PER_AUDIO_TOKEN  # GPT audio tokens per second of speech, ~21.5
CAP_EXTRA_TOKENS = 20  # a checked try's cap: past MAX_DURATION_RATIO times its expected length, and a little more

Progress = Callable[[int, int, str], None]
# (text through the front end, seed, cap in audio tokens or None) -> (speech samples, whether the GPT stopped)
Generate = Callable[[str, int, int | None], tuple[np.ndarray, bool]]


def checked_text(text: Any) -> str:
    """The text to speak, or a ValueError saying what is wrong with it (before anything is loaded)."""
    if not isinstance(text, str):
        raise ValueError(f"Text must be a string (got {type(text).__name__}).")
    if not text.strip():
        raise ValueError("Text is empty: type what the voice should say.")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"The text is {len(text):,} characters, over the {MAX_TEXT_CHARS:,} one call speaks: give it in parts "
            f"of at most {MAX_TEXT_CHARS:,} characters (a chapter at a time)."
        )
    return text


def checked_tries(tries: Any) -> int:
    """Tries per sentence, checked against their declaration among the sampling settings (utils.model.sampling "tries":
    1 checks nothing; the Test tab and the CLI start from its default, synthesize from 1)."""
    return int(sampling.checked("tries", tries))


@dataclass(frozen=True)
class PreparedPiece:
    """A piece of the text (utils.text.split.Piece) and its text as the model reads it (through the front end)."""

    piece: Piece
    prepared: str


def prepared_pieces(text: str, frontend: Any, model: Any) -> list[PreparedPiece]:
    """The pieces of `text` for this voice, each through its front end and checked against XTTS's text-token limit
    (a ValueError names a piece over it, and text with nothing to say)."""
    lang = frontend.language.split("-")[0]
    limit = int(model.args.gpt_max_text_tokens)
    out = []
    for piece in speech_pieces(text, char_limit(frontend.language, phonemized=frontend.phonemized)):
        prepared = frontend.apply(piece.text).strip()
        if not prepared:
            continue
        tokens = len(model.tokenizer.encode(prepared.lower(), lang=lang))  # as the generation encodes it
        if tokens >= limit:
            raise ValueError(
                f"Sentence {piece.sentence} is {tokens} text tokens after the voice's text front end, over XTTS's "
                f"limit of {limit - 1}: shorten it ({clipped(piece.text, 60)!r})."
            )
        out.append(PreparedPiece(piece, prepared))
    if not out:
        raise ValueError("The text has nothing to say: give text with words.")
    return out


def voice_pace(ready_dir: str | Path) -> tuple[SpeakingPace, str]:
    """(the speaker's pace, where it comes from): its run's (run.json `quality.pace`, fit on the training rows), or
    UNKNOWN_PACE when the run measured none."""
    ready = Path(ready_dir)
    record = read_json(ready.parent / "run.json", {}) if ready.name == READY_DIR else {}
    quality = record.get("quality") if isinstance(record, dict) else None
    pace = quality.get("pace") if isinstance(quality, dict) else None
    try:  # a hand-edited or damaged record is no pace
        fitted = SpeakingPace(float(pace["chars_per_second"]), float(pace.get("overhead_seconds", 0.0)))
        usable = 0 < fitted.chars_per_second < math.inf and 0 <= fitted.overhead_seconds < math.inf
        if usable:
            return fitted, "the speaker's pace (its run's training rows)"
    except (TypeError, KeyError, ValueError, AttributeError):
        pass
    return UNKNOWN_PACE, (
        f"a typical pace ({UNKNOWN_PACE.chars_per_second:g} characters a second): its run measured none"
    )


@dataclass(frozen=True)
class SentenceReport:
    """One piece of the text as spoken: which sentence (and part of it, when it was cut), its text as written and as
    the model read it, the pause after it, where it sits in the clip (`start`, `seconds` of speech), its tries, the kept
    one's measures (`kept`), why each earlier try was retried (`retried`) and what the kept one still fails
    (`failing`); `cut` says how its sentence was cut when it was over the character limit."""

    index: int  # the piece, from 1
    sentence: int
    part: int
    parts: int
    text: str
    prepared: str
    after: str
    pause_after: float
    start: float
    seconds: float
    tries: int
    kept: TryScores
    attempts: tuple[TryScores, ...]
    retried: tuple[str, ...]
    failing: tuple[str, ...]
    cut: str

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out.update(kept=self.kept.to_dict(), attempts=[a.to_dict() for a in self.attempts])
        return {**out, "retried": list(self.retried), "failing": list(self.failing)}


@dataclass
class LongSpeech:
    """speak's result: the whole clip, a report per piece, and one line on what was checked."""

    wav: np.ndarray
    sentences: list[SentenceReport]
    checks: str


def cut_note(piece: Piece, limit: int) -> str:
    """How a piece's sentence was cut, or "" when it is spoken whole."""
    if not piece.cut:
        return ""
    how = {CLAUSE: "at a clause mark", WORD: "between words", NO_SPACE: "where there was no space"}
    at = how.get(piece.after, "at its end")
    return f"its sentence is over the {limit}-character limit: part {piece.part} of {piece.parts}, cut {at}"


def trimmed(wav: np.ndarray, rate: int) -> np.ndarray:
    """`wav` without its silence at the ends (see TRIM_DB), TRIM_KEEP_S of it kept; an all-quiet clip as it is."""
    hop = max(1, rate // 100)
    frames = len(wav) // hop
    if frames < 2:
        return wav
    rms = np.sqrt(np.mean(np.square(wav[: frames * hop].reshape(frames, hop), dtype=np.float64), axis=1))
    loud = np.flatnonzero(rms > rms.max() * 10 ** (TRIM_DB / 20))
    if not loud.size or rms.max() <= 0:
        return wav
    keep = int(TRIM_KEEP_S * rate)
    return wav[max(0, loud[0] * hop - keep) : min(len(wav), (loud[-1] + 1) * hop + keep)]


def _cap(check: SentenceCheck, text: str, tries: int, max_audio_tokens: int | None) -> int | None:
    """A try's cap in audio tokens: the caller's (the model's own when None); with checking, also no further than just
    past where the try would fail as too long (MAX_DURATION_RATIO times its expected length, as the evaluation caps its
    clips), since speech beyond it is thrown away. The GPT's tokens do not depend on the speed, which stretches them
    afterwards."""
    if tries == 1:
        return max_audio_tokens
    seconds = check.pace.expected_seconds(text)
    checked = math.ceil(seconds * TOKENS_PER_SECOND * MAX_DURATION_RATIO) + CAP_EXTRA_TOKENS
    return min(checked, max_audio_tokens) if max_audio_tokens else checked


def _heard_as(piece: PreparedPiece, frontend: Any) -> str:
    """What a try should be heard saying: the text as the front end spelled it (a lexicon's respelling is what is
    said), or as written when the front end turns it into phonemes."""
    return piece.piece.text if frontend.phonemized else piece.prepared


def speak(
    pieces: list[PreparedPiece],
    generate: Generate,
    *,
    frontend: Any,
    ready_dir: str | Path,
    rate: int,
    seed: int | None = None,
    tries: int = 1,
    speed: float = 1.0,
    max_audio_tokens: int | None = None,
    progress: Progress | None = None,
) -> LongSpeech:
    """Speak `pieces` with `generate` (see the module docstring): the whole clip at `rate`, with its report."""
    tries = checked_tries(tries)
    pace, pace_source = voice_pace(ready_dir)
    check = SentenceCheck(frontend.language, pace, speed=speed, transcribe=tries > 1)
    limit = char_limit(frontend.language, phonemized=frontend.phonemized)
    base = secrets.randbelow(2**31) if seed is None else int(seed)  # said in the report, so a try can be repeated
    total = len(pieces)
    audio: list[np.ndarray] = []
    reports: list[SentenceReport] = []
    position = 0
    for index, item in enumerate(pieces, 1):
        heard_as = _heard_as(item, frontend)
        cap = _cap(check, item.piece.text, tries, max_audio_tokens)
        attempts: list[TryScores] = []
        kept_wav = np.zeros(0, dtype=np.float32)
        for number in range(1, tries + 1):
            wav, stopped = generate(item.prepared, base + number - 1, cap)
            scores = check.score(heard_as, wav, rate, stopped, number, base + number - 1)
            attempts.append(scores)
            if best_try(attempts) is scores:
                kept_wav = wav
            if scores.passed:
                break
            if progress is not None and number < tries:
                why = "; ".join(scores.failures)
                progress(index - 1, total, f"piece {index} of {total}: try {number} failed ({why}), trying again")
        kept = best_try(attempts)
        speech = trimmed(np.asarray(kept_wav, dtype=np.float32), rate)
        pause = PAUSE_SECONDS[item.piece.after]
        reports.append(
            SentenceReport(
                index=index,
                sentence=item.piece.sentence,
                part=item.piece.part,
                parts=item.piece.parts,
                text=item.piece.text,
                prepared=item.prepared,
                after=item.piece.after,
                pause_after=pause,
                start=round(position / rate, 3),
                seconds=round(len(speech) / rate, 3),
                tries=len(attempts),
                kept=kept,
                attempts=tuple(attempts),
                retried=tuple(f"try {a.number}: {'; '.join(a.failures)}" for a in attempts[:-1]),
                failing=kept.failures,
                cut=cut_note(item.piece, limit),
            )
        )
        silence = np.zeros(int(round(pause * rate)), dtype=np.float32)
        audio += [speech, silence]
        position += len(speech) + len(silence)
        if progress is not None:
            progress(index, total, progress_line(reports[-1], total))
    wav = np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
    return LongSpeech(wav, reports, checks_line(check, tries, pace_source))


def progress_line(report: SentenceReport, total: int) -> str:
    """One line on a piece just spoken."""
    line = f"piece {report.index} of {total}: {report.seconds:.1f} s"
    if report.tries > 1:
        line += f", kept try {report.kept.number} of {report.tries}"
    return line + (f"; still fails: {'; '.join(report.failing)}" if report.failing else "")


def checks_line(check: SentenceCheck, tries: int, pace_source: str) -> str:
    """What was checked, with what, and what was not."""
    if tries == 1:
        return f"1 try per sentence: not checked (stop and length measured against {pace_source})"
    heard = f"CER with Whisper {check.whisper}" if check.transcriber is not None else check.unheard
    return f"up to {tries} tries per sentence, checked: stop, length against {pace_source}; {heard}"


def summary(sentences: list[SentenceReport]) -> str:
    """One line over a text's report: pieces, sentences cut, retried, still failing."""
    cut = len({s.sentence for s in sentences if s.parts > 1})
    retried = sum(1 for s in sentences if s.tries > 1)
    failing = sum(1 for s in sentences if s.failing)
    count = len({s.sentence for s in sentences})
    return (
        f"{count} sentence{'s' * (count != 1)} in {len(sentences)} piece{'s' * (len(sentences) != 1)}"
        f" ({cut} cut at the character limit); {retried} retried; {failing} still failing"
    )
