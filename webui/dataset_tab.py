"""Dataset tab: upload CSVs, a zip or long recordings; see every problem; prepare a clean copy."""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

from utils.data.prepare_options import DEFAULTS as PREPARE_DEFAULTS
from utils.data.prepare_options import prepare_option
from utils.data.validation import HISTOGRAM_EDGES
from utils.quality.asr import default_whisper_model
from utils.text.languages import LANGUAGE_CHOICES
from webui import form, quality_view
from webui.context import UIContext
from webui.dataset_handlers import (
    CHECK_PLAYERS,
    PREPARED_PLAYERS,
    PREVIEW_COLUMN_WIDTHS,
    PREVIEW_COLUMNS,
    PREVIEW_PLAYERS,
    PROBLEM_COLUMN_WIDTHS,
    PROBLEM_COLUMNS,
    check_handler,
    histogram_labels,
    prepare_handler,
    transcribe_handler,
    validate_handler,
    zip_handler,
)
from webui.dataset_list import added_dataset


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
            ui["train_path"] = gr.Textbox(
                label="…or train CSV path on this machine", placeholder="/data/voice/metadata.csv"
            )
        with gr.Column():
            ui["eval_upload"] = gr.File(label="Eval CSV (optional)", file_types=[".csv", ".txt"], type="filepath")
            ui["eval_path"] = gr.Textbox(
                label="…or eval CSV path", placeholder="empty: 15% of the train rows are held out"
            )
    with gr.Row():
        ui["language"] = form.create_component(
            "language", choices=list(LANGUAGE_CHOICES), render=True, elem_id="dataset-language"
        )
        ui["max_seconds"] = form.create_component("max_audio_length", render=True, elem_id="dataset-max-seconds")
        ui["validate"] = gr.Button("Check dataset", variant="primary")
    with gr.Accordion("Upload a zip (audio + metadata CSV)", open=False):
        ui["zip_upload"] = gr.File(label="Dataset zip", file_types=[".zip"], type="filepath", elem_id="zip-upload")
        ui["zip_button"] = gr.Button("Extract and check")
    with gr.Accordion("Long recordings: cut on silence and transcribe (faster-whisper)", open=False):
        ui["recordings"] = gr.File(label="Recordings", file_count="multiple", file_types=["audio"], type="filepath")
        with gr.Row():
            ui["whisper_model"] = gr.Textbox(
                value=default_whisper_model("en", "large-v3"), label="Whisper model (name, or a local folder)"
            )
            ui["speaker"] = gr.Textbox(value="speaker", label="Speaker name")
            ui["transcribe"] = gr.Button("Transcribe")
    ui["summary"] = gr.Markdown(elem_id="dataset-summary")
    with gr.Accordion("Several datasets in one run (each its language and how often its rows are drawn)", open=False):
        gr.Markdown(
            "Check each dataset, then add it: the Fine-tune tab's Train CSV becomes the list. How often: a weight "
            "(1 = every row once an epoch, 2 = twice, 0.5 = half of them) or a share of each epoch (`20%`: a replay "
            "of a base language, against forgetting it)."
        )
        with gr.Row():
            ui["rate"] = gr.Textbox("1", label="How often its rows are drawn", elem_id="dataset-rate", scale=1)
            ui["add_dataset"] = gr.Button("+ Add the checked dataset to the run", elem_id="dataset-add", scale=1)
        ui["run_datasets"] = gr.Textbox(
            label="The run's datasets (LANG[:HOW_OFTEN]=PATH, one per line)", lines=2, elem_id="dataset-run-list"
        )
        ui["run_evals"] = gr.State([])
    return ui


