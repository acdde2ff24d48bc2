"""A voice's pronunciation lexicon: terms the model should say another way, each replaced by its respelling (or, for
an Amharic voice with G2P, by its phonemes) before the tokenizer. The format and the rules are in docs/lexicon.md.

A file is UTF-8 text, one entry a line, `term<TAB>respelling` (or `term -> respelling`, as typed in the page's text
box), optionally `<TAB>case` (`-> case`) to match the case exactly;
`#` starts a comment line and `[xx]` starts the entries of language `xx` (before any: the voice's language). A
`.json` file holds `{"term": "respelling", ...}` or a list of `{"term", "respelling", "language"?,
"case_sensitive"?}` records, the form `ready/finetune.json` stores under `text_frontend.lexicon`.

Matching: whole terms (a term that starts or ends with a letter or digit is not found inside a longer word; in
Chinese, Japanese, Thai, Lao, Khmer and Burmese text, written without spaces, it is), case-insensitive unless the
entry says `case`, any run of whitespace in the text matching a space of the term, the longest term first, in one
pass: a respelling is never looked up again. A lexicon that would loop if it were (a respelling holding its own
term, A -> B and B -> A) is refused, like every other mistake, with the line that holds it.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.text.languages import canonical_language, is_valid_language_code
from utils.text.visible import INVISIBLE_CATEGORIES, clipped, visible

AMHARIC = "amh"
MAX_FILE_BYTES = 1_048_576  # 1 MiB: a lexicon is a list of names and terms, not a dictionary of the language
MAX_ENTRIES = 10_000
MAX_TERM_CHARS = 100
MAX_RESPELLING_CHARS = 200
CASE_FLAG = "case"
ARROW = "->"  # the separator typed in a browser's text box, where the Tab key leaves the box
# Invisible characters that some scripts need inside a word (Persian, the Indic scripts): zero-width (non-)joiner.
ALLOWED_FORMAT = frozenset({"\u200c", "\u200d"})
# Scripts written without spaces between words: there a term is found inside a run of letters.
_NO_SPACES = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303c"
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)
_RECORD_KEYS = ("term", "respelling", "language", "case_sensitive")


def _is_word_char(char: str) -> bool:
    """A letter, digit, underscore or combining mark of a script written with spaces: a term must not be cut out of
    a run of them."""
    if not (char.isalnum() or char == "_" or unicodedata.category(char).startswith("M")):
        return False
    return not _NO_SPACES.match(char)


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _problem_chars(text: str) -> list[str]:
    return [
        f"[U+{ord(c):04X}]"
        for c in dict.fromkeys(text)
        if unicodedata.category(c) in INVISIBLE_CATEGORIES and c not in ALLOWED_FORMAT
    ]


def term_form(term: str, language: str) -> str:
    """The term as the text it is looked for in: the Amharic front end normalises text first (numbers spelled out,
    Ethiopic punctuation), so an Amharic term is normalised the same way."""
    if language == AMHARIC:
        from utils.text.amharic import normalize_amharic

        return normalize_amharic(term)
    return term


@dataclass(frozen=True)
class LexiconEntry:
    """One term and how to say it. `where` names its line (or record) for messages; it is not part of its value."""

    term: str
    respelling: str
    language: str
    case_sensitive: bool = False
    where: str = field(default="", compare=False)

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"term": self.term, "respelling": self.respelling, "language": self.language}
        if self.case_sensitive:
            record["case_sensitive"] = True
        return record


def make_entry(term: Any, respelling: Any, language: str, case_sensitive: Any, where: str) -> LexiconEntry:
    """One entry checked on its own (text, not empty, no control character, not too long), or a ValueError that
    starts with `where`."""
    if not isinstance(case_sensitive, bool):
        raise ValueError(
            f"{where}: case_sensitive must be true or false; got {clipped(visible(repr(case_sensitive)))}."
        )
    values = []
    for name, value, longest in (("term", term, MAX_TERM_CHARS), ("respelling", respelling, MAX_RESPELLING_CHARS)):
        if not isinstance(value, str):
            raise ValueError(f"{where}: the {name} must be text; got {type(value).__name__}.")
        bad = _problem_chars(value)
        if bad:
            raise ValueError(
                f"{where}: the {name} {clipped(visible(value, keep=()))!r} holds a control or invisible character "
                f"({', '.join(bad)}): type it without."
            )
        value = _collapsed(value)
        if not value:
            raise ValueError(
                f"{where}: empty {name}"
                + (
                    ": each entry is term<TAB>respelling, both given."
                    if name == "term"
                    else f" for {clipped(term)!r}: give how to say it."
                )
            )
        if len(value) > longest:
            raise ValueError(
                f"{where}: the {name} {clipped(value, 40)!r} is {len(value)} characters, over {longest}: a lexicon "
                "respells words and names, not sentences."
            )
        values.append(value)
    if not is_valid_language_code(language):
        raise ValueError(f"{where}: {clipped(visible(language))!r} is not a language code (en, es, amh, zh-cn, ...).")
    entry = LexiconEntry(values[0], values[1], canonical_language(language), case_sensitive, where)
    if not _collapsed(term_form(entry.term, entry.language)):
        raise ValueError(f"{where}: the term {entry.term!r} is nothing once the text is normalised: give a word.")
    return entry


class _Matcher:
    """The entries of one language, found in text: longest term first at each place, left to right, one pass."""

    def __init__(self, entries: Iterable[LexiconEntry]) -> None:
        self.exact: dict[str, LexiconEntry] = {}
        self.folded: dict[str, LexiconEntry] = {}
        lengths: dict[str, set[int]] = {}
        for entry in entries:
            form = _collapsed(term_form(entry.term, entry.language))
            table, key = (self.exact, form) if entry.case_sensitive else (self.folded, form.casefold())
            table[key] = entry
            lengths.setdefault(form[0].casefold()[:1], set()).add(len(form))
        self.lengths = {first: sorted(found, reverse=True) for first, found in lengths.items()}

    def find(self, text: str) -> list[tuple[int, int, LexiconEntry]]:
        """(start, end, entry) of each term found in `text`, in order, not overlapping."""
        if not any(c.isspace() for c in text):
            return self._find(text, list(range(len(text) + 1)))
        # Any run of whitespace in the text counts as one space of a term: look in a collapsed copy.
        chars: list[str] = []
        origin: list[int] = []
        for i, c in enumerate(text):
            if c.isspace():
                if chars and chars[-1] == " ":
                    continue
                c = " "
            chars.append(c)
            origin.append(i)
        origin.append(len(text))
        return self._find("".join(chars), origin)

    def _find(self, text: str, origin: list[int]) -> list[tuple[int, int, LexiconEntry]]:
        found, i, n = [], 0, len(text)
        while i < n:
            hit = self._at(text, i)
            if hit is None:
                i += 1
                continue
            length, entry = hit
            found.append((origin[i], origin[i + length - 1] + 1, entry))
            i += length
        return found

    def _at(self, text: str, i: int) -> tuple[int, LexiconEntry] | None:
        lengths = self.lengths.get(text[i].casefold()[:1])
        if not lengths:
            return None
        before_is_word = i > 0 and _is_word_char(text[i - 1])
        for length in lengths:
            end = i + length
            if end > len(text):
                continue
            piece = text[i:end]
            entry = self.exact.get(piece) or self.folded.get(piece.casefold())
            if entry is None:
                continue
            if before_is_word and _is_word_char(piece[0]):
                continue  # inside a word: "SQL" is not in "MySQL"
            if end < len(text) and _is_word_char(text[end]) and _is_word_char(piece[-1]):
                continue
            return length, entry
        return None


@dataclass(frozen=True)
class Lexicon:
    """A voice's entries, every language together; checked as a whole when built (duplicates, loops, size)."""

    entries: tuple[LexiconEntry, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))
        if len(self.entries) > MAX_ENTRIES:
            raise ValueError(f"The lexicon has {len(self.entries):,} entries, over {MAX_ENTRIES:,}: split it by voice.")
        object.__setattr__(self, "_matchers", {})
        unique: dict[tuple[str, bool, str], LexiconEntry] = {}
        kept = []
        for entry in self.entries:
            form = _collapsed(term_form(entry.term, entry.language))
            key = (entry.language, entry.case_sensitive, form if entry.case_sensitive else form.casefold())
            earlier = unique.get(key)
            if earlier is None:
                unique[key] = entry
                kept.append(entry)
            elif earlier.respelling != entry.respelling:
                raise ValueError(
                    f"{entry.where or repr(entry.term)}: the term {entry.term!r} is already respelled "
                    f"{earlier.respelling!r} ({earlier.where or 'above'}); here {entry.respelling!r}. Keep one."
                )
        object.__setattr__(self, "entries", tuple(kept))  # the same entry twice is the same entry
        for language in self.languages:
            self._check_loops(language)

    # Pickled without its compiled matchers (a dataset check's worker processes get the front end).
    def __getstate__(self) -> dict[str, Any]:
        return {"entries": self.entries}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "entries", state["entries"])
        object.__setattr__(self, "_matchers", {})

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(entry.language for entry in self.entries))

    def covers(self, language: str) -> bool:
        return canonical_language(language) in self.languages

    def _matcher(self, language: str) -> _Matcher:
        matchers: dict[str, _Matcher] = self._matchers  # type: ignore[attr-defined]
        if language not in matchers:
            matchers[language] = _Matcher(e for e in self.entries if e.language == language)
        return matchers[language]

    def split(self, text: str, language: str) -> list[tuple[str, bool]]:
        """`text` as pieces (text, respelled): the text between terms as it is, each term found replaced by its
        respelling (with a space where a symbol term's respelling would touch a letter); joined, they are
        `substitute`'s result."""
        language = canonical_language(language)
        if not self.covers(language):
            return [(text, False)] if text else []
        pieces: list[tuple[str, bool]] = []
        done = 0
        for start, end, entry in self._matcher(language).find(text):
            if start > done:
                pieces.append((text[done:start], False))
            respelling = entry.respelling
            # A symbol term between letters ("5%" with % -> percent) gets a space each side the letters touch.
            if start > 0 and _is_word_char(text[start - 1]) and _is_word_char(respelling[0]):
                respelling = " " + respelling
            if end < len(text) and _is_word_char(text[end]) and _is_word_char(respelling[-1]):
                respelling += " "
            pieces.append((respelling, True))
            done = end
        if done < len(text):
            pieces.append((text[done:], False))
        return pieces

    def substitute(self, text: str, language: str) -> str:
        """`text` with every term of `language` replaced by its respelling (one pass, longest term first)."""
        return "".join(piece for piece, _ in self.split(text, language))

    def _check_loops(self, language: str) -> None:
        """Refuse respellings that would be respelled again if the lexicon were applied to its own output, in a
        circle: a respelling that holds its own term, or A -> B ... -> A."""
        matcher = self._matcher(language)
        entries = [e for e in self.entries if e.language == language]
        index = {id(entry): i for i, entry in enumerate(entries)}
        leads_to: list[list[int]] = []
        for entry in entries:
            respelling = term_form(entry.respelling, language) if language == AMHARIC else entry.respelling
            targets = [index[id(hit)] for _, _, hit in matcher.find(respelling)]
            if index[id(entry)] in targets:
                raise ValueError(
                    f"{entry.where or repr(entry.term)}: a loop: the respelling {entry.respelling!r} holds its own "
                    f"term {entry.term!r}. Respell it without the term (case counts only for a 'case' entry)."
                )
            leads_to.append(list(dict.fromkeys(targets)))
        cycle = _find_cycle(leads_to)
        if cycle:
            chain = " -> ".join(f"{entries[i].term!r}" for i in [*cycle, cycle[0]])
            where = ", ".join(entries[i].where or repr(entries[i].term) for i in cycle)
            raise ValueError(
                f"{where}: a loop: {chain} (each respelling holds the next term). Respell one of them without the "
                "other's term."
            )

    def to_records(self) -> list[dict[str, Any]]:
        """The entries as finetune.json stores them (`text_frontend.lexicon`)."""
        return [entry.to_record() for entry in self.entries]

    @classmethod
    def from_records(cls, records: Any, language: str, source: str = "lexicon") -> Lexicon:
        """From finetune.json's records (or a JSON lexicon file's list, or `{term: respelling}`): a ValueError names
        the record."""
        if records is None or records == [] or records == {}:
            return cls()
        if isinstance(records, Mapping):
            items = list(records.items())
            return cls(
                tuple(make_entry(t, r, language, False, f"{source} term {clipped(visible(t))!r}") for t, r in items)
            )
        if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
            raise ValueError(
                f"{source}: a lexicon is a list of records or {{term: respelling}}; got {type(records).__name__}."
            )
        entries = []
        for number, record in enumerate(records, 1):
            where = f"{source} entry {number}"
            if number > MAX_ENTRIES:
                raise ValueError(f"{source}: more than {MAX_ENTRIES:,} entries: split it by voice.")
            if isinstance(record, (tuple, list)) and len(record) in (2, 3):
                case = record[2] if len(record) == 3 else False
                entries.append(make_entry(record[0], record[1], language, case, where))
                continue
            if not isinstance(record, Mapping):
                raise ValueError(f"{where}: a record {{'term': ..., 'respelling': ...}}; got {type(record).__name__}.")
            unknown = [str(key) for key in record if key not in _RECORD_KEYS]
            if unknown:
                raise ValueError(
                    f"{where}: unknown key {clipped(visible(unknown[0]))!r}; a record has {', '.join(_RECORD_KEYS)}."
                )
            given = record.get("language", language)
            if not isinstance(given, str):
                raise ValueError(f"{where}: language must be a code such as 'en'; got {type(given).__name__}.")
            entries.append(
                make_entry(
                    record.get("term"), record.get("respelling"), given, record.get("case_sensitive", False), where
                )
            )
        return cls(tuple(entries))


