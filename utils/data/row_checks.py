"""The checks of one dataset row: its text as the model will see it, and its audio file."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

from utils.audio.checks import SILENCE_DBFS, AudioInfo, constant_signal, probe_audio
from utils.audio.io import AudioError
from utils.constants import MAX_TEXT_TOKENS, MIN_CLIP_SECONDS, XTTS_SAMPLE_RATE
from utils.data.csv_reader import CsvRow, is_windows_drive_path
from utils.text.languages import char_limit


def audio_problem(row: CsvRow, message: str) -> str:
    """Explain a missing file with what the user most likely got wrong."""
    if message != "file not found":
        return f"Audio {message}."
    written = row.audio_file
    if is_windows_drive_path(written.replace("\\", "/")):
        return (
            f"Audio not found: {written} is a Windows path; on this machine write it relative to the "
            "CSV's folder (e.g. wavs/clip.wav)."
        )
    parts = [part for part in written.replace("\\", "/").split("/") if part]
    if len(parts) > 1 and parts[0] == os.path.basename(os.path.dirname(row.csv_file)):
        return (
            f"Audio not found at {row.audio_location}: the path repeats the CSV's folder name; paths are "
            "relative to the folder the CSV is in."
        )
    return f"Audio not found at {row.audio_location}."


class TextChecker:
    """Checks a row's text as the model will see it: after the run's front end, against the
    language's character limit and, when a vocab is given, for unknown characters and token count."""

    def __init__(self, language: str, frontend: Any, vocab_path: str | os.PathLike | None) -> None:
        self.language = language
        self.frontend = frontend
        self.limit = char_limit(language, phonemized=bool(getattr(frontend, "phonemized", False)))
        self.tokenizer = None
        if vocab_path is not None and Path(vocab_path).is_file():
            from utils.text.tokenizer import tokenizer_for

            try:
                tokenizer = tokenizer_for(vocab_path, language)
            except Exception as exc:
                raise ValueError(
                    f"{vocab_path} is not a readable XTTS vocab.json ({exc}). Download it again, "
                    "or delete it to have it fetched."
                ) from exc
            lang_token = "[zh-cn]" if language.startswith("zh") else f"[{language.split('-')[0]}]"
            # A language the vocab lacks gets its own tokens before training: nothing to check yet.
            if tokenizer.tokenizer.token_to_id(lang_token) is not None:
                self.tokenizer = tokenizer

    def check(self, raw: str) -> list[tuple[str, str]]:
        text = raw.strip()
        if not text:
            return [("error", "Text is empty.")]
        if self.frontend is not None:
            text = self.frontend.apply(text)
        found = []
        if len(text) > self.limit:
            found.append(
                (
                    "error",
                    f"Text has {len(text)} characters, over the {self.limit}-character limit for "
                    f"'{self.language}': XTTS would cut the speech short. Split the clip and its text.",
                )
            )
        if self.tokenizer is not None:
            found += self._check_tokens(text)
        return found

    def _check_tokens(self, text: str) -> list[tuple[str, str]]:
        quiet = logging.getLogger("TTS.tts.layers.xtts.tokenizer")
        level, quiet.level = quiet.level, logging.ERROR  # its length warning is reported above
        try:
            ids = self.tokenizer.encode(text, self.language)
        finally:
            quiet.level = level
        found = []
        if 1 in ids:  # [UNK]: the trainer's dataset drops such a row
            cleaned = self.tokenizer.preprocess_text(text, self.language.split("-")[0])
            unknown = sorted(
                {ch for ch in cleaned if not ch.isspace() and self.tokenizer.tokenizer.token_to_id(ch) is None}
            )
            found.append(
                (
                    "error",
                    f"Text has characters the model's vocabulary lacks ({' '.join(unknown[:12])}): "
                    "the trainer would skip this row. Remove or transliterate them.",
                )
            )
        if len(ids) > MAX_TEXT_TOKENS:
            found.append(
                (
                    "error",
                    f"Text is {len(ids)} tokens, over the trainer's {MAX_TEXT_TOKENS}-token limit: "
                    "it would skip this row. Split the clip and its text.",
                )
            )
        return found


