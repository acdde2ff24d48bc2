"""Reading the metadata CSVs users really have, row by row, with every oddity reported.

Accepted: the coqui format `audio_file|text|speaker_name` (speaker optional) with `|`, `,` or tab
separators; LJSpeech's headerless `id|text|normalized text` with audio in `wavs/<id>.wav`; UTF-8 with
or without a BOM (a whole file in Windows-1252 is read with a warning); LF, CRLF or CR line endings;
blank lines; quoted comma and tab fields, multi-line cells included; paths relative to the CSV's folder
or absolute, with either slash. Files are only ever opened for reading.

Rows with more fields than the layout: in a pipe file that is an error row (the coqui format has no
quoting, so an extra | is either in the text or an unnamed column, and guessing would silently change
the text or the speaker). In a comma or tab file without quotes, separators inside the text are common
in hand-made files: the text is rejoined (the columns before and after it are fixed) and the row gets a
warning that quotes what was read. A quoted row with extra fields is an error. See csv_records.py for
quoting, line breaks inside rows and line numbers, and csv_text.py for encodings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from utils.data.csv_records import (
    AUDIO_EXTENSIONS,
    QUOTED_SEPARATORS,
    SEPARATOR_NAMES,
    Record,
    is_half_quoted,
    is_wholly_quoted,
    iter_records,
    split_line,
    uses_quoting,
)
from utils.data.csv_text import TextFacts, inspect_text, raw_lines, strip_line_ending
from utils.text.visible import visible

__all__ = [
    "AUDIO_EXTENSIONS",
    "HEADER_COLUMNS",
    "SEPARATOR_NAMES",
    "CsvLayout",
    "CsvRow",
    "Problem",
    "detect_layout",
    "is_windows_drive_path",
    "iter_rows",
    "resolve_audio_path",
    "texts_by_audio_file",
]
HEADER_COLUMNS = ("audio_file", "text", "speaker_name")
LJSPEECH_COLUMNS = ("id", "text", "normalized_text")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a dataset. `line` is what an editor shows (the header is line 1); 0 = whole file."""

    line: int
    audio_file: str
    severity: str  # "error" | "warning"
    reason: str
    csv_file: str = ""
    file_level: bool = False  # about the whole file (its layout, its language), not one row

    def __post_init__(self) -> None:
        # Every reason the API gives passes here: a file name's or a text's invisible characters made visible.
        object.__setattr__(self, "reason", visible(self.reason))

    def to_dict(self) -> dict[str, object]:
        return {
            "csv_file": self.csv_file,
            "line": self.line,
            "audio_file": self.audio_file,
            "severity": self.severity,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CsvRow:
    """One data row as written in the CSV, plus the audio path it resolves to (`audio_location`)."""

    line: int
    audio_file: str
    text: str
    speaker_name: str
    audio_location: str  # a plain string: millions of rows must not each build a Path
    csv_file: str = ""
    warnings: tuple[str, ...] = ()  # what was odd about the row although it could be read

    @property
    def audio_path(self) -> Path:
        return Path(self.audio_location)


@dataclass
class CsvLayout:
    """What `detect_layout` found out about a file."""

    separator: str = "|"
    has_header: bool = True
    format: str = "coqui"  # "coqui" | "ljspeech"
    columns: tuple[str, ...] = HEADER_COLUMNS
    encoding: str = "utf-8"
    bom: bool = False
    cr_only: bool = False
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    quoted: bool = False  # a pipe file whose first lines write fields in double quotes (read by the CSV rules)


def _first_lines(path: Path, encoding: str, count: int = 2) -> list[tuple[int, str]]:
    found = []
    for number, raw in raw_lines(path):
        text = strip_line_ending(raw.decode(encoding, errors="replace"))
        if text.strip():
            found.append((number, text))
            if len(found) == count:
                break
    return found


def _first_line(path: Path, encoding: str) -> tuple[int, str] | None:
    lines = _first_lines(path, encoding, 1)
    return lines[0] if lines else None


def _guessed_from_first_lines(layout: CsvLayout, lines: list[tuple[int, str]]) -> Problem | None:
    """What the first lines show about the layout that is guessed, not declared: fields in double quotes in a
    pipe file (a note), or one column of audio paths without texts (an error naming the layout, instead of
    one error per row)."""
    if layout.separator == "|" and any(is_wholly_quoted(f) for _, line in lines for f in line.split("|") if f.strip()):
        layout.quoted = True
        layout.notes.append(
            'Fields are written in double quotes: read by the CSV rules (the quotes removed, "" read as one quote).'
        )
    columns = [[f.strip().strip('"') for f in split_line(line, layout.separator)] for _, line in lines]
    single = [fields for fields in columns if len(fields) == 1]
    if len(single) == len(columns) and any(_looks_like_audio(f[0]) or f[0].lower() == "audio_file" for f in single):
        return Problem(
            lines[0][0],
            "",
            "error",
            "The CSV has one column: audio paths without their texts (guessed from its first lines). Each row "
            "needs `audio_file|text|speaker_name`: add each clip's transcript, or upload the clips as "
            "recordings to have them transcribed.",
            file_level=True,
        )
    return None


def _pick_separator(line: str) -> str:
    # Pipe first: it is the coqui format and never appears in ordinary text; then tab, then comma.
    for sep in ("|", "\t", ","):
        if sep in line:
            return sep
    return "|"


def _looks_like_audio(value: str) -> bool:
    return value.strip().lower().endswith(AUDIO_EXTENSIONS)


def _encoding_findings(layout: CsvLayout, facts: TextFacts) -> None:
    if facts.encoding == "cp1252":
        layout.problems.append(
            Problem(
                facts.first_non_utf8,
                "",
                "warning",
                "File is not UTF-8 (first bad byte on this line); read "
                "as Windows-1252. Save it as UTF-8 to be sure the text is what you meant.",
            )
        )
    elif facts.undecodable:
        layout.notes.append(
            f"{facts.undecodable} line(s) are not valid UTF-8 although the rest of the file is (the "
            f"first is line {facts.first_undecodable}); their rows are listed as errors."
        )
    if facts.bom:
        layout.notes.append("UTF-8 byte order mark found and ignored.")
    if facts.cr_only:
        layout.notes.append("Lines end in a carriage return only (old Mac format); read as line breaks.")


def detect_layout(path: Path) -> CsvLayout:
    """Separator, header, format and encoding of a metadata file, with notes for the user."""
    path = Path(path)
    layout = CsvLayout()
    facts = inspect_text(path)
    if facts.utf16:
        layout.problems.append(
            Problem(
                0, "", "error", "The file is UTF-16 (Excel's 'Unicode Text'); save it as 'CSV UTF-8' or as UTF-8 text."
            )
        )
        return layout
    layout.encoding, layout.bom, layout.cr_only = facts.encoding, facts.bom, facts.cr_only
    _encoding_findings(layout, facts)
    first = _first_line(path, layout.encoding)
    if first is None:
        layout.problems.append(Problem(0, "", "error", "The CSV is empty."))
        return layout
    number, line = first
    layout.separator = _pick_separator(line)
    one_column = _guessed_from_first_lines(layout, _first_lines(path, layout.encoding))
    if one_column is not None:
        layout.problems.append(one_column)
        return layout
    fields = [f.strip() for f in split_line(line, layout.separator)]
    names = [f.lower() for f in fields]
    if layout.separator != "|":
        layout.notes.append(f"Separator detected: {SEPARATOR_NAMES[layout.separator]} (the coqui format uses |).")
    if "audio_file" in names and "text" in names:
        layout.columns = tuple(names)
        unknown = [n for n in names if n not in HEADER_COLUMNS]
        if unknown:
            layout.notes.append(f"Extra columns ignored: {', '.join(unknown)}.")
        return layout
    layout.has_header = False
    if _looks_like_audio(fields[0]):
        layout.problems.append(
            Problem(
                number,
                fields[0],
                "warning",
                "No header line: this line was read as data. Add `audio_file|text|speaker_name` as the first line.",
            )
        )
        return layout
    if len(fields) >= 2 and (path.parent / "wavs" / f"{fields[0]}.wav").is_file():
        layout.format = "ljspeech"
        layout.columns = LJSPEECH_COLUMNS
        layout.notes.append("LJSpeech format detected (id|text|normalized text, audio in wavs/<id>.wav).")
        return layout
    layout.problems.append(
        Problem(
            number,
            "",
            "error",
            "First line is neither the header `audio_file|text|speaker_name` nor a row "
            f"whose first field is an audio file ({', '.join(AUDIO_EXTENSIONS[:4])}, ...). Got: {line[:80]!r}",
        )
    )
    return layout


def resolve_audio_path(value: str, csv_dir: str) -> str:
    """An audio path as written (either slash, relative to the CSV's folder, or absolute).

    Plain os.path string work: pathlib interns every path part, which costs memory per row."""
    value = value.strip().strip('"').replace("\\", "/")
    if is_windows_drive_path(value):  # C:/data/x.wav: keep it recognisable, it cannot exist here
        return value
    return os.path.normpath(value if os.path.isabs(value) else os.path.join(csv_dir, value))


def is_windows_drive_path(value: str) -> bool:
    return len(value) > 2 and value[1] == ":" and value[0].isalpha() and value[2] in "/\\"


def iter_rows(path: str | os.PathLike, layout: CsvLayout | None = None) -> Iterator[CsvRow | Problem]:
    """Stream the data rows of a metadata CSV: a CsvRow (with its warnings) for each readable row, an
    error Problem for each row that cannot be used as written. One item per row, whatever lines it spans;
    nothing when the layout itself is unreadable."""
    path = Path(path)
    layout = layout or detect_layout(path)
    if any(p.severity == "error" for p in layout.problems):
        return
    csv_dir = str(path.parent)
    for record in iter_records(
        path,
        layout.separator,
        layout.encoding,
        header=layout.has_header,
        width=len(layout.columns),
        audio_first=layout.columns[0] == "audio_file",
    ):
        yield _to_row(record, layout, str(path), csv_dir)


def _to_row(record: Record, layout: CsvLayout, csv_file: str, csv_dir: str) -> CsvRow | Problem:
    first_field = record.fields[0].strip()[:200] if record.fields else ""
    if "\x00" in record.raw and not record.error:
        record.error = "Row holds NUL bytes: the file is binary or UTF-16 in part. Save it as UTF-8 text."
    if record.error:
        return Problem(record.first, first_field, "error", record.error, csv_file)
    if layout.format == "ljspeech":
        return _ljspeech_row(record, csv_file, csv_dir)
    mapped = _map_fields(record, layout)
    if isinstance(mapped, str):
        return Problem(record.first, first_field, "error", mapped, csv_file)
    values, warnings = mapped
    audio = values["audio_file"]
    return CsvRow(
        record.first,
        audio,
        values["text"],
        values.get("speaker_name", ""),
        resolve_audio_path(audio, csv_dir),
        csv_file,
        tuple(warnings),
    )


def _ljspeech_row(record: Record, csv_file: str, csv_dir: str) -> CsvRow | Problem:
    fields = [f.strip() for f in record.fields]
    if len(fields) < 2:
        return Problem(record.first, fields[0], "error", "Expected `id|text|normalized text`.", csv_file)
    if len(fields) > 3:
        return Problem(
            record.first,
            fields[0],
            "error",
            f"Row has {len(fields)} fields; LJSpeech rows are "
            "`id|text|normalized text` and a | cannot be part of the text.",
            csv_file,
        )
    normalized = fields[2] if len(fields) > 2 and fields[2] else fields[1]
    return CsvRow(
        record.first,
        f"wavs/{fields[0]}.wav",
        normalized,
        "",
        os.path.join(csv_dir, "wavs", f"{fields[0]}.wav"),
        csv_file,
    )


def _map_fields(record: Record, layout: CsvLayout) -> tuple[dict[str, str], list[str]] | str:
    """The row's values by column name and its warnings, or why the fields cannot be mapped."""
    fields, columns, separator = record.fields, layout.columns, layout.separator
    width, name = len(columns), SEPARATOR_NAMES[separator]
    if len(fields) < 2 and _looks_like_audio(fields[0].strip('"')):
        return f"Only an audio path, no text: write the row as {'|'.join(columns)} with the clip's transcript."
    if len(fields) < 2:
        return f"Expected {width} fields ({'|'.join(columns)}), found 1: the line has no {name} separator."
    warnings = []
    if len(fields) > width:
        if separator not in QUOTED_SEPARATORS or uses_quoting(record.raw, separator) or "text" not in columns:
            return _too_many_fields(len(fields), layout)
        # No quotes in the row: its plain split is what was written (csv dropped the spaces after separators).
        fields = _rejoin_text(strip_line_ending(record.raw).split(separator), columns, separator)
        text = fields[columns.index("text")].strip()
        warnings.append(
            f"More {name} separators than columns ({len(record.fields)} fields, {width} columns): the "
            f"text was read as {text[:80]!r}. Put the text in double quotes if that is wrong."
        )
    values = {column: value.strip() for column, value in zip(columns, fields)}
    if "audio_file" not in values or "text" not in values:
        return "Row is missing the audio_file or text column."
    if separator == "|" and "text" in columns:
        quoted = _half_quoted_text(record, layout)
        if quoted and (layout.quoted or _other_fields_quoted(record, columns)):
            return (
                f"The text is in double quotes with a quote inside it that is not doubled ({quoted[:80]!r}), while "
                'the file writes its fields in double quotes: write a quote inside a quoted text as "" (or the text '
                "without the outer quotes). The row was not guessed at."
            )
        if quoted:
            warnings.append(
                f"The text starts and ends with a double quote but is not quoted by the CSV rules (a quote inside "
                f"is not doubled): read as written, quotes included ({quoted[:80]!r}). If the outer quotes are not "
                'part of the text, remove them or write the quotes inside as "".'
            )
    if "\n" in values["text"] or "\r" in values["text"]:
        values["text"] = re.sub(r"\s*[\r\n]+\s*", " ", values["text"])
        warnings.append(
            f"Text spans lines {record.first}-{record.last} (a line break inside a quoted cell): "
            "read with the line breaks as spaces."
        )
    return values, warnings


def _raw_fields(record: Record) -> list[str]:
    return strip_line_ending(record.raw).split("|")


def _half_quoted_text(record: Record, layout: CsvLayout) -> str:
    """The pipe row's text field as written when it is half quoted (see is_half_quoted), else ""."""
    raw = _raw_fields(record)
    at = layout.columns.index("text")
    return raw[at].strip() if len(raw) > at and is_half_quoted(raw[at]) else ""


def _other_fields_quoted(record: Record, columns: tuple[str, ...]) -> bool:
    at = columns.index("text")
    return any(is_wholly_quoted(value) for i, value in enumerate(_raw_fields(record)) if i != at and value.strip())


def _too_many_fields(count: int, layout: CsvLayout) -> str:
    columns = "|".join(layout.columns)
    where = f"the header has {len(layout.columns)} ({columns})" if layout.has_header else f"the format has {columns}"
    if layout.separator not in QUOTED_SEPARATORS:
        hint = "Remove the extra | separators: the coqui format has no quoting, so a | cannot be part of the text"
        if layout.columns == ("audio_file", "text"):
            hint += "; if the last field is the speaker, add speaker_name to the header"
    else:
        hint = "Remove the fields after the last column, or name them in the header"
    return f"Row has {count} fields, {where}. {hint}."


def _rejoin_text(fields: list[str], columns: tuple[str, ...], separator: str) -> list[str]:
    """Unquoted separators inside the text of a spreadsheet-format row: the columns before and after the
    text are fixed, so the text is everything between them."""
    text_at = columns.index("text")
    tail = len(columns) - text_at - 1
    text = separator.join(fields[text_at : len(fields) - tail])
    return fields[:text_at] + [text] + fields[len(fields) - tail :]


def texts_by_audio_file(csv_paths: list[str | os.PathLike], audio_files: set[str]) -> dict[str, str]:
    """{audio_file: text as written} of the rows of these CSVs that name one of `audio_files` (the first row of
    each): what an edited check table is compared with when its client sent no originals."""
    found: dict[str, str] = {}
    for path in csv_paths:
        for row in iter_rows(path):
            if isinstance(row, CsvRow) and row.audio_file in audio_files and row.audio_file not in found:
                found[row.audio_file] = row.text
    return found
