"""Several datasets in one run: each with its own language and how often its rows are drawn.

A run's `train_csv` is one CSV, or a list of datasets. An entry of the list is written `[LANG][:HOW_OFTEN]=PATH`
(or given as a dict / `DatasetEntry`): `en=ljs/metadata.csv`, `amh:2=amharic/metadata.csv` (each row drawn twice an
epoch), `en:20%=english/metadata.csv` (a replay share: that dataset's rows are 20% of every epoch, drawn at random,
others each epoch). A bare path takes the run's `language`. `eval_csv` is then a list too, one per dataset ("" holds
out 15% of that dataset's rows).

Each dataset is checked on its own (its language's text checks, its own check cache), and the reports are joined
into one `DatasetReport` (`validate_datasets`): rows of the same audio file in two datasets are used once and said,
the per-dataset summary is kept in `report.datasets`, and the fingerprint covers each dataset's language and rate,
so a resume with another list is refused with the difference named.

How rows are drawn (`draw_counts`, the one formula the report, the sampler and the page use): a dataset with weight
w and n training rows gives round(w x n) rows to each epoch: every row floor(w) times and a random round(frac(w) x
n) of them once more, drawn anew each epoch from the run's seed. A share s gives round(s / (1 - S) x R) rows, R
being the rows the weighted datasets give and S the sum of the shares, so it is s of the epoch.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.text.languages import canonical_language, is_valid_language_code

# What comes before '=' in `lang:rate=path`: a language code, then ':' and whatever is given as the rate (checked).
ENTRY_HEAD = re.compile(r"(?:[A-Za-z]{2,3}(?:-[A-Za-z]{2,4})?)?(?::[^=/\\]*)?")
MAX_WEIGHT = 100.0
MAX_SHARE = 0.9  # a replay share of more than 90% would leave the run's own data a sliver
MAX_DATASETS = 16


@dataclass(frozen=True)
class DatasetEntry:
    """One dataset of a run: its training CSV, language, how often its rows are drawn (weight, or a share of the
    epoch when share > 0) and its own eval CSV ("": 15% held out)."""

    csv: str
    language: str
    weight: float = 1.0
    share: float = 0.0
    eval_csv: str = ""

    def text(self) -> str:
        """The entry as train_csv's list holds it: `lang:rate=path` (`lang=path` at weight 1)."""
        rate = f":{self.share * 100:g}%" if self.share else (f":{self.weight:g}" if self.weight != 1 else "")
        return f"{self.language}{rate}={self.csv}"

    @property
    def name(self) -> str:
        """How messages name the dataset: its CSV's folder and file."""
        path = Path(self.csv)
        return f"{path.parent.name}/{path.name}" if path.parent.name else path.name

    def rate(self) -> str:
        return f"{self.share:.0%} of each epoch" if self.share else f"x{self.weight:g}"


def is_mix(train_csv: Any) -> bool:
    """Whether a train_csv value is a list of datasets (as TrainArguments holds it: a tuple)."""
    return isinstance(train_csv, (tuple, list))


def _rate(text: str, where: str) -> tuple[float, float]:
    """(weight, share) of a rate written `2`, `0.5` or `20%`."""
    try:
        if text.endswith("%"):
            share = float(text[:-1]) / 100
            if not 0 < share <= MAX_SHARE:
                raise ValueError
            return 1.0, share
        weight = float(text)
        if not 0 < weight <= MAX_WEIGHT:
            raise ValueError
        return weight, 0.0
    except ValueError:
        raise ValueError(
            f"{where}: {text!r} is not how often its rows are drawn: give a weight above 0 and up to "
            f"{MAX_WEIGHT:g} (2 = each row twice an epoch, 0.5 = half of them) or a share of the epoch up to "
            f"{MAX_SHARE:.0%} ('20%')."
        ) from None


def parse_entry(value: Any, default_language: str, eval_csv: str = "") -> DatasetEntry:
    """A DatasetEntry from `lang:rate=path`, a bare path, a dict (csv/train_csv, language, weight, share,
    eval_csv) or a DatasetEntry; the language canonical, the rate checked."""
    if isinstance(value, DatasetEntry):
        entry = value
    elif isinstance(value, dict):
        unknown = set(value) - {"csv", "train_csv", "language", "weight", "share", "eval_csv"}
        if unknown:
            raise ValueError(f"train_csv: a dataset has unknown keys {sorted(unknown)} (csv, language, weight, share).")
        csv = value.get("csv") or value.get("train_csv") or ""
        rate = str(value["share"]) + "%" if value.get("share") else str(value.get("weight", 1))
        if value.get("share") and float(value["share"]) <= 1:
            rate = f"{float(value['share']) * 100:g}%"  # a fraction (0.2) or a percentage (20)
        weight, share = _rate(rate, f"train_csv {csv!r}")
        entry = DatasetEntry(
            str(csv), str(value.get("language") or default_language), weight, share, str(value.get("eval_csv") or "")
        )
    elif isinstance(value, (str, os.PathLike)):
        text = os.fspath(value).strip()
        head, _, path = text.partition("=")
        if path and head and ENTRY_HEAD.fullmatch(head) and not Path(text).exists():
            language, _, rate = head.partition(":")
            weight, share = _rate(rate.strip(), f"train_csv {text!r}") if rate.strip() else (1.0, 0.0)
            entry = DatasetEntry(path.strip(), language or default_language, weight, share)
        else:
            entry = DatasetEntry(text, default_language)
    else:
        raise ValueError(f"train_csv: {value!r} is not a dataset: give a path or 'lang:weight=path'.")
    if not entry.csv.strip():
        raise ValueError("train_csv: a dataset of the list has no CSV path.")
    if not is_valid_language_code(entry.language):
        raise ValueError(f"train_csv {entry.csv!r}: {entry.language!r} is not a language code (ISO 639: en, amh...).")
    language = canonical_language(entry.language)
    return DatasetEntry(entry.csv, language, entry.weight, entry.share, eval_csv or entry.eval_csv)


