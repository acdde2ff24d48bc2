"""`prepare_dataset`: a normalised copy of a user's dataset, ready for training.

Writes `wavs/` (22.05 kHz mono), `metadata_train.csv`, `metadata_eval.csv` (coqui format, paths
relative to the folder) and `lang.txt` under an output folder. The user's CSVs and audio are only
read. Preparing into a folder that already holds a prepared dataset adds the new rows and keeps
every earlier train and eval row.

A clip already there is not added twice: each clip's name carries a hash of its decoded samples
(mono float32 at the source's rate, and that rate). Decoded samples rather than file bytes, because
the same recording often arrives in another container or with other metadata chunks (a WAV saved
again by an editor, a FLAC of it), and the clip is decoded for conversion anyway.

Each clip is converted in a pool of worker processes (utils.data.prepare_clips, utils.data.convert): its
loudness evened to one target with a true-peak ceiling (or, with even_loudness=False, kept, float audio over
full scale scaled down to a 0.99 peak, never clipped), its noise removed when asked (denoise=True, DeepFilterNet
3). A clip that cannot be read, denoised or measured is a rejected row with its reason. What was done to each
clip is in `clip_changes.jsonl` and summed up in the summary; `prepared.json` records each written clip's
probe and the folder's fingerprint, so a run on the folder opens none of its clips again.

Rows can be left out (`exclude`) and transcripts corrected (`corrections`), both keyed by the row's
`audio_file` as written in its CSV (what the dataset check lists). The edits go into the prepared copy
only, also to rows an earlier call already prepared, and are listed in the summary and in `edits.jsonl`.
"""

from __future__ import annotations

import os
import random
import re
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.constants import MAX_AUDIO_LENGTH
from utils.data.clip_probe import ClipProbe
from utils.data.convert import audio_digest  # noqa: F401 - prepare's name for it since it was defined here
from utils.data.csv_reader import CsvLayout, CsvRow, iter_rows, resolve_audio_path
from utils.data.csv_text import coqui_field
from utils.data.pool import PoolStats
from utils.data.prepare_clips import CHANGES_FILE, LISTED_NOTES, ClipCopy, Edits, change_notes, convert_rows
from utils.data.prepare_options import DEFAULTS, PrepareOptions
from utils.data.prepared_record import RECORD_FILE, prepared_fingerprint, read_record, write_record
from utils.data.validation import DatasetReport, check_options, validate_dataset
from utils.files import append_jsonl, refuse_links_in, write_text_atomic
from utils.text.visible import visible, with_visible_errors

TRAIN_FILE = "metadata_train.csv"
EVAL_FILE = "metadata_eval.csv"
LANG_FILE = "lang.txt"
MARKER_FILE = ".xtts-prepared"  # says the folder was written by prepare_dataset, so adding to it is safe
HEADER = "audio_file|text|speaker_name"
INDEX_DIR = ".index"
_DIGEST_IN_NAME = re.compile(r"_([0-9a-f]{16})\.wav$")
EDITS_FILE = "edits.jsonl"  # one line per exclusion or correction, appended by each call


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
    excluded: list[str] = field(default_factory=list)  # audio_file of each row left out on request
    corrected: list[dict[str, str]] = field(default_factory=list)  # {audio_file, before, after}
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {line, audio_file, reason}: could not be used
    options: PrepareOptions = DEFAULTS
    examples: list[tuple[str, str]] = field(default_factory=list)  # (source clip, prepared clip), a few
    fingerprint: str = ""  # of the prepared dataset, as a run on it reports (recorded in prepared.json)
    work: PoolStats = field(default_factory=PoolStats)  # the worker processes that converted the clips

    def summary(self) -> str:
        return "\n".join(
            [
                f"Prepared in {self.folder}: {self.kept_train + self.added_train} train and "
                f"{self.kept_eval + self.added_eval} eval rows ({self.added_train} + {self.added_eval} new, "
                f"{self.skipped_existing} already there).",
                *self.notes,
            ]
        )


def _digests_in(rows: list[str]) -> set[str]:
    """The audio digests in the names of rows written earlier (names from older versions have none)."""
    return {m.group(1) for row in rows if (m := _DIGEST_IN_NAME.search(row.split("|", 1)[0]))}


