"""The shell's side of speaking a long text (`python -m utils.cli speak`): the text file read (only read, and never
the file the speech is written to), and the report of each piece as plain text, every text from the file made
visible (utils.text.visible)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from utils.model.long_text import MAX_TEXT_CHARS, summary
from utils.text.visible import clipped, visible

MAX_FILE_BYTES = 4 * MAX_TEXT_CHARS  # UTF-8 takes at most 4 bytes a character: a larger file is over the limit
TEXT_CHARS = 70


def read_text_file(path: str | os.PathLike, out: str | os.PathLike) -> str:
    """The text of a UTF-8 file (a BOM dropped); a ValueError for a missing, unreadable or oversized file, or one that
    is also the output."""
    source = Path(path).expanduser()
    name = clipped(visible(str(source)))
    if not source.is_file():
        raise ValueError(f"{name} is not a file: give the text file to speak.")
    if Path(out).expanduser().resolve() == source.resolve():
        raise ValueError(f"--out is the text file {name}: the speech would overwrite it; write it elsewhere.")
    size = source.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(
            f"{name} is {size:,} bytes, over the {MAX_TEXT_CHARS:,} characters one call speaks: give it in parts."
        )
    try:
        return source.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not UTF-8 text (byte {exc.start}): save it as UTF-8.") from None
    except OSError as exc:
        raise ValueError(f"{name} cannot be read: {exc.strerror or exc}.") from None


def _line(report: Any) -> str:
    kept = report.kept
    where = f"{report.sentence}" if report.parts == 1 else f"{report.sentence}.{report.part}/{report.parts}"
    cer = "-" if kept.cer is None else f"{kept.cer:.2f}"
    head = (
        f"{report.index:>4} {where:<8} {report.seconds:6.2f} s  tries {report.tries} kept {kept.number}  "
        f"CER {cer:<5} stopped {'yes' if kept.stopped else 'no ':<3} length {kept.duration_ratio:.2f}x  "
        f"{clipped(' '.join(report.text.split()), TEXT_CHARS)}"
    )
    notes = [f"cut: {report.cut}"] if report.cut else []
    notes += [f"retried, {why}" for why in report.retried]
    notes += [f"still fails: {'; '.join(report.failing)}"] if report.failing else []
    return visible("\n".join([head, *(f"{'':>14}{note}" for note in notes)]))


def report_text(speech: Any) -> str:
    """A synthesize result's report: its summary, what was checked, and a line (with notes) per piece."""
    sentences = list(speech.sentences)
    return "\n".join([summary(sentences), visible(speech.checks), *(_line(report) for report in sentences)])
