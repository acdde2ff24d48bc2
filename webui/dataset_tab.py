"""Dataset tab: upload CSVs, a zip or long recordings; see every problem; prepare a clean copy."""

from __future__ import annotations

import functools
import re
import time
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from utils.data.validation import HISTOGRAM_EDGES, DatasetReport, check_options, validate_dataset
from utils.audio.io import AudioError, load_audio
from utils.data.csv_reader import AUDIO_EXTENSIONS
from utils.training.text_checks import text_check_options
from utils.text.languages import LANGUAGE_CHOICES, canonical_language, whisper_language
from utils.data.prepare import prepare_dataset, preview_rows
from utils.data.row_checks import outside_roots
from webui import form, quality_view
from webui.context import GPU_QUEUE, UIContext

PREVIEW_PLAYERS = 3
CHECK_PLAYERS = 3  # the worst flagged rows, played
PREVIEW_SECONDS = 12
PROBLEM_COLUMNS = ["csv_file", "line", "audio_file", "severity", "reason"]
UPLOADS_FOLDER = "uploads"  # extracted zips, one folder per zip content, under the datasets folder


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
    edges, counts = report.histogram["edges_s"], report.histogram["counts"]
    labels = histogram_labels(edges)
    histogram = pd.DataFrame({"seconds": labels, "clips": counts})
    state = "Ready to train" if report.ok else "Not ready to train"
    summary = f"### {state}\n\n" + report.summary().replace("\n", "  \n")
    return summary, problems, histogram


def _preview(csv_path: str, report: DatasetReport, roots: tuple[Path, ...]) -> tuple[pd.DataFrame, list[Any]]:
    rows = preview_rows(csv_path, count=8, layout=report.layouts.get(str(Path(csv_path))))
    table = pd.DataFrame(
        [{"line": r.line, "audio_file": r.audio_file, "text": r.text, "speaker": r.speaker_name} for r in rows],
        columns=["line", "audio_file", "text", "speaker"],
    )
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
        players.append(gr.update(value=(rate, wav[: rate * PREVIEW_SECONDS]), visible=True,
                                 label=f"line {row.line}: {row.text[:60]}"))  # fmt: skip
    players += [gr.update(value=None, visible=False)] * (PREVIEW_PLAYERS - len(players))
    return table, players


def _check_options(version: str, language: str, use_g2p: bool) -> dict[str, Any]:
    """The text checks the Fine-tune tab's run will apply (front end, vocab), for the same verdict."""
    try:
        return text_check_options(version or "tiny", language, bool(use_g2p))
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc


def validate_handler(
    ctx: UIContext, train_upload, train_path, eval_upload, eval_path, language, max_seconds, version="tiny",
    use_g2p=False, progress=gr.Progress(),
):  # fmt: skip
    """Check the dataset; returns the summary, tables, preview and the CSV paths for the Fine-tune tab."""
    try:
        train_csv = str(ctx.roots.dataset_file(_path_of(train_upload, train_path), "train CSV"))
        eval_given = _path_of(eval_upload, eval_path)
        eval_csv = str(ctx.roots.dataset_file(eval_given, "eval CSV")) if eval_given else ""
        roots = ctx.roots.audio_roots(train_csv, eval_csv)
        report = validate_dataset(
            train_csv, eval_csv or None, language, form.from_display("max_audio_length", float(max_seconds)),
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            audio_roots=roots, **_check_options(version, language, use_g2p),
        )  # fmt: skip
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    summary, problems, histogram = report_tables(report)
    missing = sum(n for reason, n in report.problem_counts.items() if reason.startswith(("Audio not found", "Audio path")))
    if train_upload and missing and missing >= report.rows_read / 2:
        summary += ("\n\n**The audio was not found next to the uploaded CSV.** An uploaded CSV arrives alone, so "
                    "paths relative to its folder cannot resolve: type the CSV's path on this machine instead, "
                    "or upload a zip of the CSV with its audio.")  # fmt: skip
    table, players = _preview(train_csv, report, roots)
    return (summary, problems, histogram, table, *players, train_csv, eval_csv, canonical_language(language),
            report.train_count)  # fmt: skip


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
        raise gr.Error(f"The zip was refused: {exc}") from exc
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    except OSError as exc:  # a full disk, an unreadable upload: extract_upload removed what it wrote
        raise gr.Error(f"The zip could not be extracted: {exc}") from exc
    return validate_handler(ctx, None, str(upload.train_csv), None, str(upload.eval_csv or ""), language, max_seconds,
                            version, use_g2p)  # fmt: skip


