"""Test tab: speak any text with a fine-tuned voice (the run's text front end is applied for you)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import gradio as gr

from utils.model import sampling
from utils.model.inference import find_ready_dir, synthesize
from utils.model.ready import REFERENCE_WAV, finetune_info_or_reason, read_inference_settings
from utils.quality.asr import default_whisper_model
from utils.text.languages import LANGUAGE_CHOICES
from webui import quality_view, voice_view
from webui.context import GPU_QUEUE, UIContext
from webui.shown import page_error

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


def _ready_and_reference(ctx: UIContext, source: str, reference: str | None) -> tuple[Path, str | None]:
    """The model's ready/ folder and the reference clip, both confined to the app's folders (ValueError)."""
    ready = find_ready_dir(ctx.roots.run_folder(source, "model"))
    if reference:
        roots = (*ctx.roots.data_roots(), ctx.output_dir.resolve())
        return ready, str(ctx.roots.confine(reference, roots, "reference audio"))
    return ready, None


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
) -> tuple[str, str]:
    """Generate speech; returns (audio path for the player, same path for download)."""
    source = _chosen_model(run, ready_path)
    _gpu_free(ctx)
    try:
        settings = _sampling(temperature, length_penalty, repetition_penalty, top_k, top_p, speed, max_tokens)
        ready, reference = _ready_and_reference(ctx, source, reference)
        output = ctx.output_dir / "synthesized" / f"{Path(source).name}-{time.strftime('%Y%m%d-%H%M%S')}.wav"
        synthesize(
            ready,
            text,
            language=language or None,
            reference_wav=reference,
            **settings,
            output_wav=output,
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    except Exception as exc:  # a model that fails to load or generate: say so on the page, not "upstream error"
        raise page_error(f"Generation failed: {type(exc).__name__}: {exc}") from exc
    return str(output), str(output)


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
    from utils.quality.compare import compare_with_base

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
    # The clip itself is not sent back: the page serves only exports and synthesized audio. Empty means the
    # run's own reference clip, which synthesize and compare_with_base take by default.
    own = "the run's own reference clip" if (ready / REFERENCE_WAV).is_file() else "no reference clip in this run"
    settings = read_inference_settings(ready)
    return (
        gr.update(value=language) if isinstance(language, str) and language else gr.update(),
        gr.update(value=None, label=f"Reference voice: {own} (upload a clip to use another)"),
        *(gr.update(value=settings.values[key]) for key in SAMPLING_KEYS),
        voice_view.sampling_source(ready, settings),
    )


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
            ui["language"] = gr.Dropdown(list(LANGUAGE_CHOICES), value="en", label="Language", allow_custom_value=True)
            ui["reference"] = gr.Audio(
                label="Reference voice (from the run, or upload your own)", type="filepath", sources=["upload"]
            )
        with gr.Column():
            ui["sampling_source"] = gr.Markdown(
                "**Sampling settings**: the base model's until a run is picked.", elem_id="sampling-source"
            )
            ui["sampling"] = [_slider(name) for name in SLIDER_KEYS]
    return ui


def _results_section() -> dict[str, Any]:
    """The generated speech, and the comparison with the base model."""
    ui: dict[str, Any] = {"generate": gr.Button("Generate", variant="primary")}
    with gr.Row():
        ui["audio"] = gr.Audio(label="Result", type="filepath", interactive=False)
        ui["download"] = gr.File(label="Download", elem_id="test-download")
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
        ui = {**_voice_section(ctx), **_results_section()}
    run, ready_path = ui["run"], ui["ready_path"]
    ui["refresh_runs"].click(
        lambda: gr.update(choices=ctx.run_choices(ready_only=True)), None, run, api_visibility="undocumented"
    )
    for trigger in (run.change, ready_path.submit):
        trigger(
            functools.partial(run_selected, ctx),
            [run, ready_path],
            [ui["language"], ui["reference"], *ui["sampling"][: len(SAMPLING_KEYS)], ui["sampling_source"]],
            api_visibility="undocumented",
        )
    voice = [run, ready_path, ui["reference"], ui["text"], ui["language"]]
    ui["generate"].click(
        functools.partial(synthesize_handler, ctx),
        [*voice, *ui["sampling"]],
        [ui["audio"], ui["download"]],
        api_name="synthesize",
        concurrency_id=GPU_QUEUE,
        concurrency_limit=1,
    )
    ui["compare"].click(
        functools.partial(compare_handler, ctx),
        [*voice, ui["seed"], ui["whisper_model"], *ui["sampling"]],
        [ui["finetuned_audio"], ui["base_audio"], ui["scores"]],
        api_name="compare_with_base",
        concurrency_id=GPU_QUEUE,
        concurrency_limit=1,
    )
    return ctx.register("test", {"run": run})