def _read_prepared(path: Path) -> list[str]:
    if not path.is_file():
        return []
    rows = [line for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return rows


def _write_csv(path: Path, rows: list[str]) -> None:
    write_text_atomic(path, "\n".join([HEADER, *rows]) + "\n")


def _edited(rows: list[str], edits: Edits) -> list[str]:
    """Rows an earlier call prepared, without the excluded clips and with corrected texts."""
    kept = []
    for line in rows:
        match = _DIGEST_IN_NAME.search(line.split("|", 1)[0])
        digest = match.group(1) if match else None
        if digest in edits.drop_digests:
            continue
        if digest in edits.retext:
            name, _, speaker = line.split("|", 2)
            line = f"{name}|{edits.retext[digest]}|{speaker}"
        kept.append(line)
    return kept


def _check_writable(out: Path) -> None:
    """The output folder is a folder (made if missing) this process can write in; nothing is created here."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {out} is a file, not a folder: give a folder to prepare the dataset into.")
    existing = out
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"out_dir {out} cannot be made: {existing} is a file. Give a folder to prepare into.")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise ValueError(
            f"out_dir {out} cannot be written to ({exc.strerror or exc}); choose a folder you can write in."
        ) from exc


def _check_target(out: Path, sources: list[Path], language: str) -> None:
    """Refuse an output folder that holds the user's data, someone else's files, another language, or a link
    out of it where this tool writes (wavs/ pointing elsewhere would receive the clips)."""
    _check_writable(out)
    refuse_links_in(
        out, ["wavs", INDEX_DIR, TRAIN_FILE, EVAL_FILE, LANG_FILE, MARKER_FILE, EDITS_FILE, RECORD_FILE, CHANGES_FILE]
    )
    if any(out == p.parent or out in p.parents for p in sources):
        raise ValueError(
            f"out_dir {out} holds your source CSV; prepare into a separate folder so nothing of yours is overwritten."
        )
    # The row index cache (INDEX_DIR) is ours: validation may have written it before a failed prepare.
    if out.exists() and any(p.name != INDEX_DIR for p in out.iterdir()) and not (out / MARKER_FILE).is_file():
        raise ValueError(
            f"{out} already holds files not prepared by this tool; prepare into a new folder "
            "(or one prepared before, to add to it)."
        )
    lang_file = out / LANG_FILE
    if lang_file.is_file() and lang_file.read_text(encoding="utf-8").strip() != language:
        existing = lang_file.read_text(encoding="utf-8").strip()
        raise ValueError(f"{out} already holds a '{existing}' dataset; prepare '{language}' data into another folder.")


def _checked_edits(
    exclude: Iterable[str], corrections: Mapping[str, str] | None, language: str, validation: dict[str, Any]
) -> Edits:
    """The exclusions and corrections, checked before anything is read: keys are audio_file strings, corrected
    texts pass the checks the run applies (front end, character limit, vocab)."""
    if isinstance(exclude, str):
        raise ValueError("exclude is a list of audio_file values (as written in the CSV), not one string.")
    exclude, corrections = set(exclude or ()), dict(corrections or {})
    bad = [key for key in [*exclude, *corrections] if not isinstance(key, str) or not key.strip()]
    if bad:
        raise ValueError(
            "exclude and corrections are keyed by a row's audio_file as written in the CSV; got "
            f"{', '.join(_echo(repr(key)) for key in bad[:3])}."
        )
    both = sorted(exclude & set(corrections))
    if both:
        raise ValueError(
            f"{', '.join(_echo(key) for key in both[:5])}: both excluded and corrected; keep one of the two."
        )
    from utils.data.row_checks import TextChecker

    checker = TextChecker(language, validation.get("text_frontend"), validation.get("vocab_path"))
    for key, text in corrections.items():
        if not isinstance(text, str):
            raise ValueError(f"The correction for {_echo(key)} must be text; got {_echo(repr(text))}.")
        controls = sorted({char for char in coqui_field(text) if unicodedata.category(char) == "Cc"})
        if controls:
            raise ValueError(
                f"The correction for {_echo(key)} holds control characters ({' '.join(map(visible, controls[:12]))}), "
                "which are not words anyone says: remove them."
            )
        errors = [reason for severity, reason in checker.check(coqui_field(text)) if severity == "error"]
        if errors:
            raise ValueError(f"The correction for {_echo(key)} cannot be used: {visible(errors[0])}")
    return Edits(exclude, {key: coqui_field(text) for key, text in corrections.items()})


ECHO_CHARS = 80  # the most of a value from the caller that a message repeats


def _echo(value: str) -> str:
    """A value from the caller as a message repeats it: invisible and control characters written as [U+XXXX]
    (a NUL, a bell or an escape sequence would act in a terminal or a log), at most ECHO_CHARS of it, its length said
    when cut (a script may send a megabyte)."""
    text = str(value)
    if len(text) > ECHO_CHARS:
        text = f"{text[:ECHO_CHARS]}... ({len(text):,} characters)"
    return visible(text)


def _check_edit_rows(
    edits: Edits, usable: list[tuple[CsvRow, str]], report: DatasetReport, kept: dict[str, list[str]]
) -> None:
    """Every edited row names a row of the dataset, and each split keeps at least one row."""
    named = {row.audio_file for row, _ in usable} | {p.audio_file for p in report.problems if p.audio_file}
    unknown = sorted((edits.exclude | set(edits.corrections)) - named)
    if unknown:
        raise ValueError(
            f"No row of the dataset has the audio_file {', '.join(_echo(repr(name)) for name in unknown[:5])}: give "
            "audio_file as written in the CSV (the dataset check lists them)."
        )
    for split in ("train", "eval"):
        rows = [row.audio_file for row, in_split in usable if in_split == split]
        if edits.exclude and rows and not kept[split] and all(name in edits.exclude for name in rows):
            raise ValueError(f"Excluding these rows leaves no {split} row: keep at least one.")


def _edit_notes(out: Path, edits: Edits) -> list[str]:
    """The edits, recorded in the folder's edits.jsonl and described for the summary."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    for audio_file in edits.excluded:
        append_jsonl(out / EDITS_FILE, {"time": stamp, "edit": "excluded", "audio_file": audio_file})
    for change in edits.corrected:
        append_jsonl(out / EDITS_FILE, {"time": stamp, "edit": "corrected", **change})
    notes = []
    if edits.excluded:
        shown = ", ".join(edits.excluded[:LISTED_NOTES]) + (", ..." if len(edits.excluded) > LISTED_NOTES else "")
        notes.append(f"{len(edits.excluded)} row(s) excluded on request: {shown}.")
    if edits.corrected:
        shown = "; ".join(f'{c["audio_file"]}: "{c["after"]}"' for c in edits.corrected[:LISTED_NOTES])
        notes.append(
            f"{len(edits.corrected)} transcript(s) corrected in the prepared copy (your CSV is unchanged): "
            f"{shown}{'; ...' if len(edits.corrected) > LISTED_NOTES else ''}."
        )
    return notes


@with_visible_errors
def prepare_dataset(
    train_csv: str | os.PathLike,
    out_dir: str | os.PathLike,
    eval_csv: str | os.PathLike | None = None,
    language: str = "en",
    max_audio_length: int = MAX_AUDIO_LENGTH,
    *,
    seed: int = 1,
    exclude: Iterable[str] = (),
    corrections: Mapping[str, str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    even_loudness: bool = DEFAULTS.even_loudness,
    loudness_target: float = DEFAULTS.loudness_target,
    denoise: bool = DEFAULTS.denoise,
    workers: int = DEFAULTS.workers,
    should_stop: Callable[[], bool] | None = None,
    **validation: Any,
) -> PreparedDataset:
    """Validate, then copy the usable rows into `out_dir` as a normalised dataset (see module doc).

    `exclude`: audio_file values (as written in the CSV) of rows to leave out; `corrections`: {audio_file: text}
    to use instead of the CSV's text. Both apply to the prepared copy only and are listed in its summary.
    `even_loudness`, `loudness_target`, `denoise`, `workers`: how each clip is processed, declared in
    utils.data.prepare_options.PrepareOptions. `should_stop`: asked between clips (utils.data.pool.PoolStopped).
    `validation` goes to validate_dataset (e.g. utils.data.text_checks.text_check_options(...) for a run's text
    checks, `cache_dir` for the check cache: by default the folder's own .index)."""
    lang = check_options(language, max_audio_length, validation.get("audio_check", "auto"))
    options = PrepareOptions(even_loudness, loudness_target, denoise, workers)
    _check_denoiser(options)
    out = Path(out_dir).expanduser().resolve()
    _check_target(out, [Path(p).resolve() for p in (train_csv, eval_csv) if p], lang)
    edits = _checked_edits(exclude, corrections, lang, validation)
    validation.setdefault("cache_dir", out / INDEX_DIR)
    report = validate_dataset(
        train_csv,
        eval_csv,
        lang,
        max_audio_length,
        seed=seed,
        index_dir=out / INDEX_DIR,
        progress=progress,
        workers=workers or None,
        should_stop=should_stop,
        **validation,
    )
    if report.rows_usable == 0:
        raise ValueError("No usable rows to prepare:\n" + report.summary())
    kept = {"train": _read_prepared(out / TRAIN_FILE), "eval": _read_prepared(out / EVAL_FILE)}
    usable = [(row, split) for split, row, _ in report.iter_usable_splits()]
    _check_edit_rows(edits, usable, report, kept)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER_FILE).touch()
    # "" marks audio that was there before this call: skipping it needs no note.
    copy = ClipCopy(existing=dict.fromkeys(_digests_in(kept["train"] + kept["eval"]), ""), edits=edits)
    convert_rows(usable, out, copy, options, progress, should_stop)
    return _write_prepared(out, lang, report, kept, copy, options)


def _check_denoiser(options: PrepareOptions) -> None:
    """A missing denoiser is said once, before anything is read or written (not once per clip)."""
    if not options.denoise:
        return
    from utils.audio.denoise import DenoiseUnavailable, check_denoiser

    try:
        check_denoiser()
    except DenoiseUnavailable as exc:
        raise ValueError(f"denoise=True cannot be done here: {exc}") from exc


def _write_prepared(
    out: Path, lang: str, report: DatasetReport, kept: dict[str, list[str]], copy: ClipCopy, options: PrepareOptions
) -> PreparedDataset:
    """The prepared CSVs (earlier rows, edited, then the new ones), the language file and the folder's record
    (prepared.json: its clips' probes and its fingerprint), each atomically."""
    edits = copy.edits
    kept_train, kept_eval = _edited(kept["train"], edits), _edited(kept["eval"], edits)
    new_train = [line for split, line in copy.rows if split == "train"]
    new_eval = [line for split, line in copy.rows if split == "eval"]
    _write_csv(out / TRAIN_FILE, kept_train + new_train)
    _write_csv(out / EVAL_FILE, kept_eval + new_eval)
    write_text_atomic(out / LANG_FILE, lang + "\n")
    fingerprint = _write_record(out, kept_train + new_train + kept_eval + new_eval, copy.probes)
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
        skipped_existing=copy.skipped,
        notes=change_notes(copy, options) + _edit_notes(out, edits),
        excluded=edits.excluded,
        corrected=edits.corrected,
        rejected=copy.rejected,
        options=options,
        examples=copy.examples,
        fingerprint=fingerprint,
        work=copy.pool,
    )


def _write_record(out: Path, rows: list[str], new: dict[str, ClipProbe]) -> str:
    """prepared.json for the clips the CSVs now name: this call's probes, an earlier call's for the others."""
    _, earlier = read_record(out)
    names = {line.split("|", 1)[0] for line in rows}
    clips = {name: probe for name, probe in {**earlier, **new}.items() if name in names}
    by_location = {resolve_audio_path(name, str(out)): probe for name, probe in clips.items()}
    fingerprint = prepared_fingerprint(out / TRAIN_FILE, out / EVAL_FILE, by_location)
    write_record(out, clips, fingerprint)
    return fingerprint


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