def prepared_folder(ctx: UIContext, name: str, language: str) -> Path:
    """The datasets/ sub-folder for a prepared dataset name; refuses names that would leave it."""
    name = (name or "").strip() or f"prepared-{canonical_language(language)}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", name) or ".." in name:
        raise gr.Error("A prepared dataset name uses letters, digits, '-', '_' and '.', and starts with a letter "
                       "or digit.")  # fmt: skip
    return ctx.datasets_dir / name


def check_handler(
    ctx: UIContext, train_csv, eval_csv, language, max_seconds, whisper_model, threshold, progress=gr.Progress(),
):  # fmt: skip
    """Transcribe and measure the checked dataset's rows: (summary, flagged rows worst first as an editable table,
    their CSV texts by audio_file for Prepare, players of the worst rows)."""
    from utils.quality.asr import transcriber_or_reason
    from utils.quality.dataset_check import check_dataset

    if not train_csv:
        raise gr.Error("Check a dataset first (its CSV path is then filled in).")
    try:
        train_csv = ctx.roots.dataset_file(train_csv, "train CSV")
        eval_csv = ctx.roots.dataset_file(eval_csv, "eval CSV") if eval_csv else None
        transcriber, why = transcriber_or_reason(ctx.roots.whisper_model(whisper_model), device="cpu",
                                                 compute_type="int8")  # fmt: skip
        check = check_dataset(
            train_csv, eval_csv, language, transcriber=transcriber, no_transcriber_reason=why,
            threshold=float(threshold), max_audio_length=form.from_display("max_audio_length", float(max_seconds)),
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
        )  # fmt: skip
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    players = []
    for row in check.flagged[:CHECK_PLAYERS]:
        try:  # decoded samples of a row the check read: never a file the page names
            wav, rate = load_audio(row.audio, None, seconds=PREVIEW_SECONDS)
        except AudioError:
            continue
        players.append(gr.update(value=(rate, wav), visible=True, label=f"{row.audio_file}: {row.problems[0][:60]}"))
    players += [gr.update(value=None, visible=False)] * (CHECK_PLAYERS - len(players))
    originals = {row.audio_file: row.text for row in check.flagged}
    summary = check.summary() + ("\n\nTick **exclude** or edit **text** in the table, then Prepare: the changes go "
                                 "into the prepared copy only." if check.flagged else "")  # fmt: skip
    return (summary, quality_view.check_frame(check), originals, *players)


def prepare_handler(
    ctx: UIContext, train_csv, eval_csv, language, max_seconds, name, version="tiny", use_g2p=False,
    check_table=None, originals=None, progress=gr.Progress(),
):  # fmt: skip
    """Prepare the checked dataset, with the exclusions and corrections made in the check table."""
    if not train_csv:
        raise gr.Error("Check a dataset first (its CSV path is then filled in).")
    folder = prepared_folder(ctx, name, language)
    exclude, corrections = quality_view.edits_from_table(check_table, originals)
    try:
        train_csv = ctx.roots.dataset_file(train_csv, "train CSV")
        eval_csv = ctx.roots.dataset_file(eval_csv, "eval CSV") if eval_csv else None
        prepared = prepare_dataset(
            train_csv, folder, eval_csv, language, form.from_display("max_audio_length", float(max_seconds)),
            exclude=exclude, corrections=corrections,
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            audio_roots=ctx.roots.audio_roots(train_csv, eval_csv), **_check_options(version, language, use_g2p),
        )  # fmt: skip
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    return (f"{prepared.summary()}\n\nThe Fine-tune tab now trains on it.", str(prepared.train_csv),
            str(prepared.eval_csv), prepared.kept_train + prepared.added_train)  # fmt: skip


