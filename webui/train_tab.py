"""Fine-tune tab: the form (generated from TrainArguments), what the optimizer will apply, Start/Stop, and live
progress, loss and memory of the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from utils.device.gpu import detect_gpu
from utils.device.memory import get_memory_stats
from utils.model.inference import unload_voice
from utils.options.arguments import TrainArguments
from utils.options.input_files import check_input_files
from utils.quality.asr import clear_transcriber_cache, scoring_note
from utils.training.recording.records import QualityRecord
from utils.training.recording.run_record import load_run
from webui import base_model_view, fit_gpu_view, form, live_view, quality_view, run_view, voice_view
from webui.context import GPU_QUEUE, UIContext
from webui.form_spec import ADVANCED, DATA, GROUPS, MODEL, QUALITY, SCHEDULE, SPEED
from webui.plan_view import PLAN_OPTIONS, batch_markdown, memory_plan_markdown, plan_markdown
from webui.shown import page_error, shown

SCROLL_LOG_TO_END = (
    "() => { const e = document.querySelector('#training-log textarea'); if (e) e.scrollTop = e.scrollHeight; }"
)
SCROLL_LOG_TO_END_SOON = f"() => {{ setTimeout({SCROLL_LOG_TO_END}, 150); setTimeout({SCROLL_LOG_TO_END}, 600); }}"
QUALITY_PLAYERS = 3  # clips of the latest evaluation played on the page


def training_status(ctx: UIContext) -> dict[str, Any]:
    """The run's state as plain data (the /training_status endpoint)."""
    state = ctx.runner.poll()
    info = run_view.progress(ctx.runner.metrics())
    return {
        "status": state.status.value,
        "message": state.message,
        "run_dir": state.run_dir,
        **{k: info[k] for k in ("step", "total", "epoch", "eta_s", "loss", "eval_loss", "samples_per_sec")},
        "error": state.error,
        "result": state.result,
        "log_tail": ctx.runner.log_tail(20),
    }


def memory_stats(ctx: UIContext) -> dict[str, Any]:
    """Memory now: the training process's (while a run is active) and this app's (the /memory_stats endpoint)."""
    state = ctx.runner.poll()
    return {
        "training_process": dict(state.memory) if state.active and state.memory else None,
        "app": get_memory_stats(),
    }


def _players(clips: list[tuple[str, Any]], count: int) -> list[Any]:
    players = [gr.update(value=audio, label=label, visible=True) for label, audio in clips]
    return players + [gr.update(value=None, visible=False)] * (count - len(clips))


def quality_refresh(ctx: UIContext, seen: str) -> tuple[Any, ...]:
    """The score table, the best checkpoint, the babble and naturalness lines with the verdict against the base
    model, the quality plot, and the latest evaluation's clips and probe clips; sent only when they changed since
    `seen` (the timer ticks every 1.5 s, and clips are decoded audio)."""
    state = ctx.runner.poll()
    records = [r for r in ctx.runner.metrics() if r.get("type") == QualityRecord.TYPE]
    best = quality_view.best_markdown(state.run_dir) if state.run_dir else ""
    voice = voice_view.voice_markdown(state.run_dir, records)
    signature = f"{state.run_dir}|{len(records)}|{best}|{voice}"
    if signature == seen:
        return (gr.skip(),) * (QUALITY_PLAYERS + voice_view.PROBE_PLAYERS + 5)
    clips = quality_view.evaluation_clips(state.run_dir, records[-1], QUALITY_PLAYERS) if records else []
    probes = voice_view.probe_clips(state.run_dir, records[-1]) if records else []
    return (
        quality_view.quality_frame(records),
        best,
        voice,
        voice_view.quality_plot(records),
        *_players(clips, QUALITY_PLAYERS),
        *_players(probes, voice_view.PROBE_PLAYERS),
        signature,
    )


def run_arguments(ctx: UIContext, run: str) -> dict[str, Any]:
    """The arguments a run folder of this app was trained with ({} when there is none)."""
    if not run:
        return {}
    folder = Path(run).expanduser()
    folder = folder.parent if folder.is_file() else folder
    if ctx.output_dir not in folder.resolve().parents:
        return {}
    return load_run(folder).arguments or {}


