"""The Dataset tab's handlers: check a dataset (typed, uploaded or zipped), transcribe recordings, check transcripts
and audio, prepare a clean copy. Each confines its paths and calls the same functions a notebook calls."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from utils.audio.io import AudioError, load_audio
from utils.data.check_cache import cache_folder
from utils.data.csv_reader import AUDIO_EXTENSIONS
from utils.data.prepare import prepare_dataset, preview_rows
from utils.data.row_checks import outside_roots
from utils.data.text_checks import text_check_options
from utils.data.validation import DatasetReport, check_options, validate_dataset
from utils.model.base_models import run_vocab_file
from utils.text.languages import canonical_language, whisper_language
from utils.training.evaluation.voices import dataset_voices
from webui import form, quality_view
from webui.context import UIContext
from webui.shown import page_error, shown, shown_cells

PREVIEW_PLAYERS = 3
CHECK_PLAYERS = 3  # the worst flagged rows, played
PREPARED_PLAYERS = 2  # clips before and after Prepare (loudness evened, noise removed), played side by side
PREVIEW_SECONDS = 12
PROBLEM_COLUMNS = ["csv_file", "line", "audio_file", "severity", "reason"]
# Short columns a fixed width, the texts the rest: headers on one line and no column wider than the window.
PROBLEM_COLUMN_WIDTHS = ["16%", "72px", "22%", "96px", "50%"]
PREVIEW_COLUMNS = ["line", "used", "audio_file", "text", "speaker"]
PREVIEW_COLUMN_WIDTHS = ["72px", "22%", "24%", "40%", "14%"]
MOSTLY_REJECTED = 0.25  # a share of rejected rows above which the verdict is a warning, not "Ready to train"
UPLOADS_FOLDER = "uploads"  # extracted zips, one folder per zip content, under the datasets folder


def voices_line(report: DatasetReport) -> str:
    """The dataset's speakers as the run will take them: each with enough data a named voice, the others said."""
    try:
        voices, notes = dataset_voices(report)
    except ValueError as exc:  # two names that would share a voice file: Start will refuse it, said here first
        return "\n\n**Speakers:** " + shown(str(exc))
    lines = []
    if voices:
        named = ", ".join(f"{v.name} ({v.language}, {v.seconds:.0f} s)" for v in voices)
        lines.append(f"**{len(voices)} voices**, each with its own reference, scores and named voice: {shown(named)}")
    lines += [shown(note) for note in notes]
    return "".join(f"\n\n{line}" for line in lines)


def _one_dataset(train_csv: Any, eval_csv: Any) -> None:
    """Check and Prepare work on one dataset: a Fine-tune form that lists several is refused, saying so."""
    if any("\n" in str(value or "").strip() or "=" in str(value or "") for value in (train_csv, eval_csv)):
        raise gr.Error(
            "The Fine-tune form lists several datasets: check and prepare them one at a time (give one CSV above and "
            "press Check dataset), then add each to the run's list."
        )


def _path_of(upload: Any, typed: str) -> str:
    """An uploaded file wins over a typed path; both may be empty."""
    if upload:
        return str(upload if isinstance(upload, str) else getattr(upload, "name", upload))
    return (typed or "").strip()


def histogram_labels(edges: list[int]) -> list[str]:
    return [f"{e}-{e + 1} s" if i < len(edges) - 1 else f"{e}+ s" for i, e in enumerate(edges)]


def report_tables(report: DatasetReport) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    problems = pd.DataFrame(report.problems_table(), columns=PROBLEM_COLUMNS)
    if not problems.empty:
        problems["csv_file"] = problems["csv_file"].map(lambda p: Path(p).name if p else "")
        problems = shown_cells(problems)
    edges, counts = report.histogram["edges_s"], report.histogram["counts"]
    labels = histogram_labels(edges)
    histogram = pd.DataFrame({"seconds": labels, "clips": counts})
    summary = f"### {verdict(report)}\n\n" + shown(report.summary(), keep_newlines=True)
    return summary, problems, histogram


