"""Uploaded dataset zips: extracted once per content, and never left half-extracted or unused.

`extract_upload` extracts a zip (with `extract_zip_safely`'s limits) into a staging folder, finds its
metadata CSV, and only then moves it to `<root>/<sha256 of the zip>/` in one rename. The same zip
uploaded again (under any name) is found there and reused, not copied again. A zip that is refused,
or holds no metadata CSV, leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.data.csv_reader import detect_layout
from utils.data.safe_zip import extract_zip_safely

DONE_MARKER = ".extracted"  # written last into the staging folder: a folder without it is incomplete
DIGEST_CHARS = 32


@dataclass(frozen=True)
class ExtractedUpload:
    folder: Path
    train_csv: Path
    eval_csv: Path | None
    reused: bool  # the same zip was extracted before


def file_digest(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes (read in 1 MiB blocks), as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


def find_metadata_csvs(files: list[Path], root: Path) -> tuple[Path, Path | None]:
    """The train (and eval) metadata CSVs among a zip's files: readable layouts only, .csv before .txt,
    shallow before deep, names with "train" (or "metadata") first; "eval" names are the eval CSV.
    `root` is the folder the files were extracted into. Raises ValueError saying what the zip holds instead."""
    texts = [
        f
        for f in files
        if f.suffix.lower() in (".csv", ".txt")
        and not any(part.startswith((".", "__MACOSX")) for part in f.relative_to(root).parts)
    ]
    candidates = [f for f in texts if not any(p.severity == "error" for p in detect_layout(f).problems)]
    candidates.sort(key=lambda f: (f.suffix.lower() != ".csv", len(f.parts), f.name))
    evals = [f for f in candidates if "eval" in f.name.lower() or "valid" in f.name.lower()]
    trains = [f for f in candidates if f not in evals]
    trains.sort(key=lambda f: not any(word in f.name.lower() for word in ("train", "metadata")))
    if trains:
        return trains[0], evals[0] if evals else None
    nested = [f.name for f in files if f.suffix.lower() in (".zip", ".tar", ".gz", ".7z", ".rar")]
    found = (
        f" It holds another archive ({', '.join(nested[:3])}): zip the CSV and the audio themselves."
        if nested
        else f" Its text files are not metadata CSVs: {', '.join(f.name for f in texts[:3])}."
        if texts
        else f" It holds {len(files)} file(s) and no .csv or .txt."
    )
    raise ValueError(f"The zip holds no metadata CSV (audio_file|text|speaker_name) next to its audio.{found}")


def _reuse(folder: Path) -> ExtractedUpload:
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != DONE_MARKER]
    train, evaluation = find_metadata_csvs(files, folder)
    return ExtractedUpload(folder, train, evaluation, reused=True)


def extract_upload(zip_path: str | os.PathLike, root: str | os.PathLike, **limits: Any) -> ExtractedUpload:
    """Extract (or reuse) an uploaded zip under `root`; see the module docstring. `limits` go to
    extract_zip_safely. Raises UnsafeArchiveError (a ValueError) for a refused zip and ValueError for
    one without a metadata CSV, in both cases with nothing left on disk."""
    root = Path(root)
    final = root / file_digest(zip_path)[:DIGEST_CHARS]
    if (final / DONE_MARKER).is_file():
        return _reuse(final)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        files = extract_zip_safely(zip_path, staging, **limits)
        found = find_metadata_csvs(files, staging)
        (staging / DONE_MARKER).touch()
        if final.exists():  # an incomplete folder of ours (no marker), or another upload just finished
            if (final / DONE_MARKER).is_file():
                shutil.rmtree(staging)
                return _reuse(final)
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    train, evaluation = (final / p.relative_to(staging) if p else None for p in found)
    return ExtractedUpload(final, train, evaluation, reused=False)