def form_for_run(ctx: UIContext, run: str) -> list[Any]:
    """The form's values for resuming `run`: its own settings, with the run picked as resume_from."""
    arguments = run_arguments(ctx, run)
    if not arguments:
        return [gr.update() for _ in form.form_ids()]
    values = form.form_values({**arguments, "resume_from": run})
    return [values[cid] for cid in form.form_ids()]


def form_on_load(ctx: UIContext) -> list[Any]:
    """On page load: the values of the run this app started (running or ended), so the form, the effective-batch
    line, the status and the copy-as-code all tell of the same run; else the form as it is. The last output is
    the effective-batch line. A resume is never carried over: Start after a reload starts a new run with these
    settings (a resume is chosen again, in Advanced)."""
    state = ctx.runner.poll()
    if not state.arguments:
        return [gr.update() for _ in form.form_ids()] + [gr.update()]
    known = {k: v for k, v in state.arguments.items() if k in TrainArguments.__dataclass_fields__}
    known["resume_from"] = ""
    values = form.form_values(known)
    batch = batch_markdown(
        None,
        values["batch_size"],
        values["grad_acumm"],
        values["num_epochs"],
        values.get("devices"),
        known.get("learning_rate"),
    )
    return [values[cid] for cid in form.form_ids()] + [batch]


def start_run(ctx: UIContext, values: dict[str, Any]) -> str:
    """Start a training run in a child process from form values (keys: component ids)."""
    try:
        arguments = form.arguments_from_form(values, str(ctx.output_dir), ctx.roots)
        check_input_files(arguments)  # refused on the page, before a process is started
    except ValueError as exc:
        raise page_error(exc) from exc
    if ctx.runner.is_active():
        raise gr.Error("A training run is already active; stop it or wait for it to end.")
    if ctx.sweep.active:
        raise gr.Error("A sweep is training (5. Runs): stop it or wait for it to end.")
    if not (arguments.custom_model or arguments.resume_from):
        base_model_view.check_base_model(arguments.version)
    roots = [str(root) for root in ctx.roots.audio_roots(arguments.train_csv, arguments.eval_csv)]
    with ctx.gpu_work:  # a transcription or a served request on the GPU ends first; CPU work goes on beside the run
        # Inside the lock: nothing can load a model on the GPU between the unload and the run's start.
        unload_voice()  # the Test tab's (or the speech server's) model and Whisper would hold GPU memory
        clear_transcriber_cache()
        started, message = ctx.runner.start({**arguments.to_dict(), "audio_roots": roots})
    if not started:
        raise page_error(message)
    return message


def _render_form(ctx: UIContext) -> None:
    by_group: dict[str, list[Any]] = {group: [] for group in GROUPS}
    for name, spec in form.form_fields():
        by_group[spec.group].append(ctx[f"form.{form.component_id(name)}"])
    for group in (DATA, MODEL, SCHEDULE):
        with gr.Row():
            for component in by_group[group]:
                component.render()


def _render_group(ctx: UIContext, group: str) -> None:
    for name, spec in form.form_fields():
        if spec.group == group:
            ctx[f"form.{form.component_id(name)}"].render()


def _settings_section(ctx: UIContext) -> dict[str, Any]:
    """The form, what will be applied, the memory plan and the buttons."""
    f = ctx.form_component
    gr.Markdown(f"**Detected:** {detect_gpu().summary()}")
    _render_form(ctx)
    panel = base_model_view.missing_weights_markdown(f("version").value)
    ui = {
        "base_model_panel": gr.Markdown(panel, visible=bool(panel), elem_id="base-model-panel"),
        "batch_info": gr.Markdown(
            batch_markdown(
                None, f("batch_size").value, f("grad_acumm").value, f("num_epochs").value, f("devices").value
            )
        ),
    }
    with gr.Row():
        _render_group(ctx, SPEED)
    ui["plan"] = gr.Markdown(plan_markdown(*(f(name).value for name in PLAN_OPTIONS)))
    with gr.Row():
        ui["estimate"] = gr.Button("Estimate GPU memory", scale=0)
        ui["memory_plan"] = gr.Markdown()
    ui.update(fit_gpu_view.create_fit_gpu(ctx))
    quality = "Measured quality (speak held-out sentences at each evaluation and score them)"
    with gr.Accordion(quality, open=False):
        gr.Markdown(scoring_note(str(f("whisper_model").value or "small")), elem_id="scoring-note")
        with gr.Row():
            _render_group(ctx, QUALITY)
    # A run's name ("en-v2.0.2-20250101-120000 (finished)") must fit its picker.
    f("resume_from").min_width, f("resume_from").scale = 480, 3
    with gr.Accordion("Advanced", open=False), gr.Row():
        _render_group(ctx, ADVANCED)
    with gr.Row():
        ui["start"] = gr.Button("Start training", variant="primary")
        ui["stop"] = gr.Button("Stop (saves a checkpoint)", variant="stop", interactive=False)
    ui["start_message"] = gr.Markdown()
    return ui


