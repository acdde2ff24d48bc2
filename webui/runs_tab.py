"""Runs tab: every run of the output folder side by side (utils.sweep.runs.compare_runs), "use these settings" to
fill the Fine-tune form from one, a sweep of the form's settings (webui.sweep_view) and blind A/B listening
(webui.listening_view)."""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr
import pandas as pd

from utils.options.arguments import TrainArguments
from utils.sweep.listening import BASE
from utils.sweep.runs import COLUMNS, compare_runs
from utils.training.recording.run_record import RUN_FILE, read_run
from webui import form, listening_view, sweep_view
from webui.context import UIContext
from webui.shown import page_error, shown, shown_cells

# compare_runs' columns as the table shows them: short headers, so that none breaks over lines.
SHOWN_COLUMNS = {
    "run": "run",
    "status": "status",
    "trial": "sweep trial",
    "epochs": "epochs",
    "learning_rate": "lr",
    "lora_rank": "LoRA",
    "cer": "CER",
    "similarity": "sim.",
    "naturalness": "MOS",
    "babble": "babble",
    "combined": "combined",
    "better_than_base": "beats base",
    "combined_vs_base": "Δ base",
    "minutes": "min",
    "peak_gib": "GiB",
    "listening": "A/B",
}
SORTABLE = [c for c in COLUMNS if c not in ("verdict", "run_dir")]


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return float(f"{value:.4g}")
    return value


def runs_table(ctx: UIContext, sort_by: str) -> pd.DataFrame:
    """The runs, best first by `sort_by`, as the page shows them."""
    frame = compare_runs(ctx.output_dir, sort_by or "combined")
    if frame.empty:
        return pd.DataFrame(columns=list(SHOWN_COLUMNS.values()))
    frame = frame.astype(object)
    frame["trial"] = [
        f"{study} #{number} {state}".strip() if study else ""
        for study, number, state in zip(frame["sweep"], frame["trial"], frame["trial_state"], strict=True)
    ]
    frame["learning_rate"] = [f"{v:.2g}" if isinstance(v, float) else "" for v in frame["learning_rate"]]
    shown_frame = frame[list(SHOWN_COLUMNS)].map(_cell)
    # A measure no run has (similarity where the voices speak noise, listening before any choice) is left out.
    empty = [c for c in shown_frame.columns if c != "run" and (shown_frame[c] == "").all()]
    return shown_cells(shown_frame.drop(columns=empty).rename(columns=SHOWN_COLUMNS))


def table_if_changed(ctx: UIContext, sort_by: str, seen: str) -> tuple[Any, str]:
    """The table again when the runs or their statuses changed since `seen` (a run started, ended, was added),
    else no update: the page's pulse changes at every step."""
    signature = repr(ctx.run_choices())
    if signature == seen:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), seen
    return runs_table(ctx, sort_by), *picker_choices(ctx), signature


def picker_choices(ctx: UIContext) -> tuple[Any, Any, Any]:
    """The runs for "use these settings", and the finished voices for blind listening."""
    ready = ctx.run_choices(ready_only=True)
    return (
        gr.update(choices=ctx.run_choices()),
        gr.update(choices=ready),
        gr.update(choices=[("the base model", BASE), *ready]),
    )


def use_settings(ctx: UIContext, run: str) -> list[Any]:
    """The Fine-tune form filled with a run's settings (a new run: never its resume), and a message."""
    if not run:
        raise page_error("Pick a run first.")
    try:
        run_dir = ctx.roots.run_folder(run)
    except ValueError as exc:
        raise page_error(exc) from exc
    if not (run_dir / RUN_FILE).is_file():
        raise page_error(f"{run} is not a run of this app.")
    arguments = read_run(run_dir).get("arguments") or {}
    known = {k: v for k, v in arguments.items() if k in TrainArguments.__dataclass_fields__}
    known.update(resume_from="", quality_baseline_from="", devices="")
    values = form.form_values(known)
    message = f"The Fine-tune form now holds the settings of {shown(run_dir.name)}: Start trains a new run with them."
    return [values[cid] for cid in form.form_ids()] + [message]


def create_runs_tab(ctx: UIContext) -> dict[str, Any]:
    with gr.Tab("5. Runs", id="runs"):
        gr.Markdown(
            "Every run of this output folder: its settings, the scores of the checkpoint its voice holds, whether it "
            "beat the base model (step 0), time, memory, its sweep trial and what blind listening said. Click a "
            "column's header to sort by it, or pick the order below."
        )
        with gr.Row():
            sort_by = gr.Dropdown(SORTABLE, value="combined", label="Best first by", scale=1)
            refresh = gr.Button("↻ Runs", scale=0)
        table = gr.Dataframe(
            runs_table(ctx, "combined"), interactive=False, wrap=False, elem_id="runs-table", label="Runs"
        )
        with gr.Row():
            run = gr.Dropdown(ctx.run_choices(), label="Run", allow_custom_value=True, scale=3, elem_id="runs-pick")
            use = gr.Button("Use these settings", scale=1)
        used = gr.Markdown(elem_id="runs-used")
        sweep_ui = sweep_view.create_sweep(ctx)
        listening_ui = listening_view.create_listening(ctx)
        seen = gr.State("")  # the runs (and statuses) the table and the pickers show
    show = functools.partial(runs_table, ctx)
    refresh.click(show, sort_by, table, api_name="compare_runs")
    sort_by.change(show, sort_by, table, api_visibility="undocumented")
    form_components = [ctx[f"form.{cid}"] for cid in form.form_ids()]
    use.click(functools.partial(use_settings, ctx), run, [*form_components, used], api_visibility="undocumented")
    ui = {"table": table, "sort_by": sort_by, "run": run, "seen": seen, **sweep_ui, **listening_ui}
    refreshed = [table, run, ui["listening_first"], ui["listening_second"], seen]
    changed = functools.partial(table_if_changed, ctx)
    hidden = {"api_visibility": "undocumented", "show_progress": "hidden"}
    refresh.click(functools.partial(picker_choices, ctx), None, refreshed[1:4], **hidden)
    # A run started or ended (the page's pulse), a sweep's trial ended: the table and the pickers show it.
    ctx["train.pulse"].change(changed, [sort_by, seen], refreshed, **hidden)
    sweep_ui["sweep_ended"].change(changed, [sort_by, seen], refreshed, **hidden)
    for pick in listening_ui["listening_picks"]:  # a choice kept: the table's listening column shows it
        pick.click(show, sort_by, table, **hidden)
    ui["refreshed"] = refreshed
    return ctx.register("runs", ui)
