"""Prepare's conversion of the usable rows: every clip converted in the process pool (utils.data.convert), the
results taken in row order, so the prepared CSVs are the same whatever the number of processes.

Here, in row order: the user's exclusions and corrections, clips already in the folder (by their samples'
digest), rows with the same audio as an earlier row, and clips that cannot be used (a rejected row with its
reason, never a failed Prepare). What was done to each added clip (loudness before and after, gain, SNR before
and after denoising) is appended to CHANGES_FILE and summed up in the notes.
"""

from __future__ import annotations

import contextlib
import statistics
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.audio.loudness import MAX_GAIN_DB, TRUE_PEAK_CEILING_DBTP
from utils.data.clip_probe import ClipProbe
from utils.data.convert import Converted, ConvertSettings, convert_item
from utils.data.csv_reader import CsvRow
from utils.data.csv_text import coqui_field
from utils.data.pool import ClipPool, PoolStats, TaskFailed
from utils.data.prepare_options import PrepareOptions
from utils.data.progress import CountedProgress
from utils.files import append_jsonl

CHANGES_FILE = "clip_changes.jsonl"  # one line per clip added: its loudness and SNR before and after
LISTED_NOTES = 5  # clips named one by one in a note; the rest are counted
EXAMPLES = 3  # clips kept for before/after players


@dataclass
class Edits:
    """The user's exclusions and corrections, keyed by audio_file as written in the CSV."""

    exclude: set[str]
    corrections: dict[str, str]
    excluded: list[str] = field(default_factory=list)
    corrected: list[dict[str, str]] = field(default_factory=list)
    drop_digests: set[str] = field(default_factory=set)  # excluded clips already in the prepared folder
    retext: dict[str, str] = field(default_factory=dict)  # digest -> corrected text, for rows already there

    def of(self, row: CsvRow) -> tuple[bool, str | None]:
        """(excluded, corrected text or None) for a row, noting the edit for the report."""
        if row.audio_file in self.exclude:
            self.excluded.append(row.audio_file)
            return True, None
        text = self.corrections.get(row.audio_file)
        if text is not None:
            self.corrected.append({"audio_file": row.audio_file, "before": row.text, "after": text})
        return False, text


@dataclass
class ClipCopy:
    """What converting the usable rows did."""

    existing: dict[str, str]  # digest -> where it is ("" already in the dataset, or "line N")
    edits: Edits = field(default_factory=lambda: Edits(set(), {}))
    rows: list[tuple[str, str]] = field(default_factory=list)  # (split, csv line)
    skipped: int = 0
    repeated: list[str] = field(default_factory=list)
    scaled: list[str] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {line, audio_file, reason}
    names: dict[str, str] = field(default_factory=dict)  # digest -> clip name written by this call
    probes: dict[str, ClipProbe] = field(default_factory=dict)  # clip name -> its probe once written
    gains: array = field(default_factory=lambda: array("f"))  # dB, each clip whose loudness was evened
    held: int = 0  # clips kept under the target by the true-peak ceiling
    held_by_gain: int = 0  # clips that needed more than MAX_GAIN_DB
    unlevelled: list[str] = field(default_factory=list)  # clips with no loudness to even
    snr: array = field(default_factory=lambda: array("f"))  # (before, after) pairs of denoised clips
    listed: list[str] = field(default_factory=list)  # the first clips' changes, as the summary lists them
    examples: list[tuple[str, str]] = field(default_factory=list)  # (source file, prepared file)
    pool: PoolStats = field(default_factory=PoolStats)


def _items(usable: list[tuple[CsvRow, str]], copy: ClipCopy) -> Iterator[tuple[CsvRow, str, bool, str | None]]:
    for row, split in usable:
        excluded, text = copy.edits.of(row)
        yield row, split, excluded, text


