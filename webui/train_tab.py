"""Fine-tune tab: settings, what the optimizer will apply, Start/Stop, live progress, loss and memory."""

from __future__ import annotations

import functools
import math
from typing import Any

import gradio as gr

from utils.inference import unload_voice
from utils.text_frontend import TextFrontEnd
from utils.train_args import TrainArguments
from utils.training_optimizations import PRECISIONS, TrainingOptimizer, detect_gpu, get_memory_stats
from webui import run_view
from webui.context import UIContext

DEFAULTS = TrainArguments()
REFRESH_SECONDS = 1.5


def build_train_kwargs(
    version: str, custom_model: str, language: str, num_epochs: float, batch_size: float, grad_acumm: float,
    learning_rate: float, max_seconds: float, grad_checkpoint: bool, sdpa: bool, mixed_precision: bool,
    precision: str, use_amharic_g2p: bool, train_csv: str, eval_csv: str, save_step: float, seed: float,
    resume_from: str, output_dir: str,
) -> dict[str, Any]:  # fmt: skip
    """The train_gpt keyword arguments for the form's values; raises ValueError on bad values."""
    numbers = {"Epochs": num_epochs, "Batch size": batch_size, "Gradient accumulation": grad_acumm,
               "Learning rate": learning_rate, "Longest clip": max_seconds, "Checkpoint every N steps": save_step,
               "Seed": seed}  # fmt: skip
    empty = [label for label, value in numbers.items() if value is None or value == ""]
    if empty:
        raise ValueError(f"Fill in: {', '.join(empty)}.")
    kwargs = dict(
        custom_model=(custom_model or "").strip(),
        version=version,
        language=language,
        num_epochs=int(num_epochs),
        batch_size=int(batch_size),
        grad_acumm=int(grad_acumm),
        train_csv=(train_csv or "").strip(),
        eval_csv=(eval_csv or "").strip(),
        output_path=str(output_dir),
        max_audio_length=int(round(float(max_seconds) * 22050)),
        enable_grad_checkpoint=bool(grad_checkpoint),
        enable_sdpa=bool(sdpa),
        enable_mixed_precision=bool(mixed_precision),
        use_amharic_g2p=bool(use_amharic_g2p),
        learning_rate=float(learning_rate),
        precision=precision,
        save_step=int(save_step),
        seed=int(seed),
        resume_from=(resume_from or "").strip(),
    )
    TrainArguments(**kwargs).validate()
    TextFrontEnd(language, bool(use_amharic_g2p))  # G2P with another language is refused here, not in the run
    if not kwargs["train_csv"]:
        raise ValueError("No dataset yet: check one in the Dataset tab (or type the train CSV path).")
    return kwargs


def plan_markdown(grad_checkpoint: bool, sdpa: bool, mixed_precision: bool, precision: str) -> str:
    plan = TrainingOptimizer(bool(grad_checkpoint), bool(sdpa), bool(mixed_precision), precision or "auto").plan()
    return "#### What will be applied\n" + plan.to_markdown()


def batch_markdown(train_rows: Any, batch_size: float, grad_acumm: float, num_epochs: float) -> str:
    batch, accumulation, epochs = int(batch_size or 1), int(grad_acumm or 1), int(num_epochs or 1)
    effective = f"**Effective batch** {batch} × {accumulation} = {batch * accumulation} clips per optimizer step"
    if not train_rows:
        return effective + " · check a dataset to see steps per epoch"
    steps = math.ceil(int(train_rows) / batch)
    updates = math.ceil(steps / accumulation)
    return (f"{effective}  \n**{int(train_rows)} training clips** → {steps} steps and {updates} optimizer steps "
            f"per epoch, {steps * epochs} steps in {epochs} epochs")  # fmt: skip


