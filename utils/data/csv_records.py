"""Records of a metadata CSV: the fields of each row, with the lines it spans and what is wrong with it.

Comma and tab files come from spreadsheets, so they are read with the stdlib csv module: quoted
fields may hold the separator, doubled quotes and line breaks (Excel's multi-line cells). A quote
that is opened and never closed is caught when the next line looks like a new row (it starts with
an audio file), after MAX_CELL_LINES lines, or at the end of the file: the row is reported and the
reading goes on from the next row, instead of one cell swallowing the rest of the file. Pipe files
(the coqui and LJSpeech formats) have no quoting: a quote there is ordinary text. In every format a
line without any separator right after a row is that row's text broken across lines: the row is
reported whole, not cut at the break (a line holding an audio path alone is a row of its own). A pipe-file
field wholly in double quotes is unquoted by the CSV rules ("" is a quote); other quotes there are text, except
a text in quotes with an undoubled quote inside (`"He said "hi""`): an error in a file that quotes its fields, a
warning otherwise (utils.data.csv_reader). Each record counts one row.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from utils.data.csv_text import decode_line, raw_lines, strip_line_ending, undecodable_reason

# A quoted cell spanning more lines than this is taken for a quote that was never closed.
MAX_CELL_LINES = 20
QUOTED_SEPARATORS = (",", "\t")  # spreadsheet formats
SEPARATOR_NAMES = {"|": "pipe (|)", ",": "comma (,)", "\t": "tab"}
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".aiff", ".aif", ".wma", ".webm")


@dataclass
class Record:
    """One row as read: its fields, the lines it spans, its text as written, and an error if unreadable."""

    first: int
    last: int
    fields: list[str]
    raw: str = ""
    error: str = ""
    joined_lines: int = 0  # lines broken off this row that were joined to it
    break_why: str = ""  # what showed that the first of those lines continues the row


class _OpenQuote(Exception):
    """Raised inside csv.reader's line source: the quoted cell being read was never closed."""


