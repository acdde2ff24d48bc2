"""Rows that name the same audio file: the first is kept, every other one is reported and dropped."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from utils.data.csv_reader import CsvRow, Problem, iter_rows
from utils.data.report import UsableRows


def path_hash(location: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(location.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little", signed=True
    )


def drop_duplicate_audio(files: list[UsableRows]) -> list[Problem]:
    """Keep the first row of each audio file (across train and eval); a warning for each other row.

    Works on the 8-byte path hashes, sorted, so a million rows need no dictionary of paths."""
    if not files or not any(len(u.hashes) for u in files):
        return []
    keys = np.concatenate([np.frombuffer(u.hashes, dtype=np.int64) for u in files])
    owner = np.concatenate([np.full(len(u.hashes), i) for i, u in enumerate(files)])
    position = np.concatenate([np.arange(len(u.hashes)) for u in files])
    order = np.argsort(keys, kind="stable")  # stable: the first file's and line's row comes first
    repeats = np.flatnonzero(keys[order][1:] == keys[order][:-1]) + 1
    if not len(repeats):
        return []
    group_start = np.maximum.accumulate(
        np.where(np.r_[True, keys[order][1:] != keys[order][:-1]], np.arange(len(order)), 0)
    )
    masks = [np.ones(len(u.hashes), dtype=bool) for u in files]
    wanted: dict[int, dict[int, str]] = {}
    for r in repeats:
        this, first = order[r], order[group_start[r]]
        masks[owner[this]][position[this]] = False
        first_file = files[owner[first]]
        where = f"line {first_file.lines[position[first]]}"
        if owner[first] != owner[this]:
            where += f" of {Path(first_file.csv_file).name}"
        wanted.setdefault(int(owner[this]), {})[int(files[owner[this]].lines[position[this]])] = where
    problems = []
    for index, lines in wanted.items():
        for row in iter_rows(files[index].csv_file, files[index].layout):  # once per file with duplicates
            if isinstance(row, CsvRow) and row.line in lines:
                problems.append(
                    Problem(
                        row.line,
                        row.audio_file,
                        "warning",
                        f"Same audio file as {lines[row.line]}: only the first is used.",
                        files[index].csv_file,
                    )
                )
    for usable, mask in zip(files, masks):
        usable.keep(mask)
    return problems