def verdict(report: DatasetReport) -> str:
    """The summary's heading: "Ready to train" only when (nearly) every row is usable; with many rows rejected
    it says how many, so that a wrong audio folder or layout is not trained on half the data unnoticed."""
    if not report.ok:
        return "Not ready to train"
    rejected = report.rows_read - report.rows_usable
    if not rejected:
        return "Ready to train"
    if rejected > MOSTLY_REJECTED * report.rows_read:
        return f"⚠ {rejected} of {report.rows_read} rows rejected: only {report.rows_usable} usable (see Problems)"
    return f"Ready to train on {report.rows_usable} of {report.rows_read} rows ({rejected} rejected, see Problems)"


def histogram_update(histogram: pd.DataFrame) -> Any:
    """The histogram with a count axis from 0 that stays whole numbers (an empty one read '0.000000')."""
    top = int(histogram["clips"].max()) if len(histogram) else 0
    return gr.update(value=histogram, y_lim=[0, max(4, top)])


def _preview(csv_path: str, report: DatasetReport, roots: tuple[Path, ...]) -> tuple[pd.DataFrame, list[Any]]:
    rows = preview_rows(csv_path, count=8, layout=report.layouts.get(str(Path(csv_path))))
    # A row the check rejected says so and why (the first rows' problems are always among those listed).
    here = Path(csv_path).resolve()
    rejected = {
        p.line: p.reason
        for p in report.problems
        if p.severity == "error" and p.line and not p.file_level and Path(p.csv_file or csv_path).resolve() == here
    }
    table = pd.DataFrame(
        [
            {
                "line": r.line,
                "used": f"✗ rejected: {_short(rejected[r.line])}" if r.line in rejected else "✓",
                "audio_file": r.audio_file,
                "text": r.text,
                "speaker": r.speaker_name,
            }
            for r in rows
        ],
        columns=PREVIEW_COLUMNS,
    )
    table = shown_cells(table)
    players = []
    for row in rows:
        if len(players) == PREVIEW_PLAYERS:
            break
        if not row.audio_location.lower().endswith(AUDIO_EXTENSIONS) or outside_roots(row.audio_location, roots):
            continue
        try:  # only what is played: a row may name an hour-long file
            wav, rate = load_audio(row.audio_location, seconds=PREVIEW_SECONDS)
        except AudioError:
            continue
        # Decoded samples, not the file: only audio leaves the server, never a file a row names.
        players.append(
            gr.update(
                value=(rate, wav[: rate * PREVIEW_SECONDS]),
                visible=True,
                label=shown(
                    f"line {row.line}{' (rejected)' if row.line in rejected else ''}: {row.text[:60]}", "plain"
                ),
            )
        )
    players += [gr.update(value=None, visible=False)] * (PREVIEW_PLAYERS - len(players))
    return table, players


def _short(reason: str) -> str:
    """A reason as a preview cell shows it: without the path it names (the Problems table has it in full)."""
    return reason.split(" at ", 1)[0].rstrip(".")[:60]


def _check_options(version: str, language: str, use_g2p: bool) -> dict[str, Any]:
    """The text checks the Fine-tune tab's run will apply (front end, vocab), for the same verdict."""
    try:
        return text_check_options(
            language,
            form.checked_flag("use_g2p", False if use_g2p is None else use_g2p),
            vocab=run_vocab_file(version or "tiny"),
        )
    except ValueError as exc:
        raise page_error(exc) from exc