def transcribe_handler(ctx: UIContext, recordings, whisper_model, language, speaker, progress=gr.Progress()):
    from utils.data.recordings import transcribe_recordings
    from utils.data.transcription import TranscriberUnavailable
    from utils.quality.asr import get_transcriber

    try:
        paths = [str(ctx.roots.dataset_file(_path_of(f, ""), "recording")) for f in (recordings or [])]
        model = ctx.roots.whisper_model(whisper_model or "large-v3")
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    if not paths:
        raise gr.Error("Upload one or more long recordings first.")
    out = ctx.datasets_dir / f"transcribed-{time.strftime('%Y%m%d-%H%M%S')}"
    lang = canonical_language(language)
    try:
        csv_path = transcribe_recordings(
            paths, out, get_transcriber(model),  # loaded once per process, reused by every click
            language=whisper_language(lang), speaker_name=speaker or "speaker",
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
        )  # fmt: skip
    except (TranscriberUnavailable, ValueError) as exc:
        raise gr.Error(str(exc)) from exc
    return str(csv_path)


def _sources_section() -> dict[str, Any]:
    """Where the dataset comes from: a CSV (uploaded or typed), a zip, or long recordings."""
    gr.Markdown(
        "Give a metadata CSV (`audio_file|text|speaker_name`; comma, tab and LJSpeech layouts are detected) "
        "with audio paths relative to the CSV or absolute, **or** a zip of audio plus its CSV, **or** long "
        "recordings to cut and transcribe. Nothing you give is modified."
    )
    ui: dict[str, Any] = {}
    with gr.Row():
        with gr.Column():
            ui["train_upload"] = gr.File(label="Train CSV (upload)", file_types=[".csv", ".txt"], type="filepath")
            ui["train_path"] = gr.Textbox(label="…or train CSV path on this machine",
                                          placeholder="/data/voice/metadata.csv")  # fmt: skip
        with gr.Column():
            ui["eval_upload"] = gr.File(label="Eval CSV (optional)", file_types=[".csv", ".txt"], type="filepath")
            ui["eval_path"] = gr.Textbox(label="…or eval CSV path",
                                         placeholder="empty: 15% of the train rows are held out")  # fmt: skip
    with gr.Row():
        ui["language"] = form.create_component("language", choices=list(LANGUAGE_CHOICES), render=True,
                                               elem_id="dataset-language")  # fmt: skip
        ui["max_seconds"] = form.create_component("max_audio_length", render=True, elem_id="dataset-max-seconds")
        ui["validate"] = gr.Button("Check dataset", variant="primary")
    with gr.Accordion("Upload a zip (audio + metadata CSV)", open=False):
        ui["zip_upload"] = gr.File(label="Dataset zip", file_types=[".zip"], type="filepath")
        ui["zip_button"] = gr.Button("Extract and check")
    with gr.Accordion("Long recordings: cut on silence and transcribe (faster-whisper)", open=False):
        ui["recordings"] = gr.File(label="Recordings", file_count="multiple", file_types=["audio"], type="filepath")
        with gr.Row():
            ui["whisper_model"] = gr.Textbox(value="large-v3", label="Whisper model (name, or a local folder)")
            ui["speaker"] = gr.Textbox(value="speaker", label="Speaker name")
            ui["transcribe"] = gr.Button("Transcribe")
    ui["summary"] = gr.Markdown()
    return ui


def _check_section() -> dict[str, Any]:
    """Transcripts and audio checked clip by clip; rows to exclude or correct."""
    ui: dict[str, Any] = {}
    with gr.Accordion("Check transcripts and audio (transcribe each row, measure loudness, clipping, noise, "
                      "silences)", open=False):  # fmt: skip
        with gr.Row():
            ui["check_whisper"] = gr.Textbox("large-v3", label="Whisper model (name, or a folder under models/whisper)")
            ui["threshold"] = gr.Slider(0.05, 1.0, value=0.3, step=0.05, label="Flag a transcript over this CER")
            ui["check"] = gr.Button("Check transcripts and audio")
        ui["check_summary"] = gr.Markdown(elem_id="dataset-check-summary")
        ui["check_table"] = gr.Dataframe(
            headers=quality_view.CHECK_COLUMNS, label="Flagged rows, worst first", interactive=True, wrap=True,
            max_height=360, static_columns=list(range(2, 12)),
            datatype=["bool", "str", "str", "number", "number", "str", "str", "number", "number", "number", "number",
                      "number"])  # fmt: skip
        ui["check_originals"] = gr.State({})
        with gr.Row():
            ui["check_players"] = [gr.Audio(visible=False, interactive=False) for _ in range(CHECK_PLAYERS)]
    return ui