def _check_section() -> dict[str, Any]:
    """Transcripts and audio checked clip by clip; rows to exclude or correct."""
    ui: dict[str, Any] = {}
    with gr.Accordion(
        "Check transcripts and audio (transcribe each row, measure loudness, clipping, noise, silences)", open=False
    ):
        with gr.Row():
            ui["check_whisper"] = gr.Textbox(
                default_whisper_model("en", "large-v3"),
                label="Whisper model (name, or a folder under models/whisper)",
                info="tiny.en, bundled, works offline for English; others go in models/whisper/<name>/",
            )
            # A script's "0.3" reaches check_dataset, which refuses it by name (not Gradio's generic "Error").
            ui["threshold"] = form._passing_non_numbers(
                gr.Slider(0.05, 1.0, value=0.3, step=0.05, label="Flag a transcript over this CER")
            )
            ui["min_naturalness"] = form._passing_non_numbers(
                gr.Slider(
                    1.0,
                    5.0,
                    value=1.0,
                    step=0.1,
                    label="Exclude clips under this naturalness",
                    info="MOS predicted by DistillMOS (1 bad .. 5 excellent); 1 excludes none",
                )
            )
            ui["check"] = gr.Button("Check transcripts and audio")
        ui["check_summary"] = gr.Markdown(elem_id="dataset-check-summary")
        ui["check_table"] = gr.Dataframe(
            headers=quality_view.CHECK_COLUMNS,
            label="Flagged rows, worst first",
            interactive=True,
            wrap=True,
            max_height=360,
            static_columns=list(range(2, len(quality_view.CHECK_COLUMNS))),
            column_widths=quality_view.CHECK_COLUMN_WIDTHS,
            elem_id="check-table",
            datatype=quality_view.CHECK_DATATYPES,
        )
        ui["check_originals"] = gr.State({})
        with gr.Row():
            ui["check_players"] = [gr.Audio(visible=False, interactive=False) for _ in range(CHECK_PLAYERS)]
    return ui


def _report_section() -> dict[str, Any]:
    """The verdict's details, a preview with players, and Prepare."""
    ui: dict[str, Any] = {}
    with gr.Row():
        ui["histogram"] = gr.BarPlot(
            x="seconds",
            y="clips",
            label="Clip durations",
            height=220,
            sort=histogram_labels(list(HISTOGRAM_EDGES)),
            y_axis_format="d",
            y_lim=[0, 4],
        )
    ui["problems"] = gr.Dataframe(
        headers=PROBLEM_COLUMNS,
        label="Problems (row by row)",
        wrap=True,
        max_height=320,
        column_widths=PROBLEM_COLUMN_WIDTHS,
        elem_id="dataset-problems",
    )
    ui["preview"] = gr.Dataframe(
        headers=PREVIEW_COLUMNS,
        label="Preview (the first rows; a rejected one says why)",
        wrap=True,
        max_height=260,
        column_widths=PREVIEW_COLUMN_WIDTHS,
        elem_id="dataset-preview",
    )
    with gr.Row():
        ui["players"] = [gr.Audio(visible=False, interactive=False) for _ in range(PREVIEW_PLAYERS)]
    with gr.Row():
        ui["prepared_name"] = gr.Textbox(
            label="Prepared dataset name", placeholder="empty: a new dataset; an earlier name: add to it"
        )
        ui["prepare"] = gr.Button("Prepare dataset (22.05 kHz copy + train/eval split)")
    with gr.Row():  # Prepare's options, as PrepareOptions declares them
        ui["even_loudness"] = gr.Checkbox(
            PREPARE_DEFAULTS.even_loudness,
            label=f"Even out loudness ({PREPARE_DEFAULTS.loudness_target:g} LUFS)",
            info=prepare_option("even_loudness").help,
        )
        ui["denoise"] = gr.Checkbox(
            PREPARE_DEFAULTS.denoise, label="Remove background noise", info=prepare_option("denoise").help
        )
    ui["prepared_summary"] = gr.Markdown(elem_id="prepared-summary")
    with gr.Row():
        ui["prepared_players"] = [gr.Audio(visible=False, interactive=False) for _ in range(2 * PREPARED_PLAYERS)]
    return ui


def create_dataset_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("1. Dataset", id="dataset"):
        ui = {**_sources_section(), **_check_section(), **_report_section()}
    _wire_checks(ctx, ui)
    _wire_preparation(ctx, ui)
    return ctx.register("dataset", {"language": ui["language"], "summary": ui["summary"]})