def _progress_section() -> dict[str, Any]:
    """Status, progress bar, the loss and memory plots side by side, the scores, and (folded) the log and the
    run's code."""
    ui = {
        "status": gr.Markdown("### ⚪ Idle", elem_id="run-status"),
        "bar": gr.HTML(run_view.progress_html(run_view.progress([]), "idle")),
    }
    # Drawn here as SVG (webui.line_plot): Gradio's LinePlot left series it had not seen at its first draw uncoloured.
    with gr.Row(equal_height=True):
        for key, label, svg in (
            ("loss_plot", "Loss (train and eval)", run_view.loss_plot([])),
            ("memory_plot", "Memory over time", run_view.memory_plot([])),
        ):
            ui[key] = gr.HTML(svg, label=label, show_label=True, container=True, elem_id=key.replace("_", "-"))
    ui["memory"] = gr.Markdown(elem_id="memory-panel")
    ui["quality_table"] = gr.Dataframe(
        headers=quality_view.QUALITY_COLUMNS,
        interactive=False,
        wrap=True,
        label="Measured quality per evaluation (newest first)",
        max_height=260,
        elem_id="quality-table",
        column_widths=quality_view.QUALITY_COLUMN_WIDTHS,
    )
    # The plot at the live plots' size, beside what it shows in words (a full-width SVG would be ~900 px tall).
    with gr.Row(equal_height=False):
        ui["quality_plot"] = gr.HTML(
            voice_view.quality_plot([]),
            label="Measured quality over steps (step 0: the base model)",
            show_label=True,
            container=True,
            elem_id="quality-plot",
        )
        with gr.Column():
            ui["best_info"] = gr.Markdown(elem_id="quality-best")
            ui["voice_info"] = gr.Markdown(elem_id="quality-voice")
    with gr.Row():
        ui["quality_players"] = [
            gr.Audio(visible=False, interactive=False, elem_id=f"quality-clip-{i}") for i in range(QUALITY_PLAYERS)
        ]
    with gr.Row():
        ui["probe_players"] = [
            gr.Audio(visible=False, interactive=False, elem_id=f"probe-clip-{i}")
            for i in range(voice_view.PROBE_PLAYERS)
        ]
    with gr.Accordion("Log (last lines)", open=False, elem_id="log-accordion") as ui["log_accordion"]:
        ui["log"] = gr.Textbox(
            show_label=False, lines=12, max_lines=12, autoscroll=True, interactive=False, elem_id="training-log"
        )
    with gr.Accordion("Copy as code: the train_gpt call of this run", open=False, elem_id="code-accordion"):
        ui["code"] = gr.Code(show_label=False, language="python", interactive=False)
    ui["timer"] = gr.Timer(live_view.FIRST_S)  # its first tick shows the run; then live_view sets its pace
    ui["live_seen"] = gr.State({})
    ui["pulse"] = gr.State("")  # live_view.pulse: the refreshes follow its changes
    # Inside the tab: a component left directly in gr.Tabs takes a tab's slot, and the tab bar then shows
    # one tab twice and loses another.
    ui["quality_seen"] = gr.State("")
    return ui


def create_train_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("2. Fine-tune", id="train"):
        ui = {**_settings_section(ctx), **_progress_section()}
    ui["refresh_outputs"] = [
        ui[k]
        for k in (
            "status",
            "bar",
            "loss_plot",
            "memory",
            "memory_plot",
            "log",
            "code",
            "start",
            "stop",
            "start_message",
        )
    ]
    _wire_controls(ctx, ui)
    _wire_updates(ctx, ui)
    shared = (
        "refresh_outputs",
        "start",
        "stop",
        "status",
        "start_message",
        "timer",
        "pulse",
        "loss_plot",
        "memory_plot",
        "batch_info",
    )
    return ctx.register("train", {k: ui[k] for k in shared})


