"""`prepare_dataset`: a normalised copy of a user's dataset, ready for training.

Writes `wavs/` (22.05 kHz mono), `metadata_train.csv`, `metadata_eval.csv` (coqui format, paths
relative to the folder) and `lang.txt` under an output folder. The user's CSVs and audio are only
read. Preparing into a folder that already holds a prepared dataset adds the new rows and keeps
every earlier train and eval row; a clip already there (same source file) is not added twice.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from utils.audio.io import load_audio, write_wav
from utils.files import write_text_atomic
from utils.constants import MAX_AUDIO_LENGTH, XTTS_SAMPLE_RATE
from utils.data.validation import DatasetReport, validate_dataset
from utils.data.csv_reader import CsvLayout, CsvRow, iter_rows
from utils.text.languages import canonical_language

TRAIN_FILE = "metadata_train.csv"
EVAL_FILE = "metadata_eval.csv"
LANG_FILE = "lang.txt"
MARKER_FILE = ".xtts-prepared"  # says the folder was written by prepare_dataset, so adding to it is safe
HEADER = "audio_file|text|speaker_name"
INDEX_DIR = ".index"


@dataclass
class PreparedDataset:
    folder: Path
    train_csv: Path
    eval_csv: Path
    language: str
    report: DatasetReport
    added_train: int = 0
    added_eval: int = 0
    kept_train: int = 0
    kept_eval: int = 0
    skipped_existing: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"Prepared in {self.folder}: {self.kept_train + self.added_train} train and "
            f"{self.kept_eval + self.added_eval} eval rows ({self.added_train} + {self.added_eval} new, "
            f"{self.skipped_existing} already there)."
        )


def _clip_name(source: Path) -> str:
    """A stable name per source file, so adding the same data again is recognised."""
    stat = source.stat()
    digest = hashlib.sha1(f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:10]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", source.stem)[:60] or "clip"
    return f"wavs/{stem}_{digest}.wav"


def _clean_field(value: str) -> str:
    # The output is pipe-separated, one row per line.
    return value.replace("|", " ").replace("\n", " ").replace("\r", " ").strip()


def _read_prepared(path: Path) -> list[str]:
    if not path.is_file():
        return []
    rows = [line for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return rows


def _write_csv(path: Path, rows: list[str]) -> None:
    write_text_atomic(path, "\n".join([HEADER, *rows]) + "\n")


def _write_clip(row: CsvRow, target: Path) -> None:
    wav, _ = load_audio(row.audio_location)
    write_wav(target, wav, XTTS_SAMPLE_RATE)


def prepare_dataset(
    train_csv: str | os.PathLike,
    out_dir: str | os.PathLike,
    eval_csv: str | os.PathLike | None = None,
    language: str = "en",
    max_audio_length: int = MAX_AUDIO_LENGTH,
    *,
    seed: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
    **validation: Any,
) -> PreparedDataset:
    """Validate, then copy the usable rows into `out_dir` as a normalised dataset (see module doc).

    `validation` goes to validate_dataset (e.g. training.text_checks.text_check_options(...) for a run's text checks)."""
    out = Path(out_dir).expanduser().resolve()
    sources = [Path(p).resolve() for p in (train_csv, eval_csv) if p]
    if any(out == p.parent or out in p.parents for p in sources):
        raise ValueError(f"out_dir {out} holds your source CSV; prepare into a separate folder so nothing of "
                         "yours is overwritten.")  # fmt: skip
    if out.exists() and any(out.iterdir()) and not (out / MARKER_FILE).is_file():
        raise ValueError(f"{out} already holds files not prepared by this tool; prepare into a new folder "
                         "(or one prepared before, to add to it).")  # fmt: skip
    lang = canonical_language(language)
    lang_file = out / LANG_FILE
    if lang_file.is_file() and lang_file.read_text(encoding="utf-8").strip() != lang:
        existing = lang_file.read_text(encoding="utf-8").strip()
        raise ValueError(f"{out} already holds a '{existing}' dataset; prepare '{lang}' data into another folder.")

    report = validate_dataset(train_csv, eval_csv, lang, max_audio_length, seed=seed,
                              index_dir=out / INDEX_DIR, progress=progress, **validation)  # fmt: skip
    if report.rows_usable == 0:
        raise ValueError("No usable rows to prepare:\n" + report.summary())
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER_FILE).touch()
    kept_train = _read_prepared(out / TRAIN_FILE)
    kept_eval = _read_prepared(out / EVAL_FILE)
    existing = {row.split("|", 1)[0] for row in kept_train + kept_eval}

    new_rows: list[tuple[str, str]] = []  # (split, csv line)
    skipped = 0
    usable = [(row, split) for split, row, _ in report.iter_usable_splits()]
    for done, (row, split) in enumerate(usable, start=1):
        name = _clip_name(row.audio_path)
        if name in existing:
            skipped += 1
            continue
        if progress:
            progress(done, len(usable), f"Converting {row.audio_file}")
        _write_clip(row, out / name)
        existing.add(name)
        new_rows.append((split, f"{name}|{_clean_field(row.text)}|{_clean_field(row.speaker_name) or 'speaker'}"))

    new_train = [line for split, line in new_rows if split == "train"]
    new_eval = [line for split, line in new_rows if split == "eval"]
    _write_csv(out / TRAIN_FILE, kept_train + new_train)
    _write_csv(out / EVAL_FILE, kept_eval + new_eval)
    write_text_atomic(lang_file, lang + "\n")
    return PreparedDataset(
        folder=out,
        train_csv=out / TRAIN_FILE,
        eval_csv=out / EVAL_FILE,
        language=lang,
        report=report,
        added_train=len(new_train),
        added_eval=len(new_eval),
        kept_train=len(kept_train),
        kept_eval=len(kept_eval),
        skipped_existing=skipped,
    )


def preview_rows(
    csv_path: str | os.PathLike, count: int = 5, *, seed: int | None = None, layout: CsvLayout | None = None
) -> list[CsvRow]:
    """A few rows for a preview: the first `count`, or (seeded) a uniform sample of the whole file,
    drawn by reservoir sampling so a huge CSV needs no more memory than `count` rows."""
    rng = random.Random(seed) if seed is not None else None
    rows: list[CsvRow] = []
    seen = 0
    for row in iter_rows(csv_path, layout):
        if not isinstance(row, CsvRow):
            continue
        seen += 1
        if len(rows) < count:
            rows.append(row)
        elif rng is None:
            break
        else:
            slot = rng.randrange(seen)
            if slot < count:
                rows[slot] = row
    return sorted(rows, key=lambda r: r.line)
