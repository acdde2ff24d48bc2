"""The Test tab's pronunciation lexicon: the picked voice's term -> respelling lines, edited and saved into its
ready/finetune.json (utils.model.ready.set_voice_lexicon), and what the text box's text becomes before the tokenizer."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gradio as gr

from utils.model.inference import find_ready_dir
from utils.model.ready import read_voice_frontend, set_voice_lexicon
from utils.text.lexicon import ARROW, lexicon_to_text, parse_lexicon_text
from webui.context import UIContext
from webui.shown import page_error, shown

SEPARATOR = f" {ARROW} "  # the Tab key leaves a browser's text box: the page shows and takes arrows (tabs work too)
PLACEHOLDER = "SQL -> sequel\nNguyen -> Win\nUS -> U S -> case\n[es]\nSQL -> ese cu ele"


def _voice(ctx: UIContext, run: str, ready_path: str) -> Path:
    """The picked voice's ready/ folder, confined to the app's output folder (ValueError)."""
    source = (ready_path or "").strip() or run
    if not source:
        raise ValueError("Pick a finished run (or type the path of a ready/ folder) first.")
    return find_ready_dir(ctx.roots.run_folder(source, "model"))


def _summary(lexicon: Any) -> str:
    if not lexicon:
        return "**Pronunciation lexicon**: none. Add lines of term -&gt; respelling and save."
    languages = ", ".join(lexicon.languages)
    return f"**Pronunciation lexicon**: {len(lexicon)} entries ({shown(languages)}), applied before the tokenizer."


def lexicon_loaded(ctx: UIContext, run: str, ready_path: str) -> tuple[Any, str]:
    """The picked voice's lexicon as editable lines, and a line that says what it holds."""
    try:
        ready = _voice(ctx, run, ready_path)
        frontend = read_voice_frontend(ready)
    except ValueError as exc:
        return gr.update(value=""), shown(exc)
    return gr.update(value=lexicon_to_text(frontend.lexicon, frontend.language, SEPARATOR)), _summary(frontend.lexicon)


def lexicon_saved(ctx: UIContext, run: str, ready_path: str, lines: str) -> tuple[Any, str]:
    """Save the box's lines as the voice's lexicon (empty: none); a bad line is a page error naming it, nothing
    written. Returns the lines as stored (normalised) and the summary."""
    try:
        ready = _voice(ctx, run, ready_path)
        frontend = read_voice_frontend(ready)
        lexicon = set_voice_lexicon(ready, parse_lexicon_text(str(lines or ""), frontend.language, "lexicon"))
    except ValueError as exc:
        raise page_error(exc) from exc
    return gr.update(value=lexicon_to_text(lexicon, frontend.language, SEPARATOR)), _summary(lexicon) + " Saved."


def lexicon_preview(ctx: UIContext, run: str, ready_path: str, lines: str, text: str, language: str) -> str:
    """What the Text box becomes with the box's lexicon (saved or not) before the tokenizer, shown escaped."""
    try:
        ready = _voice(ctx, run, ready_path)
        frontend = read_voice_frontend(ready)
        lexicon = parse_lexicon_text(str(lines or ""), frontend.language, "lexicon")
        spoken = type(frontend)(frontend.language, frontend.amharic_g2p, lexicon).for_language(language or None)
        prepared = spoken.apply(str(text or "").strip())
    except ValueError as exc:
        return shown(exc)
    return "**The model reads**: " + shown(prepared, keep_newlines=True)


def create_lexicon_section(ctx: UIContext, run: Any, ready_path: Any, text: Any, language: Any) -> dict[str, Any]:
    """The lexicon accordion and its buttons (inside the Test tab's layout); the Test tab fills it with the voice's
    lexicon when a run is shown (webui.test_tab.fill_for_run)."""
    ui: dict[str, Any] = {}
    with gr.Accordion("Pronunciation lexicon: how the voice says names, acronyms, foreign words", open=False):
        ui["lexicon_summary"] = gr.Markdown(_summary(None), elem_id="lexicon-summary")
        ui["lexicon"] = gr.Textbox(
            label="term -> respelling, one a line ([xx] starts another language's entries; -> case: exact case only)",
            lines=5,
            placeholder=PLACEHOLDER,
            elem_id="lexicon-lines",
        )
        with gr.Row():
            ui["lexicon_preview_button"] = gr.Button("Preview the Text with it", scale=0)
            ui["lexicon_save"] = gr.Button("Save to the voice", variant="primary", scale=0)
        ui["lexicon_preview"] = gr.Markdown("", elem_id="lexicon-preview")
    ui["lexicon_save"].click(
        functools.partial(lexicon_saved, ctx),
        [run, ready_path, ui["lexicon"]],
        [ui["lexicon"], ui["lexicon_summary"]],
        api_name="save_lexicon",
    )
    ui["lexicon_preview_button"].click(
        functools.partial(lexicon_preview, ctx),
        [run, ready_path, ui["lexicon"], text, language],
        ui["lexicon_preview"],
        api_name="preview_lexicon",
    )
    return ui