@dataclass
class _Lines:
    """Decoded lines for csv.reader, remembering which physical lines the current row used."""

    source: Iterator[tuple[int, bytes]]
    encoding: str
    separator: str
    pushed: list[tuple[int, bytes]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    bad: str = ""  # why the first undecodable line of the current row cannot be read

    def start_row(self) -> None:
        self.numbers, self.texts, self.bad = [], [], ""

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        number, raw = self.pushed.pop() if self.pushed else next(self.source)
        text = decode_line(raw, self.encoding)
        if self.numbers and (len(self.numbers) >= MAX_CELL_LINES or looks_like_row(text or "", self.separator)):
            # csv.reader asks for a second line of one row only inside a quoted cell.
            self.pushed.append((number, raw))
            raise _OpenQuote
        if text is None:
            self.bad = self.bad or undecodable_reason(number, raw, self.encoding)
            text = raw.decode(self.encoding, errors="replace")  # keeps the row's structure; the row is an error
        self.numbers.append(number)
        self.texts.append(text)
        return text

    def record(self, fields: list[str], error: str = "") -> Record:
        return Record(self.numbers[0], self.numbers[-1], fields, "".join(self.texts), error or self.bad)


def looks_like_row(text: str, separator: str) -> bool:
    """Whether a line starts like a data row: an audio file name, then the separator."""
    head, found, _ = text.partition(separator)
    return bool(found) and head.strip().strip('"').lower().endswith(AUDIO_EXTENSIONS)


# A field wholly in double quotes by the CSV rules: a quote inside it is doubled.
_WHOLLY_QUOTED = re.compile(r'\s*"((?:[^"]|"")*)"\s*')


def unquote_field(value: str) -> str:
    """A pipe-file field written in double quotes, unquoted by the CSV rules ("" is one quote); any other field
    as it is (in the coqui format a quote inside a text, such as `He said "hi"`, is ordinary text)."""
    match = _WHOLLY_QUOTED.fullmatch(value)
    return match.group(1).replace('""', '"') if match else value


def is_wholly_quoted(value: str) -> bool:
    return _WHOLLY_QUOTED.fullmatch(value) is not None


def is_half_quoted(value: str) -> bool:
    """A field that starts and ends with a double quote but is not quoted by the CSV rules: a quote inside it is
    not doubled (`"He said "hi""`). Either a quoted cell written by hand, or a text that begins and ends a quote."""
    text = value.strip()
    return len(text) >= 2 and text[0] == text[-1] == '"' and not is_wholly_quoted(text)


def split_line(text: str, separator: str) -> list[str]:
    """The fields of one line as written (for the header line and for layout detection)."""
    text = strip_line_ending(text)
    if separator in QUOTED_SEPARATORS:
        try:
            return next(csv.reader([text], delimiter=separator, skipinitialspace=True))
        except (csv.Error, StopIteration):
            return text.split(separator)
    return [unquote_field(f) for f in text.split(separator)]


def iter_records(
    path: str | os.PathLike, separator: str, encoding: str, *, header: bool, width: int = 3, audio_first: bool = True
) -> Iterator[Record]:
    """Every non-blank data row of the file as a Record (the header, when there is one, skipped), lines
    broken off a row joined to it. `width` is the layout's column count; with `audio_first`, a line
    that does not start with an audio file, after a row with too few fields, is that row's continuation."""
    read = _quoted_records if separator in QUOTED_SEPARATORS else _plain_records
    records = read(path, separator, encoding)
    if header:
        next(records, None)
    held: Record | None = None
    for record in records:
        if held is not None and _continues(held, record, width, audio_first):
            _join(held, record, separator)
            continue
        if held is not None:
            yield _finish(held, separator)
        held = record
    if held is not None:
        yield _finish(held, separator)


def _continues(row: Record, line: Record, width: int, audio_first: bool) -> bool:
    if line.error:
        return False
    if len(line.fields) == 1:
        # A line of an audio path alone is a row of its own (a CSV of paths without texts), not a broken text.
        return not line.fields[0].strip().strip('"').lower().endswith(AUDIO_EXTENSIONS)
    cut_short = len(row.fields) < width and not row.joined_lines
    return audio_first and cut_short and not line.fields[0].strip().strip('"').lower().endswith(AUDIO_EXTENSIONS)


def _join(row: Record, line: Record, separator: str) -> None:
    if not row.joined_lines:
        why = (
            f"has no {SEPARATOR_NAMES[separator]} separator"
            if len(line.fields) == 1
            else "does not start with an audio file"
        )
        row.break_why = f"line {line.first} {why}"
    row.last = line.last
    row.raw += line.raw
    row.joined_lines += line.last - line.first + 1


def _finish(row: Record, separator: str) -> Record:
    if row.joined_lines and not row.error:
        hint = "" if separator == "|" else ", or put the text in double quotes"
        row.error = (
            f"Row spans lines {row.first}-{row.last}: {row.break_why}, so the text holds a line break. Put "
            f"each row on one line{hint}."
        )
    return row


def _plain_records(path: str | os.PathLike, separator: str, encoding: str) -> Iterator[Record]:
    for number, raw in raw_lines(path):
        text = decode_line(raw, encoding)
        error = "" if text is not None else undecodable_reason(number, raw, encoding)
        if text is None:
            text = raw.decode(encoding, errors="replace")
        if not text.strip():
            continue
        yield Record(number, number, [unquote_field(f) for f in strip_line_ending(text).split(separator)], text, error)


def _quoted_records(path: str | os.PathLike, separator: str, encoding: str) -> Iterator[Record]:
    lines = _Lines(raw_lines(path), encoding, separator)
    reader = _reader(lines, separator)
    while True:
        lines.start_row()
        try:
            fields = next(reader)
        except StopIteration:
            return
        except (_OpenQuote, csv.Error) as exc:
            if not lines.numbers:  # nothing of a row was read (cannot happen with a line source; be safe)
                return
            yield lines.record([lines.texts[0].split(separator, 1)[0]], _quote_error(lines, exc))
            reader = _reader(lines, separator)  # a fresh parser state
            continue
        if not any(f.strip() for f in fields):
            continue  # a blank line, or only separators (spreadsheets write those for empty rows)
        yield lines.record(fields)


def _reader(lines: _Lines, separator: str):
    # strict: text after a closing quote and a quote open at the end of the file are errors, not guesses.
    return csv.reader(lines, delimiter=separator, strict=True, skipinitialspace=True)


def _quote_error(lines: _Lines, exc: Exception) -> str:
    first, last = lines.numbers[0], lines.numbers[-1]
    if isinstance(exc, _OpenQuote) or "unexpected end of data" in str(exc):
        until = (
            "at the end of the file"
            if not isinstance(exc, _OpenQuote)
            else f"at line {last + 1}, which starts a new row"
            if len(lines.numbers) < MAX_CELL_LINES
            else f"{MAX_CELL_LINES} lines later"
        )
        return (
            f"A double quote opened on line {first} is never closed (still open {until}). Close it, or "
            'write a quote inside a quoted text as "".'
        )
    if "expected after" in str(exc):
        return (
            f'Text continues after a closing double quote on line {last}: a field that starts with " must '
            'end with it; write a quote inside it as "".'
        )
    return f"Line {last} cannot be read as CSV ({exc})."


QUOTE_AT_FIELD_START = {sep: re.compile(rf'(?:^|{re.escape(sep)})[ ]*"') for sep in QUOTED_SEPARATORS}


def uses_quoting(raw: str, separator: str) -> bool:
    """Whether any field of a spreadsheet-format row was written in double quotes."""
    pattern = QUOTE_AT_FIELD_START.get(separator)
    return bool(pattern and pattern.search(raw))