def _find_cycle(leads_to: list[list[int]]) -> list[int] | None:
    """A circle in the graph (node -> nodes), as its nodes in order, or None (iterative depth-first search)."""
    state = [0] * len(leads_to)  # 0 unseen, 1 on the current path, 2 done
    for root in range(len(leads_to)):
        if state[root]:
            continue
        path, stack = [root], [iter(leads_to[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                return path[path.index(nxt) :]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(leads_to[nxt]))
    return None


def _shown_separator(separator: str) -> str:
    return "<TAB>" if separator == "\t" else f" {separator} "


def parse_lexicon_text(text: str, language: str, source: str = "lexicon", kind: str = "tsv") -> Lexicon:
    """A lexicon from its text (`kind` "tsv": lines of term<TAB>respelling[<TAB>case]; "json"). `language` is the
    voice's: the entries before any `[xx]` line are its. A ValueError names `source` and the line."""
    if kind == "json":
        return _parse_json(text, language, source)
    if kind != "tsv":
        raise ValueError(f"kind is 'tsv' or 'json'; got {clipped(visible(kind))!r}.")
    entries = []
    current = language
    for number, raw in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        line = raw.removesuffix("\r")
        where = f"{source} line {number}"
        stripped = line.strip(" ")
        if not stripped.strip() or stripped.startswith("#"):
            continue
        separator = "\t" if "\t" in line else ARROW if ARROW in line else None
        if separator is None:
            header = stripped.strip()
            if header.startswith("[") and header.endswith("]"):
                code = header[1:-1].strip()
                if not is_valid_language_code(code) or _problem_chars(code):
                    raise ValueError(
                        f"{where}: {clipped(visible(header, keep=()))!r} is not a language section: write [en], [es], "
                        "[amh], ..."
                    )
                current = canonical_language(code)
                continue
            raise ValueError(
                f"{where}: no tab or {ARROW} in {clipped(visible(line, keep=()), 60)!r}: each entry is "
                f"term<TAB>respelling or term {ARROW} respelling (a term may hold spaces)."
            )
        fields = line.split(separator)
        if len(fields) > 3 or (len(fields) == 3 and fields[2].strip() not in ("", CASE_FLAG)):
            raise ValueError(
                f"{where}: {len(fields)} fields; an entry is term{_shown_separator(separator)}respelling, optionally "
                f"followed by {_shown_separator(separator)}{CASE_FLAG} to match the term's case exactly."
            )
        case = len(fields) == 3 and fields[2].strip() == CASE_FLAG
        entries.append(make_entry(fields[0], fields[1], current, case, where))
        if len(entries) > MAX_ENTRIES:
            raise ValueError(f"{where}: more than {MAX_ENTRIES:,} entries: split the lexicon by voice.")
    return Lexicon(tuple(entries))


def _parse_json(text: str, language: str, source: str) -> Lexicon:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen and seen[key] != value:
                raise ValueError(
                    f"{source}: the term {clipped(visible(key))!r} is given twice, as {clipped(visible(seen[key]))!r} "
                    f"and {clipped(visible(value))!r}. Keep one."
                )
            seen[key] = value
        return seen

    try:
        value = json.loads(text.removeprefix("\ufeff"), object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} line {exc.lineno}: not valid JSON ({exc.msg}).") from None
    if not isinstance(value, (dict, list)):
        raise ValueError(
            f"{source}: a JSON lexicon is {{term: respelling}} or a list of records; got {type(value).__name__}."
        )
    return Lexicon.from_records(value, language, source)


def read_lexicon_file(path: str | os.PathLike, language: str) -> Lexicon:
    """The lexicon in a file (`.json`: JSON, else term<TAB>respelling lines), for a voice of `language`; a ValueError
    names the file and the line of any problem (missing, over 1 MiB, not UTF-8, a bad entry)."""
    file = Path(path).expanduser()
    name = clipped(visible(str(path)))
    try:
        size = file.stat().st_size
        if not file.is_file():
            raise ValueError(f"lexicon_file {name} is not a file: give a UTF-8 text file of term<TAB>respelling lines.")
    except OSError:
        raise ValueError(
            f"lexicon_file not found: {name}. Give a UTF-8 text file of term<TAB>respelling lines (docs/lexicon.md), "
            "or '' for none."
        ) from None
    if size > MAX_FILE_BYTES:
        raise ValueError(
            f"lexicon_file {name} is {size:,} bytes, over {MAX_FILE_BYTES:,}: a lexicon holds names and terms."
        )
    data = file.read_bytes()[: MAX_FILE_BYTES + 1]
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"lexicon_file {name} is over {MAX_FILE_BYTES:,} bytes: a lexicon holds names and terms.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValueError(
            f"{name} line {line}: not UTF-8 text (byte 0x{data[exc.start]:02X}); save it as UTF-8."
        ) from None
    return parse_lexicon_text(text, language, name, "json" if file.suffix.lower() == ".json" else "tsv")


def lexicon_from(value: Any, language: str, source: str = "lexicon") -> Lexicon:
    """A lexicon from what a caller gives: a Lexicon, a file path, `{term: respelling}`, a list of records or
    (term, respelling[, case_sensitive]) pairs; None or empty for none."""
    if isinstance(value, Lexicon):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return Lexicon()
    if isinstance(value, (str, os.PathLike)):
        return read_lexicon_file(value, language)
    return Lexicon.from_records(value, language, source)


def lexicon_to_text(lexicon: Lexicon, language: str, separator: str = "\t") -> str:
    """The lexicon as the file format (term<TAB>respelling[<TAB>case] lines, or with `separator` " -> " as the page
    shows it; other languages under their `[xx]`): what parse_lexicon_text reads back to the same lexicon."""
    language = canonical_language(language)
    lines = []
    for code in sorted(lexicon.languages, key=lambda c: (c != language, c)):
        if code != language or lines:
            lines.append(f"[{code}]")
        for entry in lexicon.entries:
            if entry.language == code:
                fields = [entry.term, entry.respelling] + ([CASE_FLAG] if entry.case_sensitive else [])
                lines.append(separator.join(fields))
    return "\n".join(lines) + ("\n" if lines else "")
