"""The Runs tab's sweep: the Fine-tune form's settings fixed, a search space, a budget and a rule; Start sweep runs
utils.sweep.sweep_gpt in the background (its trials are runs of this output folder, one at a time per GPU), the
panel follows its trials, Stop sweep ends the running trial with a checkpoint (the next Start resumes it)."""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

from utils.quality.selection import BestRule
from utils.sweep.space import SearchSpace
from utils.sweep.sweep import Budget, SweepProgress, check_study_name, sweep_gpt
from webui import form
from webui.context import UIContext
from webui.shown import page_error, shown

TICK_S = 2.0
# Set per trial by the sweep (utils.cli.SWEEP_SETS): the form's values for them are not used.
SWEEP_SETS = ("best_by", "resume_from", "quality_baseline_from", "devices", "run_name")


def default_space_text(num_epochs: int = 10) -> str:
    return "\n".join(d.text().replace(" (log)", "") for d in SearchSpace.of(None, num_epochs=num_epochs).dimensions)


def _params(params: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in (params or {}).items())


def progress_markdown(state: SweepProgress, error: str = "") -> str:
    """What the sweep has done: its budget and estimate, the trials running and those ended, then its summary."""
    with state.lock:
        events, running = list(state.events), dict(state.running)
    lines = []
    if state.study_name:
        lines.append(
            f"**Sweep {shown(state.study_name)}** ({shown(state.storage)}): budget {shown(state.budget)}. "
            f"{shown(state.estimate)}"
        )
    started = {e["trial"]: e.get("params") for e in events if e.get("event") == "started"}
    ended_here = sum(e.get("event") == "ended" for e in events)
    if state.study_name and not state.done:
        of = f" of {state.trials_budget} in the study" if state.trials_budget else ""
        lines.append(f"Trials ended by this sweep: {ended_here}{of}; training now: {len(running)}.")
    for number, info in sorted(running.items()):
        value = info.get("value")
        lines.append(
            f"- Trial {number} training ({shown(_params(info.get('params') or started.get(number)))}): "
            f"epoch {info.get('epoch') or 0}" + ("" if value is None else f", value {value:.4g}")
        )
    ended = [e for e in events if e.get("event") == "ended"]
    if ended:
        against = any(e.get("gain") is not None for e in ended)  # none under eval_loss: the base has no eval loss
        head = ["trial", "state", "value", *(["against base"] if against else []), "settings", "why"]
        lines += ["", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for e in ended:
            value = "" if e.get("value") is None else f"{e['value']:.4g}"
            gain = ["" if e.get("gain") is None else f"{e['gain']:+.3f}"] if against else []
            cells = [str(e["trial"]), str(e.get("state")), value, *gain, shown(_params(started.get(e["trial"])))]
            lines.append("| " + " | ".join([*cells, shown(e.get("reason") or "")]) + " |")
    if state.done and state.message:
        lines += ["", shown(state.message)]
    elif not state.study_name and state.message:
        lines.append(shown(state.message))
    if error:
        lines.append(f"**The sweep failed:** {shown(error)}")
    return "\n".join(lines) or "No sweep yet."


def start_sweep(
    ctx: UIContext, space: str, trials: float, minutes: float, rule: str, study_name: str, *form_values: Any
) -> tuple[Any, Any]:
    from utils.model.inference import unload_voice
    from utils.quality.asr import clear_transcriber_cache

    values = dict(zip(form.form_ids(), form_values, strict=True))
    try:
        arguments = form.arguments_from_form(values, str(ctx.output_dir), ctx.roots)
    except ValueError as exc:
        raise page_error(exc) from exc
    if ctx.runner.is_active():
        raise page_error("A training run is active (2. Fine-tune): stop it or wait for it to end.")
    fixed = {k: v for k, v in arguments.to_dict().items() if k not in SWEEP_SETS}
    roots = [str(root) for root in ctx.roots.audio_roots(arguments.train_csv, arguments.eval_csv)]
    options = {
        "space": space,
        "trials": int(trials) if trials else None,
        "minutes": float(minutes) if minutes else None,
        "rule": rule,
        "study_name": (study_name or "sweep").strip(),
        "audio_roots": roots,
    }
    try:
        check_study_name(options["study_name"])
        Budget(options["trials"], options["minutes"])  # a budget of nothing: said at once
        SearchSpace.of(space, num_epochs=arguments.num_epochs).check_with(fixed)  # a bad space: said at once
        with ctx.gpu_work:
            unload_voice()  # the Test tab's model and Whisper would hold GPU memory the trials need
            clear_transcriber_cache()
            ctx.sweep.start(sweep_gpt, **options, **fixed)
    except (ValueError, RuntimeError) as exc:
        raise page_error(exc) from exc
    return gr.update(value="Starting the sweep: checking the dataset..."), gr.Timer(active=True)


def ended_trials(state: SweepProgress) -> int:
    with state.lock:
        return sum(e.get("event") == "ended" for e in state.events)


def follow(ctx: UIContext) -> tuple[Any, Any, int]:
    """The panel, the timer kept on while the sweep runs, and how many trials ended (the runs table follows it)."""
    job = ctx.sweep
    return progress_markdown(job.state, job.error), gr.Timer(active=job.active), ended_trials(job.state)


def create_sweep(ctx: UIContext) -> dict[str, Any]:
    with gr.Accordion("Sweep: which settings beat the base model", open=False, elem_id="sweep-accordion"):
        gr.Markdown(
            "Trains several runs with the Fine-tune form's settings, each drawing the options below (Optuna's TPE), "
            "scores every one on the same sentences against the base model (scored once, at step 0, for all), and "
            "stops a trial that falls behind the others (with its checkpoint). Trials are runs: they appear in the "
            "table above. The study is kept in the output folder (sweeps/NAME.db; open it in optuna-dashboard): Start "
            "again with the same name continues it. One dimension per line: name=low:high or name=a,b."
        )
        with gr.Row():
            space = gr.Textbox(default_space_text(), label="Search space", lines=4, elem_id="sweep-space", scale=2)
            with gr.Column(scale=1):
                trials = gr.Number(
                    8, label="Trials in the study, in all", precision=0, minimum=1, elem_id="sweep-trials"
                )
                minutes = gr.Number(0, label="Minutes at most (0: no limit)", minimum=0, elem_id="sweep-minutes")
        with gr.Row():
            rule = gr.Dropdown(
                [r.value for r in BestRule],
                value="combined",
                label="Better means (the objective)",
                elem_id="sweep-rule",
            )
            study_name = gr.Textbox("sweep", label="Study name", elem_id="sweep-name")
        with gr.Row():
            start = gr.Button("Start sweep", variant="primary", elem_id="sweep-start")
            stop = gr.Button("Stop sweep", variant="stop", elem_id="sweep-stop")
        status = gr.Markdown(progress_markdown(ctx.sweep.state, ctx.sweep.error), elem_id="sweep-status")
        timer = gr.Timer(TICK_S, active=ctx.sweep.active)
        ended = gr.State(0)
    form_components = [ctx[f"form.{cid}"] for cid in form.form_ids()]
    start.click(
        functools.partial(start_sweep, ctx),
        [space, trials, minutes, rule, study_name, *form_components],
        [status, timer],
        api_name="start_sweep",
    )
    stop.click(lambda: ctx.sweep.stop(), None, status, api_name="stop_sweep")
    timer.tick(
        functools.partial(follow, ctx),
        None,
        [status, timer, ended],
        api_visibility="undocumented",
        show_progress="hidden",
    )
    return {"sweep_status": status, "sweep_timer": timer, "sweep_ended": ended}