def convert_rows(
    usable: list[tuple[CsvRow, str]],
    out: Path,
    copy: ClipCopy,
    options: PrepareOptions,
    progress: Callable[[int, int, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Convert every usable row's clip into out/wavs (see the module docstring); OSError when the folder cannot
    be written, utils.data.pool.PoolStopped when should_stop turned true."""
    settings = ConvertSettings(
        str(out),
        options.even_loudness,
        options.loudness_target,
        TRUE_PEAK_CEILING_DBTP,
        options.denoise,
        frozenset(digest for digest, where in copy.existing.items() if where == ""),
    )
    pool = ClipPool(options.workers or None, should_stop=should_stop)
    counter = CountedProgress(progress, len(usable), "converted")
    results = pool.map(convert_item, _items(usable, copy), shared=settings, total=len(usable))
    for done, ((row, split, excluded, text), result) in enumerate(results, start=1):
        counter(done)
        _take(row, split, excluded, text, result, out, copy, options)
    copy.pool = pool.stats


def _take(
    row: CsvRow,
    split: str,
    excluded: bool,
    text: str | None,
    result: Converted | TaskFailed,
    out: Path,
    copy: ClipCopy,
    options: PrepareOptions,
) -> None:
    """One converted row, in row order."""
    if isinstance(result, TaskFailed):
        result = Converted(error=f"could not be converted: {result.reason}")
    if result.write_failed:
        raise OSError(result.error)
    if result.error:
        if not excluded:
            copy.rejected.append({"line": row.line, "audio_file": row.audio_file, "reason": result.error})
        return
    digest = result.digest
    if excluded:
        copy.edits.drop_digests.add(digest)
        return
    if digest in copy.existing:
        copy.skipped += 1
        if copy.existing[digest] == "" and text is not None:
            copy.edits.retext[digest] = coqui_field(text)
        elif copy.existing[digest] != "":
            copy.repeated.append(f"line {row.line} ({row.audio_file}) = {copy.existing[digest]}")
            if result.name and result.name != copy.names.get(digest):  # written by its worker, not used
                with contextlib.suppress(OSError):
                    (out / result.name).unlink()
        return
    copy.existing[digest] = f"line {row.line}"
    copy.names[digest] = result.name
    if result.probe is not None:
        copy.probes[result.name] = result.probe
    if result.scaled_peak is not None:
        copy.scaled.append(f"line {row.line} ({row.audio_file}, peak {result.scaled_peak:.2f})")
    _note_changes(row, result, out, copy)
    copy.rows.append(
        (
            split,
            f"{result.name}|{coqui_field(row.text if text is None else text)}|"
            f"{coqui_field(row.speaker_name) or 'speaker'}",
        )
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _note_changes(row: CsvRow, result: Converted, out: Path, copy: ClipCopy) -> None:
    level = result.level
    record = {"clip": result.name, "line": row.line, "audio_file": row.audio_file}
    said = []
    if level is not None:
        record.update(
            loudness_before=_rounded(level.before_lufs),
            gain_db=_rounded(level.gain_db),
            loudness_after=_rounded(level.after_lufs),
            true_peak_dbtp=_rounded(level.true_peak_dbtp),
            held_by_peak=level.held_by_peak,
            held_by_gain=level.held_by_gain,
        )
        if level.reason:
            copy.unlevelled.append(f"{row.audio_file} ({level.reason})")
        else:
            copy.gains.append(level.gain_db)
            copy.held += int(level.held_by_peak)
            copy.held_by_gain += int(level.held_by_gain)
            said.append(f"{level.before_lufs:.1f} → {level.after_lufs:.1f} LUFS ({level.gain_db:+.1f} dB)")
    if result.snr_before is not None or result.snr_after is not None:
        record.update(snr_before=_rounded(result.snr_before), snr_after=_rounded(result.snr_after))
        if result.snr_before is not None and result.snr_after is not None:
            copy.snr.extend([result.snr_before, result.snr_after])
            said.append(f"SNR {result.snr_before:.1f} → {result.snr_after:.1f} dB")
    append_jsonl(out / CHANGES_FILE, record)
    if said and len(copy.listed) < LISTED_NOTES:
        copy.listed.append(f"{row.audio_file}: {', '.join(said)}")
    if len(copy.examples) < EXAMPLES:
        copy.examples.append((row.audio_location, str(out / result.name)))


def _listed(items: list[str]) -> str:
    more = f", and {len(items) - LISTED_NOTES} more" if len(items) > LISTED_NOTES else ""
    return "; ".join(items[:LISTED_NOTES]) + more


def change_notes(copy: ClipCopy, options: PrepareOptions) -> list[str]:
    """What converting did, as the summary says it: clips scaled or added once, loudness, denoising, rejected rows."""
    notes = []
    if copy.scaled:
        notes.append(
            f"{len(copy.scaled)} clip(s) went over full scale (float audio) and were scaled down to a 0.99 "
            f"peak, not clipped: {_listed(copy.scaled)}."
        )
    if copy.repeated:
        notes.append(
            f"{len(copy.repeated)} row(s) have the same audio as an earlier row and were added once: "
            f"{_listed(copy.repeated)}."
        )
    if options.even_loudness and copy.gains:
        gains = list(copy.gains)
        text = (
            f"Loudness evened to {options.loudness_target:g} LUFS (ITU-R BS.1770 integrated), true peak at most "
            f"{TRUE_PEAK_CEILING_DBTP:g} dBTP: {len(gains)} clip(s) changed by {min(gains):+.1f} to "
            f"{max(gains):+.1f} dB (median {statistics.median(gains):+.1f})"
        )
        if copy.held:
            text += f"; {copy.held} kept quieter than the target so that their peaks stay under the ceiling"
        if copy.held_by_gain:
            text += (
                f"; {copy.held_by_gain} further below it raised by {MAX_GAIN_DB:g} dB only (mostly noise or silence? "
                f"listen to them: {CHANGES_FILE} has held_by_gain)"
            )
        notes.append(text + ".")
    elif not options.even_loudness and copy.rows:
        notes.append("Levels kept as recorded (even_loudness off).")
    if copy.unlevelled:
        notes.append(
            f"{len(copy.unlevelled)} clip(s) kept their level, with no loudness to even: {_listed(copy.unlevelled)}."
        )
    if options.denoise and copy.snr:
        before, after = list(copy.snr)[0::2], list(copy.snr)[1::2]
        notes.append(
            f"Denoised with DeepFilterNet 3: SNR estimate (median of {len(before)} clips) "
            f"{statistics.median(before):.1f} → {statistics.median(after):.1f} dB."
        )
    if copy.listed:
        notes.append(f"Per clip: {'; '.join(copy.listed)}; every clip in {CHANGES_FILE}.")
    if copy.rejected:
        shown = [f"line {r['line']} ({r['audio_file']}: {r['reason']})" for r in copy.rejected]
        notes.append(f"{len(copy.rejected)} row(s) rejected and left out: {_listed(shown)}.")
    return notes
