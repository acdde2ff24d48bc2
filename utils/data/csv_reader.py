"""Reading the metadata CSVs users really have, line by line, with every oddity reported.

Accepted: the coqui format `audio_file|text|speaker_name` (speaker optional) with `|`, `,` or tab
separators; LJSpeech's headerless `id|text|normalized text` with audio in `wavs/<id>.wav`; UTF-8 with
or without a BOM (Windows-1252 read with a warning); CRLF; blank lines; paths relative to the CSV's
folder or absolute, with either slash. Files are only ever opened for reading.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".aiff", ".aif", ".wma", ".webm")
HEADER_COLUMNS = ("audio_file", "text", "speaker_name")
SEPARATOR_NAMES = {"|": "pipe (|)", ",": "comma (,)", "\t": "tab"}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a dataset. `line` is what an editor shows (the header is line 1); 0 = whole file."""

    line: int
    audio_file: str
    severity: str  # "error" | "warning"
    reason: str
    csv_file: str = ""
    file_level: bool = False  # about the whole file (its layout, its language), not one row

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
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def iter_lines(path: Path, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """(line number, text) for every physical line, streaming; BOM and CR/LF stripped."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            yield number, raw.rstrip(b"\r\n").decode(encoding, errors="replace")


def _detect_encoding(path: Path) -> tuple[str, int | None]:
    """utf-8 if every line decodes, else cp1252 (what Excel on Windows writes) and the first bad line."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return "cp1252", number
    return "utf-8", None


def _first_line(path: Path, encoding: str) -> tuple[int, str] | None:
    for number, text in iter_lines(path, encoding):
        if text.strip():
            return number, text
    return None


def _pick_separator(line: str) -> str:
    # Pipe first: it is the coqui format and never appears in ordinary text; then tab, then comma.
    for sep in ("|", "\t", ","):
        if sep in line:
            return sep
    return "|"


def _looks_like_audio(value: str) -> bool:
    return value.strip().lower().endswith(AUDIO_EXTENSIONS)


def detect_layout(path: Path) -> CsvLayout:
    """Separator, header, format and encoding of a metadata file, with notes for the user."""
    layout = CsvLayout()
    with open(path, "rb") as handle:
        layout.bom = handle.read(3) == b"\xef\xbb\xbf"
    layout.encoding, bad_line = _detect_encoding(path)
    if bad_line is not None:
        layout.problems.append(
            Problem(bad_line, "", "warning", "File is not UTF-8 (first bad byte on this line); read as "
                    "Windows-1252. Save it as UTF-8 to be sure the text is what you meant.")  # fmt: skip
        )
    if layout.bom:
        layout.notes.append("UTF-8 byte order mark found and ignored.")
    first = _first_line(path, layout.encoding)
    if first is None:
        layout.problems.append(Problem(0, "", "error", "The CSV is empty."))
        return layout
    number, line = first
    layout.separator = _pick_separator(line)
    fields = [f.strip() for f in _split(line, layout.separator)]
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
        layout.columns = HEADER_COLUMNS[: max(2, min(3, len(fields)))]
        layout.problems.append(
            Problem(number, fields[0], "warning", "No header line: this line was read as data. Add "
                    "`audio_file|text|speaker_name` as the first line.")  # fmt: skip
        )
        return layout
    if len(fields) >= 2 and (path.parent / "wavs" / f"{fields[0]}.wav").is_file():
        layout.format = "ljspeech"
        layout.columns = ("id", "text", "normalized_text")[: len(fields)]
        layout.notes.append("LJSpeech format detected (id|text|normalized text, audio in wavs/<id>.wav).")
        return layout
    layout.problems.append(
        Problem(number, "", "error", "First line is neither the header `audio_file|text|speaker_name` nor a row "
                f"whose first field is an audio file ({', '.join(AUDIO_EXTENSIONS[:4])}, ...). Got: {line[:80]!r}")  # fmt: skip
    )
    return layout


def _split(line: str, separator: str) -> list[str]:
    if separator == ",":
        # Comma files come from spreadsheets, which quote text that holds commas.
        return next(csv.reader([line], delimiter=",", quotechar='"', skipinitialspace=False))
    # Quotes are ordinary text in pipe and tab files (as in the coqui and LJSpeech formats).
    return line.split(separator)


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
    """Stream the data rows of a metadata CSV, yielding a Problem for each row that cannot be parsed."""
    path = Path(path)
    layout = layout or detect_layout(path)
    csv_dir = str(path.parent)
    header_skipped = not layout.has_header
    width = len(layout.columns)
    for number, line in iter_lines(path, layout.encoding):
        if not line.strip():
            continue
        if not header_skipped:
            header_skipped = True
            continue
        fields = _split(line, layout.separator)
        if layout.format == "ljspeech":
            fields = [f.strip() for f in fields]
            if len(fields) < 2:
                yield Problem(number, fields[0], "error", "Expected `id|text|normalized text`.", str(path))
                continue
            normalized = fields[2] if len(fields) > 2 and fields[2] else fields[1]
            yield CsvRow(number, f"wavs/{fields[0]}.wav", normalized, "",
                         os.path.join(csv_dir, "wavs", f"{fields[0]}.wav"), str(path))  # fmt: skip
            continue
        record = _fields_to_record(fields, layout.columns, layout.separator)
        if isinstance(record, str):
            yield Problem(number, fields[0].strip() if fields else "", "error", record, str(path))
            continue
        if len(fields) > width and "text" in layout.columns:
            yield Problem(number, record["audio_file"], "warning",
                          f"More {SEPARATOR_NAMES[layout.separator]} separators than columns: the text was "
                          "read as everything between the audio file and the speaker.", str(path))  # fmt: skip
        audio = record["audio_file"]
        yield CsvRow(number, audio, record["text"], record.get("speaker_name", ""),
                     resolve_audio_path(audio, csv_dir), str(path))  # fmt: skip


def _fields_to_record(fields: list[str], columns: tuple[str, ...], separator: str) -> dict[str, str] | str:
    """Map fields to columns; returns an error message when they cannot be mapped."""
    if len(fields) < 2:
        return f"Expected {len(columns)} columns ({'|'.join(columns)}), found {len(fields)}."
    if len(fields) > len(columns) and "text" in columns:
        # Unquoted separators inside the text: the columns before and after the text are fixed.
        text_at = columns.index("text")
        tail = len(columns) - text_at - 1
        text = separator.join(fields[text_at : len(fields) - tail])
        fields = fields[:text_at] + [text] + fields[len(fields) - tail :]
    record = {name: value.strip() for name, value in zip(columns, fields)}
    if "audio_file" not in record or "text" not in record:
        return "Row is missing the audio_file or text column."
    return record