def _wire_checks(ctx: UIContext, ui: dict[str, Any]) -> None:
    train_csv, eval_csv, run_language, version, g2p, usable_rows = ctx.get_list(
        "form.train_csv",
        "form.eval_csv",
        "form.language",
        "form.version",
        "form.use_amharic_g2p",
        "dataset.usable_train_rows",
    )
    language, max_seconds = ui["language"], ui["max_seconds"]
    outputs = [
        ui["summary"],
        ui["problems"],
        ui["histogram"],
        ui["preview"],
        *ui["players"],
        train_csv,
        eval_csv,
        run_language,
        usable_rows,
    ]
    # The source the user touched last is the one checked: an upload clears the typed path and typing clears
    # the upload (an upload used to win silently over a path typed after it).
    for upload, path in ((ui["train_upload"], ui["train_path"]), (ui["eval_upload"], ui["eval_path"])):
        upload.upload(lambda: "", None, path, api_visibility="undocumented", show_progress="hidden")
        path.input(lambda: None, None, upload, api_visibility="undocumented", show_progress="hidden")
    # A zip is a third source: its CSV is checked, so the typed path and the uploaded CSV go (which was checked?).
    ui["zip_upload"].upload(
        lambda: ("", None),
        None,
        [ui["train_path"], ui["train_upload"]],
        api_visibility="undocumented",
        show_progress="hidden",
    )
    typed = [ui["train_path"], ui["eval_upload"], ui["eval_path"], language, max_seconds, version, g2p]
    ui["validate"].click(
        functools.partial(validate_handler, ctx), [ui["train_upload"], *typed], outputs, api_name="validate_dataset"
    )
    ui["add_dataset"].click(
        added_dataset,
        [ui["run_datasets"], ui["run_evals"], train_csv, eval_csv, language, ui["rate"]],
        [ui["run_datasets"], ui["run_evals"], train_csv, eval_csv],
        api_visibility="undocumented",
    )
    ui["zip_button"].click(
        functools.partial(zip_handler, ctx),
        [ui["zip_upload"], language, max_seconds, version, g2p],
        outputs,
        api_name="upload_zip",
    )
    ui["transcribe"].click(
        functools.partial(transcribe_handler, ctx),
        [ui["recordings"], ui["whisper_model"], language, ui["speaker"]],
        ui["train_path"],
        api_name="transcribe_recordings",
        concurrency_limit=1,  # not in the GPU queue: on the CPU beside a run, else holding ctx.gpu_work
    ).success(functools.partial(validate_handler, ctx, None), typed, outputs, api_visibility="undocumented")
    check_outputs = [ui["check_summary"], ui["check_table"], ui["check_originals"]]
    ui["check"].click(
        functools.partial(check_handler, ctx),
        # The Fine-tune tab's version and front end: the check validates as Validate, Prepare and Start do.
        [
            train_csv,
            eval_csv,
            language,
            max_seconds,
            ui["check_whisper"],
            ui["threshold"],
            ui["min_naturalness"],
            version,
            g2p,
        ],
        [*check_outputs, *ui["check_players"]],
        api_name="check_dataset",
        concurrency_limit=1,  # on the CPU, beside a run: not in the GPU queue, Start never waits for it
    )
    # Edits belong to the dataset they were made on: another dataset (or its prepared copy) starts clean.
    players = len(ui["check_players"])
    hidden = lambda: [gr.update(value=None, visible=False) for _ in range(players)]
    train_csv.change(
        lambda: ("", quality_view.check_frame(None), {}, *hidden()),
        None,
        [*check_outputs, *ui["check_players"]],  # the previous dataset's flagged clips go with its table
        api_visibility="undocumented",
    )


def _wire_preparation(ctx: UIContext, ui: dict[str, Any]) -> None:
    train_csv, eval_csv, version, g2p, usable_rows = ctx.get_list(
        "form.train_csv", "form.eval_csv", "form.version", "form.use_amharic_g2p", "dataset.usable_train_rows"
    )
    ui["prepare"].click(
        functools.partial(prepare_handler, ctx),
        [
            train_csv,
            eval_csv,
            ui["language"],
            ui["max_seconds"],
            ui["prepared_name"],
            version,
            g2p,
            ui["check_table"],
            ui["check_originals"],
            ui["even_loudness"],
            ui["denoise"],
        ],
        [ui["prepared_summary"], train_csv, eval_csv, usable_rows, *ui["prepared_players"]],
        api_name="prepare_dataset",
        concurrency_limit=1,
    )