def training_status(ctx: UIContext) -> dict[str, Any]:
    """The run's state as plain data (the /training_status endpoint)."""
    state = ctx.runner.poll()
    records = ctx.runner.metrics()
    info = run_view.progress(records)
    return {
        "status": state.status,
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
    active = state.status in ("starting", "running", "stopping")
    return {"training_process": dict(state.memory) if active and state.memory else None, "app": get_memory_stats()}


def refresh(ctx: UIContext):
    state = ctx.runner.poll()
    records = ctx.runner.metrics()
    info = run_view.progress(records)
    active = state.status in ("starting", "running", "stopping")
    training_memory = dict(state.memory) if active and state.memory else None
    return (
        run_view.status_markdown(state, info),
        run_view.progress_html(info, state.status),
        run_view.loss_frame(records),
        run_view.memory_markdown(training_memory, get_memory_stats()),
        run_view.memory_frame(state.memory_history),
        ctx.runner.log_tail(40) + (f"\n\n{state.traceback}" if state.traceback else ""),
        run_view.code_snippet(state.arguments) if state.arguments else "",
        gr.update(interactive=not active),
        gr.update(interactive=active and state.status != "stopping"),
    )


def start_handler(
    ctx: UIContext, version: str, custom_model: str, language: str, num_epochs: float, batch_size: float,
    grad_acumm: float, learning_rate: float, max_seconds: float, grad_checkpoint: bool, sdpa: bool,
    mixed_precision: bool, precision: str, use_amharic_g2p: bool, train_csv: str, eval_csv: str, save_step: float,
    seed: float, resume_from: str,
) -> str:  # fmt: skip
    """Start a training run in a child process (the /start_training endpoint)."""
    values = (version, custom_model, language, num_epochs, batch_size, grad_acumm, learning_rate, max_seconds,
              grad_checkpoint, sdpa, mixed_precision, precision, use_amharic_g2p, train_csv, eval_csv, save_step,
              seed, resume_from)  # fmt: skip
    try:
        kwargs = build_train_kwargs(*values, output_dir=str(ctx.output_dir))
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    if ctx.runner.is_active():
        raise gr.Error("A training run is already active; stop it or wait for it to end.")
    unload_voice()  # the Test tab's model would hold GPU memory the run needs
    started, message = ctx.runner.start(kwargs)
    if not started:
        raise gr.Error(message)
    return message


def create_train_tab(ctx: UIContext) -> dict[str, Any]:
    gpu = detect_gpu()
    with gr.Tab("2. Fine-tune", id="train"):
        gr.Markdown(f"**Detected:** {gpu.summary()}")
        with gr.Row():
            ctx.train_csv.render()
            ctx.eval_csv.render()
        with gr.Row():
            ctx.version.render()
            custom_model = gr.Textbox(label="Custom model.pth (optional)", placeholder="start from a fine-tuned model")
            ctx.language.render()
        with gr.Row():
            num_epochs = gr.Number(DEFAULTS.num_epochs, label="Epochs", precision=0, minimum=1)
            batch_size = gr.Number(DEFAULTS.batch_size, label="Batch size", precision=0, minimum=1, maximum=512)
            grad_acumm = gr.Number(DEFAULTS.grad_acumm, label="Gradient accumulation", precision=0, minimum=1)
            learning_rate = gr.Number(DEFAULTS.learning_rate, label="Learning rate", minimum=0)
            max_seconds = gr.Slider(2.0, 11.6, value=11.6, step=0.1, label="Longest clip (seconds)")
        batch_info = gr.Markdown(batch_markdown(None, DEFAULTS.batch_size, DEFAULTS.grad_acumm, DEFAULTS.num_epochs))
        with gr.Row():
            grad_checkpoint = gr.Checkbox(True, label="Gradient checkpointing", info="less GPU memory, ~30% more compute")
            sdpa = gr.Checkbox(True, label="SDPA attention", info="fused attention kernels")
            mixed_precision = gr.Checkbox(True, label="Mixed precision", info="BF16 on Ampere+, FP16 on Volta/Turing")
            precision = gr.Radio(list(PRECISIONS), value="auto", label="Precision")
            ctx.use_g2p.render()
        plan = gr.Markdown(plan_markdown(True, True, True, "auto"))
        with gr.Accordion("Advanced", open=False):
            with gr.Row():
                save_step = gr.Number(DEFAULTS.save_step, label="Checkpoint every N steps", precision=0, minimum=1)
                seed = gr.Number(DEFAULTS.seed, label="Seed", precision=0)
                resume_from = gr.Dropdown([("(new run)", "")] + ctx.run_choices(), value="", label="Resume run",
                                          info="continue a stopped run: step, optimizer and scheduler restored")  # fmt: skip
        with gr.Row():
            start = gr.Button("Start training", variant="primary")
            stop = gr.Button("Stop (saves a checkpoint)", variant="stop", interactive=False)
        start_message = gr.Markdown()
        status = gr.Markdown("### ⚪ Idle")
        bar = gr.HTML(run_view.progress_html(run_view.progress([]), "idle"))
        with gr.Row():
            loss_plot = gr.LinePlot(x="step", y="loss", color="series", label="Loss (train and eval)")
            memory_plot = gr.LinePlot(x="seconds", y="MB", color="series", label="Memory over time")
        memory = gr.Markdown(elem_id="memory-panel")
        log = gr.Textbox(label="Log (last lines)", lines=12, max_lines=12, autoscroll=True, interactive=False)
        code = gr.Code(label="Copy as code: the train_gpt call of this run", language="python", interactive=False)
        timer = gr.Timer(REFRESH_SECONDS)

    form = [ctx.version, custom_model, ctx.language, num_epochs, batch_size, grad_acumm, learning_rate, max_seconds,
            grad_checkpoint, sdpa, mixed_precision, precision, ctx.use_g2p, ctx.train_csv, ctx.eval_csv, save_step, seed,
            resume_from]  # fmt: skip
    outputs = [status, bar, loss_plot, memory, memory_plot, log, code, start, stop]
    start.click(functools.partial(start_handler, ctx), form, start_message, api_name="start_training",
                concurrency_limit=1).then(lambda: refresh(ctx), None, outputs, api_visibility="undocumented")  # fmt: skip
    stop.click(lambda: ctx.runner.stop(), None, start_message, api_name="stop_training")
    for box in (grad_checkpoint, sdpa, mixed_precision, precision):
        box.change(plan_markdown, [grad_checkpoint, sdpa, mixed_precision, precision], plan, api_visibility="undocumented")
    for box in (ctx.usable_train_rows, batch_size, grad_acumm, num_epochs):
        box.change(batch_markdown, [ctx.usable_train_rows, batch_size, grad_acumm, num_epochs], batch_info,
                   api_visibility="undocumented")  # fmt: skip
    timer.tick(lambda: refresh(ctx), None, outputs, api_visibility="undocumented", show_progress="hidden")
    return {"refresh_outputs": outputs, "refresh": lambda: refresh(ctx), "resume_from": resume_from}


def register_status_api(ctx: UIContext) -> None:
    """JSON endpoints for scripts (gradio_client): /training_status and /memory_stats."""

    def training_status_api() -> dict:
        return training_status(ctx)

    def memory_stats_api() -> dict:
        return memory_stats(ctx)

    gr.api(training_status_api, api_name="training_status")
    gr.api(memory_stats_api, api_name="memory_stats")