def validate_handler(
    ctx: UIContext,
    train_upload,
    train_path,
    eval_upload,
    eval_path,
    language,
    max_seconds,
    version="tiny",
    use_g2p=False,
    progress=gr.Progress(),
):
    """Check the dataset; returns the summary, tables, preview and the CSV paths for the Fine-tune tab."""
    try:
        train_csv = str(ctx.roots.dataset_file(_path_of(train_upload, train_path), "train CSV"))
        eval_given = _path_of(eval_upload, eval_path)
        eval_csv = str(ctx.roots.dataset_file(eval_given, "eval CSV")) if eval_given else ""
        roots = ctx.roots.audio_roots(train_csv, eval_csv)
        report = validate_dataset(
            train_csv,
            eval_csv or None,
            language,
            form.from_display("max_audio_length", float(max_seconds)),
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            audio_roots=roots,
            cache_dir=cache_folder(ctx.output_dir),  # Prepare and Start reuse this check
            **_check_options(version, language, use_g2p),
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    summary, problems, histogram = report_tables(report)
    summary += "\n\n" + shown(report.check.describe())
    summary += voices_line(report)
    if train_upload and (train_path or "").strip():  # both given (a script): say which one was checked
        summary += "\n\nChecked the **uploaded** train CSV; the typed path was not used."
    missing = sum(
        n for reason, n in report.problem_counts.items() if reason.startswith(("Audio not found", "Audio path"))
    )
    if train_upload and not (train_path or "").strip() and missing and missing >= report.rows_read / 2:
        summary += (
            "\n\n**The audio was not found next to the uploaded CSV.** An uploaded CSV arrives alone, so "
            "paths relative to its folder cannot resolve: type the CSV's path on this machine instead, "
            "or upload a zip of the CSV with its audio."
        )
    table, players = _preview(train_csv, report, roots)
    return (
        summary,
        problems,
        histogram_update(histogram),
        table,
        *players,
        train_csv,
        eval_csv,
        canonical_language(language),
        report.train_count,
    )


def zip_handler(ctx: UIContext, zip_upload, language, max_seconds, version="tiny", use_g2p=False):
    """Extract an uploaded zip (safely, once per content) under the datasets folder and validate its metadata
    CSV. The options are checked before anything is extracted; a refused zip leaves nothing on disk."""
    from utils.data.safe_zip import UnsafeArchiveError
    from utils.data.uploads import extract_upload

    if not zip_upload:
        raise gr.Error("Upload a .zip holding your audio and a metadata CSV first.")
    try:
        check_options(language, form.from_display("max_audio_length", float(max_seconds)))
        source = ctx.roots.dataset_file(_path_of(zip_upload, ""), "zip")
        upload = extract_upload(source, ctx.datasets_dir / UPLOADS_FOLDER)
    except UnsafeArchiveError as exc:
        raise page_error(f"The zip was refused: {exc}") from exc
    except ValueError as exc:
        raise page_error(exc) from exc
    except OSError as exc:  # a full disk, an unreadable upload: extract_upload removed what it wrote
        raise page_error(f"The zip could not be extracted: {exc}") from exc
    summary, *rest = validate_handler(
        ctx, None, str(upload.train_csv), None, str(upload.eval_csv or ""), language, max_seconds, version, use_g2p
    )
    names = ", ".join(shown(Path(p).name) for p in (upload.train_csv, upload.eval_csv) if p)
    return (f"{summary}\n\nChecked the zip's **{names}** (the typed path and an uploaded CSV were not used).", *rest)


def prepared_folder(ctx: UIContext, name: str, language: str) -> Path:
    """The datasets/ sub-folder for a prepared dataset name; refuses names that would leave it."""
    name = (name or "").strip() or f"prepared-{canonical_language(language)}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", name) or ".." in name:
        raise gr.Error(
            "A prepared dataset name uses letters, digits, '-', '_' and '.', and starts with a letter or digit."
        )
    return ctx.datasets_dir / name


