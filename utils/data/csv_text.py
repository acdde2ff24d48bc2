"""The text of a metadata CSV: physical lines with any line ending, and one encoding for the whole file.

Lines end at LF, CRLF or a lone CR (old Mac files); a UTF-8 byte order mark is dropped. The encoding
is chosen once per file, never per line: UTF-8 when every line decodes as UTF-8 or any line holds
valid non-ASCII UTF-8 (then the lines that do not decode are errors, listed by number); Windows-1252
(what Excel on Windows writes) only when no line is non-ASCII UTF-8. Mixing the two per line would
turn `Café` into `CafÃ©` without a word. Files are only read, in bounded memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, AnyStr

BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


@dataclass(frozen=True)
class TextFacts:
    """What one pass over a file found out: its encoding, line endings and undecodable lines."""

    encoding: str = "utf-8"  # "utf-8" | "cp1252"
    bom: bool = False
    utf16: bool = False
    cr_only: bool = False  # every line ends in a lone CR
    undecodable: int = 0  # lines that do not decode in `encoding`
    first_undecodable: int = 0  # line number of the first of them
    first_non_utf8: int = 0  # the first line that is not UTF-8 (what made a file cp1252)


# No metadata row comes near this; a longer line is cut here (it then fails its row checks) and the rest of it
# is skipped piece by piece, so a file of one enormous line is read in bounded memory.
MAX_LINE = 1 << 20


def bounded_lines(handle: IO[AnyStr], limit: int = MAX_LINE) -> Iterator[AnyStr]:
    """The lines of an open file (text or binary), each at most `limit` characters or bytes."""
    while line := handle.readline(limit):
        ends = ("\r", "\n") if isinstance(line, str) else (b"\n",)
        if len(line) == limit and not line.endswith(ends):
            while (rest := handle.readline(limit)) and not rest.endswith(ends):
                pass
        yield line


def raw_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes with the line ending) of every physical line, streaming.

    Latin-1 maps each byte to one character, so the text layer splits at LF, CRLF and CR while
    the bytes come back unchanged for the real decoding."""
    with open(path, encoding="latin-1", newline="") as handle:
        for number, text in enumerate(bounded_lines(handle), start=1):
            raw = text.encode("latin-1")
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            yield number, raw


def inspect_text(path: str | os.PathLike) -> TextFacts:
    """Choose the file's encoding (see the module docstring) in one streaming pass."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head.startswith(UTF16_BOMS):
        return TextFacts(utf16=True)
    utf8_text = non_utf8 = 0
    first_non_utf8 = 0
    endings = {"\r": 0, "\n": 0}
    for number, raw in raw_lines(path):
        if raw.endswith(b"\r"):
            endings["\r"] += 1
        elif raw.endswith(b"\n"):
            endings["\n"] += 1
        if raw.isascii():
            continue
        try:
            raw.decode("utf-8")
            utf8_text += 1
        except UnicodeDecodeError:
            non_utf8 += 1
            first_non_utf8 = first_non_utf8 or number
    cr_only = endings["\r"] > 0 and endings["\n"] == 0
    if non_utf8 and not utf8_text:
        bad = _undecodable_lines(path, "cp1252")
        return TextFacts("cp1252", head.startswith(BOM), False, cr_only, bad[0], bad[1], first_non_utf8)
    return TextFacts("utf-8", head.startswith(BOM), False, cr_only, non_utf8, first_non_utf8, first_non_utf8)


def _undecodable_lines(path: str | os.PathLike, encoding: str) -> tuple[int, int]:
    count = first = 0
    for number, raw in raw_lines(path):
        if decode_line(raw, encoding) is None:
            count += 1
            first = first or number
    return count, first


def decode_line(raw: bytes, encoding: str) -> str | None:
    """The line as text, or None when it does not decode in the file's encoding."""
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        return None


def undecodable_reason(number: int, raw: bytes, encoding: str) -> str:
    """Why line `number` cannot be read, naming the byte and the text before it."""
    try:
        raw.decode(encoding)
        return ""
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode(encoding, errors="replace")[-20:]
        byte = raw[exc.start]
    name = "UTF-8" if encoding == "utf-8" else "Windows-1252"
    hint = " (it looks like Windows-1252 while the rest of the file is UTF-8)" if encoding == "utf-8" else ""
    return (
        f"Text is not {name}: line {number} has byte 0x{byte:02X} after {before!r}{hint}. Re-type the "
        "accented characters or save the whole file as UTF-8; the line was not guessed at."
    )


def strip_line_ending(text: str) -> str:
    return text.rstrip("\r\n")


def coqui_field(text: str) -> str:
    """A field as a pipe-separated coqui row can hold it: no "|" (it separates columns) and no line break
    (it would split the row); whitespace runs become one space."""
    return " ".join(text.replace("|", " ").split())