def _form_handler(handler: Any) -> Any:
    """A handler taking the form's values by component id, with the form's signature for the API."""
    return form.with_form_signature(lambda *values: handler(dict(zip(form.form_ids(), values, strict=True))))


def _wire_controls(ctx: UIContext, ui: dict[str, Any]) -> None:
    f = ctx.form_component
    components = [f(cid) for cid in form.form_ids()]
    started = ui["start"].click(
        _form_handler(lambda values: start_run(ctx, values)),
        components,
        ui["start_message"],
        api_name="start_training",
        concurrency_limit=1,
        concurrency_id=GPU_QUEUE,
    )
    # The timer (the one writer of the live view) ticks at the run's pace from now; the resume chosen for this
    # start is not kept for the next one (a finished resume has nothing left to train).
    started.success(
        lambda: (gr.update(value=live_view.ACTIVE_S), ""),
        None,
        [ui["timer"], f("resume_from")],
        api_visibility="undocumented",
        show_progress="hidden",
    )
    ui["stop"].click(lambda: ctx.runner.stop(), None, ui["start_message"], api_name="stop_training")

    # The planner traces in its own process (utils.memory_plan.child): it patches nothing here and uses no GPU,
    # so it runs beside a synthesis; its child serves one plan at a time.
    def estimate(*values: Any) -> Any:  # a generator: the planner's progress shows while it traces
        chosen = dict(zip(form.form_ids(), values, strict=True))
        yield from fit_gpu_view.streamed(
            lambda progress: memory_plan_markdown(ctx, chosen, progress),
            lambda note: f"**Memory plan:** {shown(note)} …",
        )

    ui["estimate"].click(
        form.with_form_signature(estimate),
        components,
        ui["memory_plan"],
        api_name="estimate_memory",
        concurrency_limit=1,
    )
    fit_gpu_view.wire_fit_gpu(ctx, ui, components)
    toggles = [f(name) for name in PLAN_OPTIONS]
    for box in toggles:
        box.change(plan_markdown, toggles, ui["plan"], api_visibility="undocumented")
    counts = [
        ctx["dataset.usable_train_rows"],
        f("batch_size"),
        f("grad_acumm"),
        f("num_epochs"),
        f("devices"),
        f("learning_rate"),
    ]
    for box in counts:
        box.change(batch_markdown, counts, ui["batch_info"], api_visibility="undocumented")
    f("resume_from").input(
        lambda run: form_for_run(ctx, run), f("resume_from"), components, api_visibility="undocumented"
    )
    base_model_view.wire_plan_freshness(ctx, ui)


def _wire_updates(ctx: UIContext, ui: dict[str, Any]) -> None:
    seen, pulse = ui["live_seen"], ui["pulse"]
    hidden = {"api_visibility": "undocumented", "show_progress": "hidden"}
    ui["timer"].tick(lambda: live_view.pulse(ctx), None, pulse, **hidden)
    pulse.change(lambda last: live_view.refresh(ctx, last), seen, [*ui["refresh_outputs"], ui["timer"], seen], **hidden)
    # A replaced value keeps the textarea's scroll position; the newest lines are the ones to see.
    ui["log"].change(None, None, None, js=SCROLL_LOG_TO_END, api_visibility="undocumented")
    # Unfolded, the log opens on its newest lines too (while folded it has no height to scroll).
    ui["log_accordion"].expand(None, None, None, js=SCROLL_LOG_TO_END_SOON, api_visibility="undocumented")
    quality_seen = ui["quality_seen"]
    pulse.change(
        lambda seen: quality_refresh(ctx, seen),
        quality_seen,
        [
            ui["quality_table"],
            ui["best_info"],
            ui["voice_info"],
            ui["quality_plot"],
            *ui["quality_players"],
            *ui["probe_players"],
            quality_seen,
        ],
        api_visibility="undocumented",
        show_progress="hidden",
    )


def register_status_api(ctx: UIContext) -> None:
    """JSON endpoints for scripts (gradio_client): /training_status and /memory_stats."""

    def training_status_api() -> dict:
        return training_status(ctx)

    def memory_stats_api() -> dict:
        return memory_stats(ctx)

    gr.api(training_status_api, api_name="training_status")
    gr.api(memory_stats_api, api_name="memory_stats")