def check_handler(
    ctx: UIContext,
    train_csv,
    eval_csv,
    language,
    max_seconds,
    whisper_model,
    threshold,
    min_naturalness=1.0,
    version="tiny",
    use_g2p=False,
    progress=gr.Progress(),
):
    """Transcribe, measure and score the checked dataset's rows: (summary, flagged rows worst first as an editable
    table, their CSV texts by audio_file for Prepare, players of the worst rows). Its rows are those Validate,
    Prepare and Start use: validated with the same text checks (the Fine-tune tab's version and front end) and the
    same check cache. It runs on the CPU, beside a training run: Start never waits for it. A value that is not a
    number (a script's "0.3") is refused by name, with the range it takes."""
    from utils.quality.asr import transcriber_or_reason
    from utils.quality.dataset_check import check_dataset, check_settings

    if not train_csv:
        raise gr.Error("Check a dataset first (its CSV path is then filled in).")
    _one_dataset(train_csv, eval_csv)
    try:
        max_audio_length = form.from_display("max_audio_length", max_seconds)
        # The slider's 1 (its lowest) excludes none; another value is checked as it came (a script's string too).
        plain = isinstance(min_naturalness, (int, float)) and not isinstance(min_naturalness, bool)
        threshold_mos = None if min_naturalness is None or (plain and min_naturalness <= 1.0) else min_naturalness
        check_settings(threshold, threshold_mos, None)
        train_csv = ctx.roots.dataset_file(train_csv, "train CSV")
        eval_csv = ctx.roots.dataset_file(eval_csv, "eval CSV") if eval_csv else None
        text_options = _check_options(version, language, use_g2p)
        transcriber, why = transcriber_or_reason(
            ctx.roots.whisper_model(whisper_model), device="cpu", compute_type="int8", language=language
        )
        check = check_dataset(
            train_csv,
            eval_csv,
            language,
            transcriber=transcriber,
            no_transcriber_reason=why,
            audio_roots=ctx.roots.audio_roots(train_csv, eval_csv),
            threshold=threshold,
            min_naturalness=threshold_mos,
            max_audio_length=max_audio_length,
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            cache_dir=cache_folder(ctx.output_dir),  # the entry Validate, Prepare and Start use
            **text_options,
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    players = _flagged_players(check)
    # As the table shows them: a text the user did not edit is not a correction.
    originals = {row.audio_file: shown(row.text, "plain") for row in check.flagged}
    summary = shown(check.summary(), keep_newlines=True) + (
        "\n\nTick **exclude** or edit **text** in the table, then Prepare: the changes go into the prepared copy only."
        if check.flagged
        else ""
    )
    summary += "\n\n" + shown(f"Decoded and measured: {check.work.describe()}.")
    table = quality_view.check_frame(check)
    # As many rows as were flagged, fixed: adding a row to this table means nothing.
    return (summary, gr.update(value=table, row_count=(len(table), "fixed")), originals, *players)


def _flagged_players(check) -> list[Any]:
    """Players of the worst flagged rows."""
    players = []
    for row in check.flagged[:CHECK_PLAYERS]:
        try:  # decoded samples of a row the check read: never a file the page names
            wav, rate = load_audio(row.audio, None, seconds=PREVIEW_SECONDS)
        except AudioError:
            continue
        players.append(
            gr.update(
                value=(rate, wav), visible=True, label=shown(f"{row.audio_file}: {row.problems[0][:60]}", "plain")
            )
        )
    return players + [gr.update(value=None, visible=False)] * (CHECK_PLAYERS - len(players))


def prepare_handler(
    ctx: UIContext,
    train_csv,
    eval_csv,
    language,
    max_seconds,
    name,
    version="tiny",
    use_g2p=False,
    check_table=None,
    originals=None,
    even_loudness=True,
    denoise=False,
    progress=gr.Progress(),
):
    """Prepare the checked dataset, with the exclusions and corrections made in the check table, its loudness
    evened and its noise removed as asked; players of a few clips before and after."""
    if not train_csv:
        raise gr.Error("Check a dataset first (its CSV path is then filled in).")
    _one_dataset(train_csv, eval_csv)
    folder = prepared_folder(ctx, name, language)
    try:
        train_csv = ctx.roots.dataset_file(train_csv, "train CSV")
        eval_csv = ctx.roots.dataset_file(eval_csv, "eval CSV") if eval_csv else None
        originals = _table_originals(check_table, originals, [p for p in (train_csv, eval_csv) if p])
        exclude, corrections = quality_view.edits_from_table(check_table, originals)
        prepared = prepare_dataset(
            train_csv,
            folder,
            eval_csv,
            language,
            form.from_display("max_audio_length", float(max_seconds)),
            exclude=exclude,
            corrections=corrections,
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            audio_roots=ctx.roots.audio_roots(train_csv, eval_csv),
            even_loudness=form.checked_flag("even_loudness", even_loudness),
            denoise=form.checked_flag("denoise", denoise),
            cache_dir=cache_folder(ctx.output_dir),
            **_check_options(version, language, use_g2p),
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    except OSError as exc:  # the prepared folder's disk
        raise page_error(f"The prepared dataset could not be written: {exc}") from exc
    return (
        f"{shown(prepared.summary(), keep_newlines=True)}\n\nConverted: {shown(prepared.work.describe())}.\n\n"
        "The Fine-tune tab now trains on it.",
        str(prepared.train_csv),
        str(prepared.eval_csv),
        prepared.kept_train + prepared.added_train,
        *before_after_players(prepared.examples),
    )


def before_after_players(examples: list[tuple[str, str]]) -> list[Any]:
    """(before, after) player updates for the first PREPARED_PLAYERS clips Prepare added: decoded samples of a
    source clip it read and of the clip it wrote, never a file."""
    players = []
    for source, prepared in examples[:PREPARED_PLAYERS]:
        try:
            before, before_rate = load_audio(source, None, seconds=PREVIEW_SECONDS)
            after, after_rate = load_audio(prepared, None, seconds=PREVIEW_SECONDS)
        except AudioError:
            continue
        name = Path(source).name
        players.append(gr.update(value=(before_rate, before), visible=True, label=shown(f"before: {name}", "plain")))
        players.append(gr.update(value=(after_rate, after), visible=True, label=shown(f"after: {name}", "plain")))
    return players + [gr.update(value=None, visible=False)] * (2 * PREPARED_PLAYERS - len(players))


def _table_originals(check_table, originals, csv_paths) -> dict[str, str]:
    """The CSV's text of every row the check table names. A client that never ran /check_dataset sends no
    originals: they are read from the CSV, so its edits apply instead of vanishing; a row the dataset does not
    have is refused, with what to do."""
    from utils.data.csv_reader import texts_by_audio_file

    known = dict(originals or {})
    listed = quality_view.table_audio_files(check_table)
    missing = {name for name in listed if name not in known}
    if missing:
        known.update(texts_by_audio_file(csv_paths, missing))
        unknown = sorted(missing - set(known))
        if unknown:
            raise ValueError(
                f"The check table names {len(unknown)} row(s) this dataset does not have "
                f"({', '.join(repr(name[:80]) for name in unknown[:3])}): its edits were not applied and nothing "
                "was prepared. Run the dataset check on this CSV and edit its table."
            )
    return known


def transcribe_handler(ctx: UIContext, recordings, whisper_model, language, speaker, progress=gr.Progress()):
    from utils.data.recordings import transcribe_recordings
    from utils.data.transcription import TranscriberUnavailable
    from utils.quality.asr import get_transcriber

    try:
        paths = [str(ctx.roots.dataset_file(_path_of(f, ""), "recording")) for f in (recordings or [])]
        model = ctx.roots.whisper_model(whisper_model or "large-v3")
    except ValueError as exc:
        raise page_error(exc) from exc
    if not paths:
        raise gr.Error("Upload one or more long recordings first.")
    out = ctx.datasets_dir / f"transcribed-{time.strftime('%Y%m%d-%H%M%S')}"
    lang = canonical_language(language)
    # The GPU when it is free (Start waits for it, as for any GPU work); the CPU while a run trains on it, beside
    # the run: a long transcription never holds back Start.
    with ctx.gpu_work_or_cpu() as device:
        try:
            csv_path = transcribe_recordings(
                paths,
                out,
                get_transcriber(model, device),  # loaded once per process and device, reused by every click
                language=whisper_language(lang),
                speaker_name=speaker or "speaker",
                progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            )
        except (TranscriberUnavailable, ValueError) as exc:
            raise page_error(exc) from exc
    return str(csv_path)