def _report_section() -> dict[str, Any]:
    """The verdict's details, a preview with players, and Prepare."""
    ui: dict[str, Any] = {}
    with gr.Row():
        ui["histogram"] = gr.BarPlot(x="seconds", y="clips", label="Clip durations", height=220,
                                     sort=histogram_labels(list(HISTOGRAM_EDGES)))  # fmt: skip
    ui["problems"] = gr.Dataframe(headers=PROBLEM_COLUMNS, label="Problems (row by row)", wrap=True, max_height=320)
    ui["preview"] = gr.Dataframe(label="Preview", wrap=True, max_height=260)
    with gr.Row():
        ui["players"] = [gr.Audio(visible=False, interactive=False) for _ in range(PREVIEW_PLAYERS)]
    with gr.Row():
        ui["prepared_name"] = gr.Textbox(label="Prepared dataset name",
                                         placeholder="empty: a new dataset; an earlier name: add to it")  # fmt: skip
        ui["prepare"] = gr.Button("Prepare dataset (22.05 kHz copy + train/eval split)")
    ui["prepared_summary"] = gr.Markdown()
    return ui


def create_dataset_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("1. Dataset", id="dataset"):
        ui = {**_sources_section(), **_check_section(), **_report_section()}
    _wire_checks(ctx, ui)
    _wire_preparation(ctx, ui)
    return ctx.register("dataset", {"language": ui["language"], "summary": ui["summary"]})


def _wire_checks(ctx: UIContext, ui: dict[str, Any]) -> None:
    train_csv, eval_csv, run_language, version, g2p, usable_rows = ctx.get_list(
        "form.train_csv", "form.eval_csv", "form.language", "form.version", "form.use_amharic_g2p",
        "dataset.usable_train_rows")  # fmt: skip
    language, max_seconds = ui["language"], ui["max_seconds"]
    outputs = [ui["summary"], ui["problems"], ui["histogram"], ui["preview"], *ui["players"], train_csv, eval_csv,
               run_language, usable_rows]  # fmt: skip
    typed = [ui["train_path"], ui["eval_upload"], ui["eval_path"], language, max_seconds, version, g2p]
    ui["validate"].click(functools.partial(validate_handler, ctx), [ui["train_upload"], *typed], outputs,
                         api_name="validate_dataset")  # fmt: skip
    ui["zip_button"].click(functools.partial(zip_handler, ctx), [ui["zip_upload"], language, max_seconds, version, g2p],
                           outputs, api_name="upload_zip")  # fmt: skip
    ui["transcribe"].click(
        functools.partial(transcribe_handler, ctx), [ui["recordings"], ui["whisper_model"], language, ui["speaker"]],
        ui["train_path"], api_name="transcribe_recordings", concurrency_id=GPU_QUEUE, concurrency_limit=1,
    ).success(functools.partial(validate_handler, ctx, None), typed, outputs, api_visibility="undocumented")  # fmt: skip
    check_outputs = [ui["check_summary"], ui["check_table"], ui["check_originals"]]
    ui["check"].click(functools.partial(check_handler, ctx),
                      [train_csv, eval_csv, language, max_seconds, ui["check_whisper"], ui["threshold"]],
                      [*check_outputs, *ui["check_players"]], api_name="check_dataset", concurrency_id=GPU_QUEUE,
                      concurrency_limit=1)  # fmt: skip
    # Edits belong to the dataset they were made on: another dataset (or its prepared copy) starts clean.
    train_csv.change(lambda: ("", quality_view.check_frame(None), {}), None, check_outputs,
                     api_visibility="undocumented")  # fmt: skip


def _wire_preparation(ctx: UIContext, ui: dict[str, Any]) -> None:
    train_csv, eval_csv, version, g2p, usable_rows = ctx.get_list(
        "form.train_csv", "form.eval_csv", "form.version", "form.use_amharic_g2p", "dataset.usable_train_rows")
    ui["prepare"].click(functools.partial(prepare_handler, ctx),
                        [train_csv, eval_csv, ui["language"], ui["max_seconds"], ui["prepared_name"], version, g2p,
                         ui["check_table"], ui["check_originals"]],
                        [ui["prepared_summary"], train_csv, eval_csv, usable_rows], api_name="prepare_dataset",
                        concurrency_limit=1)  # fmt: skip