def normalized_csvs(train_csv: Any, eval_csv: Any, language: str) -> tuple[Any, Any]:
    """train_csv and eval_csv as TrainArguments holds them: a path and a path (one dataset), or a tuple of
    `lang:rate=path` texts and a tuple of eval paths of the same length (several)."""
    if not isinstance(train_csv, (list, tuple)):
        if isinstance(eval_csv, (list, tuple)):
            raise ValueError("eval_csv is a list but train_csv is one CSV: give one eval CSV (or a list of datasets).")
        return train_csv, eval_csv
    if not train_csv:
        raise ValueError("train_csv is an empty list: give at least one dataset.")
    if len(train_csv) > MAX_DATASETS:
        raise ValueError(f"train_csv lists {len(train_csv)} datasets; at most {MAX_DATASETS} are taken.")
    evals = list(eval_csv) if isinstance(eval_csv, (list, tuple)) else ([eval_csv] if eval_csv else [])
    if evals and len(evals) != len(train_csv):
        raise ValueError(
            f"eval_csv lists {len(evals)} files for {len(train_csv)} datasets: give one per dataset, '' where its "
            "rows are held out."
        )
    evals = [os.fspath(e) if e else "" for e in evals] or [""] * len(train_csv)
    entries = [parse_entry(value, language, ev) for value, ev in zip(train_csv, evals)]
    used = [path for e in entries for path in (e.csv, e.eval_csv) if path]
    twice = sorted({path for path in used if used.count(path) > 1})
    if twice:
        raise ValueError(
            f"train_csv: {twice[0]!r} is listed twice (as a dataset or an eval CSV): each CSV belongs to one dataset."
        )
    if len(entries) == 1 and entries[0].language == language and entries[0].weight == 1 and not entries[0].share:
        return entries[0].csv, entries[0].eval_csv  # one dataset in the run's language: the plain form
    if all(e.share for e in entries):
        raise ValueError("train_csv: every dataset is a share; at least one needs a weight (its rows set the epoch).")
    if sum(e.share for e in entries) > MAX_SHARE:
        raise ValueError(f"train_csv: the shares add up to more than {MAX_SHARE:.0%} of the epoch.")
    return tuple(e.text() for e in entries), tuple(e.eval_csv for e in entries)


def dataset_entries(train_csv: Any, eval_csv: Any, language: str) -> list[DatasetEntry]:
    """The run's datasets (one for a single CSV)."""
    if not is_mix(train_csv):
        return [DatasetEntry(os.fspath(train_csv), canonical_language(language), eval_csv=os.fspath(eval_csv or ""))]
    evals = list(eval_csv) if is_mix(eval_csv) else [""] * len(train_csv)
    return [parse_entry(text, language, ev) for text, ev in zip(train_csv, evals)]


def draw_counts(rows: Sequence[int], entries: Sequence[DatasetEntry]) -> list[int]:
    """Rows each dataset gives to an epoch (see the module docstring), for datasets of `rows` training rows."""
    counts = [round(e.weight * n) if not e.share else 0 for e, n in zip(entries, rows)]
    counts = [max(c, 1) if n and not e.share else c for c, n, e in zip(counts, rows, entries)]
    weighted = sum(counts)
    shares = sum(e.share for e, n in zip(entries, rows) if n)  # the share datasets with rows: s_i of every epoch
    for i, (entry, n) in enumerate(zip(entries, rows)):
        if entry.share and n:
            counts[i] = max(1, round(entry.share / (1 - shares) * weighted))
    return counts


def epoch_draw(
    groups: Sequence[Sequence[int]], counts: Sequence[int], random_order: Callable[[int], list[int]]
) -> list[int]:
    """An epoch's row indices: group g's rows repeated to counts[g] (whole copies, then the first of a fresh
    random order of the rest); `random_order(n)` is the epoch's seeded permutation of range(n)."""
    drawn: list[int] = []
    for rows, count in zip(groups, counts):
        if not rows:
            continue
        whole, rest = divmod(count, len(rows))
        drawn += list(rows) * whole
        drawn += [rows[i] for i in random_order(len(rows))[:rest]]
    return drawn


def mix_fingerprint(parts: Iterable[tuple[DatasetEntry, str]]) -> str:
    """The fingerprint of several datasets: each one's (by content) with its language and rate."""
    digest = hashlib.sha256()
    for entry, fingerprint in parts:
        digest.update(f"{entry.language}\0{entry.weight:g}\0{entry.share:g}\0{fingerprint}\0".encode())
    return digest.hexdigest()


def describe_rate(entries: Sequence[DatasetEntry]) -> str:
    return ", ".join(f"{e.name} ({e.language}, {e.rate()})" for e in entries)


def shares_note(entries: Sequence[DatasetEntry], counts: Sequence[int]) -> str:
    total = sum(counts) or 1
    return (
        "Each epoch draws "
        + ", ".join(
            f"{c} rows of {e.name} ({e.language}, {e.rate()}: {c / total:.0%})" for e, c in zip(entries, counts)
        )
        + "."
    )