def _level_warnings(info: AudioInfo) -> list[tuple[str, str]]:
    if info.peak is None or info.peak < 0.999:
        return []
    if info.peak <= 1.0:
        return [("warning", "Clip reaches full scale: it may be clipped (distorted).")]
    over = 20 * math.log10(info.peak)
    return [
        (
            "warning",
            f"Clip peaks at {info.peak:.2f}, {over:.1f} dB over full scale ({info.subtype or 'float'} "
            "audio). Prepare scales it down to a 0.99 peak instead of clipping it; training straight from this CSV "
            "would clip it (coqui's loader cuts samples at 1.0).",
        )
    ]


def outside_roots(location: str, roots: tuple[Path, ...]) -> bool:
    """Whether an audio path (symlinks resolved) lies outside every one of `roots` (no roots: never)."""
    if not roots:
        return False
    resolved = Path(location).resolve()
    return not any(resolved == root or root in resolved.parents for root in roots)


def check_row_text(
    row: CsvRow, text_checker: TextChecker, audio_roots: tuple[Path, ...] = ()
) -> tuple[list[tuple[str, str]], bool]:
    """The row's findings that need no audio (the CSV reader's warnings first, its text), and whether its audio
    may be opened: with `audio_roots`, audio outside them is refused without being opened."""
    found = [("warning", warning) for warning in row.warnings] + text_checker.check(row.text)
    if outside_roots(row.audio_location, audio_roots):
        found.append(
            (
                "error",
                f"Audio path {row.audio_file} points outside the dataset's folder "
                f"({', '.join(map(str, audio_roots))}): it is not read. Keep the audio beside the CSV.",
            )
        )
        return found, False
    return found, True


def check_row_audio(
    row: CsvRow, info: AudioInfo | AudioError, max_seconds: float, found: list[tuple[str, str]]
) -> tuple[float | None, list[tuple[str, str]]]:
    """(duration, or None if the row is unusable; findings) from what probing its audio gave (`info`, or the
    AudioError that probing raised), after the findings so far."""
    found = list(found)
    if isinstance(info, AudioError):
        found.append(("error", audio_problem(row, str(info))))
        return None, found
    duration = info.duration
    if duration < MIN_CLIP_SECONDS:
        found.append(("error", f"Clip is {duration:.2f} s, shorter than {MIN_CLIP_SECONDS:.0f} s."))
    if duration * XTTS_SAMPLE_RATE > max_seconds * XTTS_SAMPLE_RATE + 0.5:
        found.append(
            (
                "error",
                f"Clip is {duration:.2f} s, longer than the {max_seconds:.2f} s limit "
                "(max_audio_length): the trainer would silently skip it. Cut it into shorter clips.",
            )
        )
    if info.rms_dbfs is not None and info.rms_dbfs < SILENCE_DBFS:
        level = "digital silence" if math.isinf(info.rms_dbfs) else f"{info.rms_dbfs:.0f} dBFS"
        found.append(("error", f"Clip is silent ({level})."))
    if no_sound := constant_signal(info):
        found.append(("error", f"Clip holds no sound (a constant signal): {no_sound}. Nothing in it is speech."))
    if 0 < info.sample_rate < 16000:
        found.append(
            (
                "warning",
                f"Sample rate is {info.sample_rate} Hz; it will be upsampled to 22050 Hz, "
                "which cannot restore the missing high frequencies.",
            )
        )
    found += _level_warnings(info)
    usable = not any(severity == "error" for severity, _ in found)
    return (duration if usable else None), found


def probe_limit(max_seconds: float) -> float:
    """The longest clip worth decoding: a file over the limit is an error whatever its level."""
    return max_seconds + 1 / XTTS_SAMPLE_RATE


def check_row(
    row: CsvRow, text_checker: TextChecker, max_seconds: float, full: bool, audio_roots: tuple[Path, ...] = ()
) -> tuple[float | None, list[tuple[str, str]]]:
    """(duration, or None if the row is unusable; [(severity, reason)], the CSV reader's warnings first).
    With `audio_roots`, audio outside them is refused without being opened."""
    found, readable = check_row_text(row, text_checker, audio_roots)
    if not readable:
        return None, found
    try:
        info: AudioInfo | AudioError = probe_audio(row.audio_location, full=full, max_seconds=probe_limit(max_seconds))
    except AudioError as exc:
        info = exc
    return check_row_audio(row, info, max_seconds, found)
