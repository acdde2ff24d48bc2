"""Test tab: speak any text with a fine-tuned voice (the run's text front end is applied for you)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import gradio as gr

from utils.model import sampling
from utils.model.inference import find_ready_dir, synthesize
from utils.model.named_voices import voice_names
from utils.model.ready import finetune_info_or_reason, read_inference_settings
from utils.quality.asr import default_whisper_model
from utils.text.languages import LANGUAGE_CHOICES
from webui import lexicon_view, quality_view, reference_view, voice_view
from webui.context import GPU_QUEUE, UIContext
from webui.long_text_view import report_markdown
from webui.shown import page_error, shown

# The sliders a run's ready/config.json sets, in the order of ui["sampling"].
SAMPLING_KEYS = sampling.CONFIG_KEYS
# ui["sampling"]: those, then the ones the page alone sets.
SLIDER_KEYS = (*SAMPLING_KEYS, "speed", "max_audio_tokens")
# ~21.5 GPT audio tokens per second of speech; 250 is about 11.6 s, the longest training clip.
DEFAULT_MAX_AUDIO_TOKENS = sampling.SETTINGS["max_audio_tokens"].default


def _chosen_model(run: str, ready_path: str) -> str:
    """The typed ready/ path, else the picked run; a page error when neither is given."""
    source = (ready_path or "").strip() or run
    if not source:
        raise gr.Error("Pick a finished run (or type the path of a ready/ folder).")
    return source


def _gpu_free(ctx: UIContext) -> None:
    if why := ctx.gpu_in_use_by_training():
        raise page_error(why)


def _ready_and_reference(ctx: UIContext, source: str, reference: Any) -> tuple[Path, list[str] | None]:
    """The model's ready/ folder and the reference clips (one or several), all confined to the app's folders
    (ValueError)."""
    ready = find_ready_dir(ctx.roots.run_folder(source, "model"))
    return ready, reference_view.confined_references(ctx, reference)


def _sampling(
    temperature: float,
    length_penalty: float,
    repetition_penalty: float,
    top_k: float,
    top_p: float,
    speed: float,
    max_tokens: float,
) -> dict[str, Any]:
    """The form's sampling settings as synthesize's keywords, each checked against its declaration
    (utils.model.sampling: a ValueError naming the setting, its range and the value; Gradio numbers arrive as
    floats, a script may send anything)."""
    values = {
        "temperature": temperature,
        "length_penalty": length_penalty,
        "repetition_penalty": repetition_penalty,
        "top_k": top_k,
        "top_p": top_p,
        "speed": speed,
        "max_audio_tokens": max_tokens,
    }
    return {name: sampling.checked(name, value) for name, value in values.items()}


def _checked_by_the_handler(component: Any) -> Any:
    """A slider (or number) whose value goes to the handler as sent, which checks it against the setting's
    declaration and names the setting: Gradio's own preprocessing failed on a string with a TypeError (a client
    saw the generic "Error") and refused a number out of range without naming the setting. (An instance
    attribute, as webui.form does: a subclass of a component makes Gradio write a .pyi stub.)"""
    component.preprocess = lambda payload: payload
    return component


def _slider(name: str) -> Any:
    """The slider of a setting: its declared range, step, starting value, label and help."""
    setting = sampling.SETTINGS[name]
    return _checked_by_the_handler(
        gr.Slider(
            setting.low,
            setting.high,
            value=setting.default,
            step=setting.step,
            label=setting.label,
            info=setting.help,
        )
    )


def synthesize_handler(
    ctx: UIContext,
    run: str,
    ready_path: str,
    reference: str | None,
    text: str,
    language: str,
    temperature: float,
    length_penalty: float,
    repetition_penalty: float,
    top_k: float,
    top_p: float,
    speed: float,
    max_tokens: float,
    tries: float = 1,  # a script or test calling the handler itself speaks as before: one try, no checking
    voice: str = "",
    progress: Any = gr.Progress(),
) -> tuple[str, str, str]:
    """Generate speech, sentence by sentence, each checked with up to `tries` tries (utils.model.long_text); returns
    (audio path for the player, same path for download, the per-sentence report as Markdown). `voice`: one of the
    named voices of a run trained on several speakers ("" the run's own)."""
    source = _chosen_model(run, ready_path)
    _gpu_free(ctx)
    try:
        settings = _sampling(temperature, length_penalty, repetition_penalty, top_k, top_p, speed, max_tokens)
        ready, reference = _ready_and_reference(ctx, source, reference)
        output = ctx.output_dir / "synthesized" / f"{Path(source).name}-{time.strftime('%Y%m%d-%H%M%S')}.wav"
        speech = synthesize(
            ready,
            text,
            language=language or None,
            reference_wav=reference,
            **settings,
            output_wav=output,
            tries=sampling.checked("tries", tries),
            progress=lambda done, total, message: progress(done / max(total, 1), desc=message),
            voice=str(voice or "").strip() or None,
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    except Exception as exc:  # a model that fails to load or generate: say so on the page, not "upstream error"
        raise page_error(f"Generation failed: {type(exc).__name__}: {exc}") from exc
    return str(output), str(output), report_markdown(speech)


def compare_handler(
    ctx: UIContext,
    run: str,
    ready_path: str,
    reference: str | None,
    text: str,
    language: str,
    seed: float,
    whisper_model: str,
    temperature: float,
    length_penalty: float,
    repetition_penalty: float,
    top_k: float,
    top_p: float,
    speed: float,
    max_tokens: float,
) -> tuple[Any, Any, Any]:
    """The fine-tuned voice and its base model on the same text, reference and seed: (fine-tuned audio, base
    audio, scores table). Audio goes to the page as decoded samples."""
    from utils.model.compare import compare_with_base

    source = _chosen_model(run, ready_path)
    _gpu_free(ctx)
    try:
        ready, reference = _ready_and_reference(ctx, source, reference)
        settings = _sampling(temperature, length_penalty, repetition_penalty, top_k, top_p, speed, max_tokens)
        result = compare_with_base(
            ready,
            text,
            language=language or None,
            reference_wav=reference,
            seed=sampling.checked("seed", 0 if seed is None else seed),
            whisper_model=ctx.roots.whisper_model(whisper_model),
            output_dir=ctx.output_dir / "synthesized",
            **settings,
        )
    except ValueError as exc:
        raise page_error(exc) from exc

    def player(side: Any) -> Any:
        return (side.sample_rate, side.wav) if side.file is not None else None

    return player(result.finetuned), player(result.base), quality_view.comparison_frame(result)


def run_selected(ctx: UIContext, run: str, ready_path: str) -> tuple[Any, ...]:
    """The run's language, reference clip and sampling settings (ready/config.json: chosen by measurement at the
    end of its run, or the base model's), and where those came from, to prefill the form. A setting out of its
    range in the file is not put in its slider: the base model's is, and the Markdown says why (file, setting,
    value); an unreadable finetune.json leaves the language as it is, and says so."""
    source = (ready_path or "").strip() or run
    try:
        ready = find_ready_dir(ctx.roots.run_folder(source, "model"))
    except ValueError:
        return (gr.update(),) * (3 + len(SAMPLING_KEYS))
    info, unreadable = finetune_info_or_reason(ready)  # voice_view.sampling_source says why when it is
    language = None if unreadable else info.get("language", "en")
    # The clips themselves are not sent back: the page serves only exports and synthesized audio. Empty means the
    # run's own reference clips, which synthesize and compare_with_base take by default.
    settings = read_inference_settings(ready)
    return (
        gr.update(value=language) if isinstance(language, str) and language else gr.update(),
        reference_view.reference_update(ready),
        *(gr.update(value=settings.values[key]) for key in SAMPLING_KEYS),
        voice_view.sampling_source(ready, settings),
    )


def voices_of_run(ctx: UIContext, run: str, ready_path: str) -> Any:
    """The Voice choice: the named voices of a run trained on several speakers (hidden for a voice of one)."""
    source = (ready_path or "").strip() or run
    try:
        names = list(voice_names(find_ready_dir(ctx.roots.run_folder(source, "model")))) if source else []
    except ValueError:
        names = []
    choices = [("the run's own voice", ""), *((shown(name, "plain"), name) for name in names)]
    return gr.update(choices=choices, value="", visible=bool(names))


def voice_language(ctx: UIContext, run: str, ready_path: str, voice: str) -> Any:
    """The Language choice follows a named voice: its own language (unchanged for the run's own voice)."""
    source = (ready_path or "").strip() or run
    if not voice or not source:
        return gr.update()
    try:
        language = voice_names(find_ready_dir(ctx.roots.run_folder(source, "model"))).get(voice, {}).get("language")
    except ValueError:
        return gr.update()
    return gr.update(value=language) if isinstance(language, str) and language else gr.update()


def fill_for_run(ctx: UIContext, run: str, ready_path: str, filled_for: str) -> tuple[Any, ...]:
    """run_selected and the voice's lexicon for the run shown, once per run (`filled_for`: the one the form was last
    filled for; the same again changes nothing, so a later refresh of the run lists keeps what the person set)."""
    shown_run = (ready_path or "").strip() or run or ""
    outputs = 3 + len(SAMPLING_KEYS) + 2
    if not shown_run or shown_run == filled_for:
        return (*(gr.skip() for _ in range(outputs)), filled_for)
    return (*run_selected(ctx, run, ready_path), *lexicon_view.lexicon_loaded(ctx, run, ready_path), shown_run)


def _voice_section(ctx: UIContext) -> dict[str, Any]:
    """Which voice, what it says, the reference clip and the sampling settings."""
    ui: dict[str, Any] = {}
    with gr.Row():
        ui["run"] = gr.Dropdown(
            ctx.run_choices(ready_only=True), label="Fine-tuned run", allow_custom_value=True, elem_id="test-run"
        )
        ui["refresh_runs"] = gr.Button("↻ Runs", scale=0)
        ui["ready_path"] = gr.Textbox(label="…or a ready/ folder path", placeholder="/path/to/run/ready")
    with gr.Row():
        with gr.Column():
            ui["text"] = gr.Textbox(label="Text", lines=3, value="Hello! This is my fine-tuned voice.")
            ui["language"] = gr.Dropdown(
                list(LANGUAGE_CHOICES), value="en", label="Language", allow_custom_value=True, elem_id="test-language"
            )
            ui["voice"] = gr.Dropdown(
                [("the run's own voice", "")],
                value="",
                label="Voice (a run of several speakers)",
                visible=False,
                elem_id="test-voice",
            )
            ui["reference"] = reference_view.reference_input()
        with gr.Column():
            ui["sampling_source"] = gr.Markdown(
                "**Sampling settings**: the base model's until a run is picked.", elem_id="sampling-source"
            )
            ui["sampling"] = [_slider(name) for name in SLIDER_KEYS]
    return ui


def _results_section() -> dict[str, Any]:
    """The generated speech, and the comparison with the base model."""
    with gr.Row():
        ui: dict[str, Any] = {"tries": _slider("tries")}  # a long text is spoken sentence by sentence, each checked
        ui["generate"] = gr.Button("Generate", variant="primary")
    with gr.Row():
        ui["audio"] = gr.Audio(label="Result", type="filepath", interactive=False)
        ui["download"] = gr.File(label="Download", elem_id="test-download")
    # The report reaches the page through a State: /synthesize keeps answering (audio, download) to scripts.
    ui["report"] = gr.State("")
    ui["sentences"] = gr.Markdown(elem_id="test-sentences")
    with gr.Accordion("Compare with the base model: same text, reference and seed", open=False):
        with gr.Row():
            seed = sampling.SETTINGS["seed"]
            ui["seed"] = _checked_by_the_handler(
                gr.Number(
                    seed.default, precision=0, minimum=seed.low, maximum=seed.high, label="Seed (the same for both)"
                )
            )
            ui["whisper_model"] = gr.Textbox(
                default_whisper_model("en", "small"),
                label="Whisper model for the scores (name, or a folder under models/whisper)",
            )
            ui["compare"] = gr.Button("Compare with the base model")
        with gr.Row():
            ui["finetuned_audio"] = gr.Audio(label="Fine-tuned", interactive=False, elem_id="compare-finetuned")
            ui["base_audio"] = gr.Audio(label="Base model", interactive=False, elem_id="compare-base")
        ui["scores"] = gr.Dataframe(
            headers=list(quality_view.COMPARISON_COLUMNS),
            label="Scores (CER/WER of a Whisper transcript; similarity to the reference's speaker)",
            wrap=True,
            interactive=False,
            # Empty score columns keep a width: they collapsed into letters stacked one per line.
            column_widths=quality_view.COMPARISON_COLUMN_WIDTHS,
            elem_id="compare-scores",
        )
    return ui


def create_test_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("3. Test", id="test"):
        ui = _voice_section(ctx)
        ui.update(lexicon_view.create_lexicon_section(ctx, ui["run"], ui["ready_path"], ui["text"], ui["language"]))
        ui.update(_results_section())
        ui.update(
            reference_view.create_reference_choice_section(
                ctx, ui["run"], ui["ready_path"], ui["whisper_model"], ui["reference"]
            )
        )
        # Inside the tab: a component left directly in gr.Tabs takes a tab's slot (the bar shows a tab twice).
        filled = gr.State("")
    run, ready_path = ui["run"], ui["ready_path"]
    ui["refresh_runs"].click(
        lambda: gr.update(choices=ctx.run_choices(ready_only=True)), None, run, api_visibility="undocumented"
    )
    # The form follows the run shown: picked, typed, or put there by the page itself (on load, or when a run ends),
    # which fires no change event: the page runs `fill` after those too (webui.ui).
    fill = (
        functools.partial(fill_for_run, ctx),
        [run, ready_path, filled],
        [
            ui["language"],
            ui["reference"],
            *ui["sampling"][: len(SAMPLING_KEYS)],
            ui["sampling_source"],
            ui["lexicon"],
            ui["lexicon_summary"],
            filled,
        ],
    )
    for trigger in (run.change, ready_path.submit):
        trigger(*fill, api_visibility="undocumented")
        trigger(functools.partial(voices_of_run, ctx), [run, ready_path], ui["voice"], api_visibility="undocumented")
    ui["voice"].change(
        functools.partial(voice_language, ctx),
        [run, ready_path, ui["voice"]],
        ui["language"],
        api_visibility="undocumented",
    )
    voice = [run, ready_path, ui["reference"], ui["text"], ui["language"]]
    ui["generate"].click(
        functools.partial(synthesize_handler, ctx),
        [*voice, *ui["sampling"], ui["tries"], ui["voice"]],
        [ui["audio"], ui["download"], ui["report"]],
        api_name="synthesize",
        concurrency_id=GPU_QUEUE,
        concurrency_limit=1,
    ).then(lambda report: report, ui["report"], ui["sentences"], api_visibility="undocumented")
    ui["compare"].click(
        functools.partial(compare_handler, ctx),
        [*voice, ui["seed"], ui["whisper_model"], *ui["sampling"]],
        [ui["finetuned_audio"], ui["base_audio"], ui["scores"]],
        api_name="compare_with_base",
        concurrency_id=GPU_QUEUE,
        concurrency_limit=1,
    )
    return ctx.register("test", {"run": run, "fill": fill})
