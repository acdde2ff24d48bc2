"""Rows' problems counted by kind, for a dataset's summary: "12 × Clip is 0.21–0.93 s, shorter than 1 s".

A reason is grouped by its template: its first clause (up to the first ": ", "; " or the end of its first
sentence), with what differs from row to row taken out as slots: numbers, the row's own audio path, quoted text
and a parenthesised list of single characters (the characters a vocabulary lacks). A group's label is that clause
read whole again: a number as the range its rows span ("0.21–0.93"), any other slot as its first row's value, said
to be one of several ("... and others") when the rows differ. Nothing is dropped from the clause, so a label always
reads as the reasons it counts do, and a group keeps a few values whatever its rows (bounded memory: a million rows
of one kind are one group).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from utils.data.csv_reader import Problem, resolve_audio_path
from utils.text.visible import visible

MAX_GROUPS = 1_000  # kinds of reasons kept apart; any further kind is counted under OTHER (hostile CSVs)
OTHER = "Other reasons (each listed with its row)"
SLOT_CHARS = 100  # the most of a slot's value a label shows
_PATH_MARKS = ("\ue000", "\ue001")  # a row's paths while the clause is cut: private-use, never in a visible() text
_CUT = re.compile(r":(?=\s|$)|;\s|\.\s+(?=[A-Z])")
_UNICODE_NAME = r"\[U\+[0-9A-F]{4,6}\]"
_SLOTS = re.compile(
    "(?P<path>[\ue000\ue001])"
    r"|(?P<quote>(?<![\w'])'[^']*'(?!\w)|(?<![\w\"])\"[^\"]*\"(?!\w))"
    rf"|(?P<chars>\((?:(?:{_UNICODE_NAME}|[^\s()]) )*(?:{_UNICODE_NAME}|[^\s()])\))"
    r"|(?P<number>(?<![\w.+])(?<![A-Za-z]-)-?\d+(?:\.\d+)?(?!\w))"
)
_PATH_END = " \t)'\",.;:"


@dataclass
class _Group:
    """One template's rows: the first row's slot values, each number's range, and which slots differ."""

    parts: list[str]  # the clause's text between slots (one more than the slots)
    kinds: list[str]
    first: list[str]
    low: list[tuple[float, str]] = field(default_factory=list)
    high: list[tuple[float, str]] = field(default_factory=list)
    differs: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        numbers = [(float(v), v) if k == "number" else (0.0, "") for k, v in zip(self.kinds, self.first)]
        self.low, self.high = list(numbers), list(numbers)
        self.differs = [False] * len(self.kinds)

    def add(self, values: list[str]) -> None:
        for i, (kind, value) in enumerate(zip(self.kinds, values)):
            if value == self.first[i]:
                continue
            self.differs[i] = True
            if kind == "number":
                number = float(value)
                self.low[i] = min(self.low[i], (number, value))
                self.high[i] = max(self.high[i], (number, value))

    def label(self) -> str:
        # Ranges of two numbers written with a hyphen between them ("lines 3-4") would read as one number.
        joined = any(
            self.differs[i] and self.differs[i + 1] and self.parts[i + 1] == "-"
            for i in range(len(self.kinds) - 1)
            if self.kinds[i] == self.kinds[i + 1] == "number"
        )
        text = self.parts[0]
        for i, kind in enumerate(self.kinds):
            text += self._slot(i, kind, joined) + self.parts[i + 1]
        return ("e.g. " if joined else "") + text

    def _slot(self, i: int, kind: str, joined: bool) -> str:
        value = _short(self.first[i])
        if not self.differs[i]:
            return value
        if kind == "number":
            if joined:
                return value
            low, high = self.low[i][1], self.high[i][1]
            return f"{low} to {high}" if low.startswith("-") or high.startswith("-") else f"{low}–{high}"
        if kind == "chars":
            return f"{value[:-1]} and others)"
        return f"{value} and others"


def _short(value: str) -> str:
    return value if len(value) <= SLOT_CHARS else value[: SLOT_CHARS - 3] + "..."


def _clause(reason: str) -> str:
    """The reason's first clause; a parenthesis it leaves open is cut off whole ("decoded (Error opening ...")."""
    match = _CUT.search(reason)
    clause = reason[: match.start()] if match else reason
    while clause.count("(") > clause.count(")"):
        clause = clause[: clause.rindex("(")]
    return clause.rstrip(" .,;")


def _mark_paths(reason: str, paths: Iterable[str]) -> tuple[str, list[str]]:
    """The reason with each of the row's paths, where it stands as a word, replaced by a mark; and the paths."""
    kept: list[str] = []
    for path in sorted({p for p in paths if len(p) > 2}, key=len, reverse=True)[: len(_PATH_MARKS)]:
        mark, at = _PATH_MARKS[len(kept)], 0
        while (at := reason.find(path, at)) >= 0:
            end = at + len(path)
            if (at == 0 or reason[at - 1] in " ('\"") and (end == len(reason) or reason[end] in _PATH_END):
                reason = reason[:at] + mark + reason[end:]
                at += len(mark)
            else:
                at = end
        kept.append(path)
    return reason, kept


def _row_paths(problem: Problem) -> list[str]:
    """The row's audio path as written and as it resolves, as a reason shows them."""
    if not problem.audio_file:
        return []
    paths = [problem.audio_file]
    if problem.csv_file:
        paths.append(resolve_audio_path(problem.audio_file, os.path.dirname(problem.csv_file)))
    return [visible(p) for p in paths]


def parse_reason(reason: str, paths: Iterable[str] = ()) -> tuple[str, list[str], list[str], list[str]]:
    """(template, the clause's text between slots, slot kinds, slot values) of a reason (see the module docstring)."""
    marked, kept = _mark_paths(reason, paths)
    clause = _clause(marked)
    parts, kinds, values, at = [], [], [], 0
    for match in _SLOTS.finditer(clause):
        kind = match.lastgroup or ""
        parts.append(clause[at : match.start()])
        kinds.append(kind)
        value = match.group()
        values.append(kept[_PATH_MARKS.index(value)] if kind == "path" else value)
        at = match.end()
    parts.append(clause[at:])
    template = "".join(f"{part}{{{kind}}}" for part, kind in zip(parts, kinds)) + parts[-1]
    return template, parts, kinds, values


@dataclass
class ReasonCounts:
    """Row problems counted by the kind of their reason; `labels()` names each kind as `_Group.label` reads it."""

    counts: Counter = field(default_factory=Counter)  # template -> rows
    drops: Counter = field(default_factory=Counter)  # template -> rows not used for it
    groups: dict[str, _Group] = field(default_factory=dict)

    def add(self, problem: Problem, *, drops_row: bool) -> None:
        template, parts, kinds, values = parse_reason(problem.reason, _row_paths(problem))
        group = self.groups.get(template)
        if group is None and len(self.groups) < MAX_GROUPS:
            group = self.groups[template] = _Group(parts, kinds, values)
        elif group is None:
            template = OTHER
        else:
            group.add(values)
        self.counts[template] += 1
        if drops_row:
            self.drops[template] += 1

    def labels(self) -> tuple[dict[str, int], dict[str, int]]:
        """({label: rows}, {label: rows not used}), most rows first."""
        names = {template: group.label() for template, group in self.groups.items()}
        names[OTHER] = OTHER

        def by_label(counter: Counter) -> dict[str, int]:
            labelled: Counter = Counter()
            for template, count in counter.items():
                labelled[names[template]] += count
            return dict(labelled.most_common())

        return by_label(self.counts), by_label(self.drops)
