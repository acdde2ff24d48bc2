"""The studio's Blocks: one tab per module, sharing a UIContext (output folder, runner, components by id)."""

from __future__ import annotations

import functools
from pathlib import Path

import gradio as gr

from utils.device.gpu import detect_gpu
from utils.model.base_models import TINY, version_choices
from utils.text.languages import LANGUAGE_CHOICES
from utils.training.process.runner import TrainingRunner
from webui import form, sweep_view
from webui.context import UIContext
from webui.dataset_tab import create_dataset_tab
from webui.export_tab import create_export_tab
from webui.runs_tab import create_runs_tab, table_if_changed
from webui.test_tab import create_test_tab
from webui.train_tab import create_train_tab, form_on_load, register_status_api

CSS = """
#memory-panel { font-variant-numeric: tabular-nums; }
#runs-table th, #runs-table th * { white-space: nowrap; }
"""


def quiet_queue(demo: gr.Blocks) -> gr.Blocks:
    """Gradio's queue, once created, looks for work every 1 ms while free (and for progress every 10 ms): 4% of a
    core on an idle server, a page open or not. At 20 ms and 100 ms (Gradio's own values on Windows) an event
    starts at most 20 ms later."""
    queue = getattr(demo, "_queue", None)
    if queue is not None and hasattr(queue, "sleep_when_free"):
        queue.sleep_when_free = 0.02
        queue.progress_update_sleep_when_free = 0.1
    return demo


def run_lists(ctx: UIContext, seen: str, test_run: str | None = None, export_run: str | None = None) -> tuple:
    """New choices for the run pickers when the runs (or their statuses) changed since `seen`, else no update.
    An empty Test or Export picker gets the newest ready run (a run just finished is what a person tests next);
    a run someone picked or typed stays."""
    runs, ready = ctx.run_choices(), ctx.run_choices(ready_only=True)
    signature = repr(runs)
    if signature == seen:
        return gr.skip(), gr.skip(), gr.skip(), seen
    newest = ready[0][1] if ready else None
    return (
        gr.update(choices=[("(new run)", ""), *runs]),
        gr.update(choices=ready, value=test_run or newest),
        gr.update(choices=ready, value=export_run or newest),
        signature,
    )


def build_ui(
    output_dir: str | Path, runner: TrainingRunner | None = None, data_dirs: list[Path] | tuple[Path, ...] = ()
) -> tuple[gr.Blocks, UIContext]:
    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    for served in ("exports", "synthesized"):
        (output_dir / served).mkdir(exist_ok=True)
    ctx = UIContext(output_dir=output_dir, runner=runner or TrainingRunner(output_dir), data_dirs=tuple(data_dirs))
    with gr.Blocks(title="XTTS fine-tuning studio") as demo:
        gr.Markdown("# XTTS fine-tuning studio")
        # The form exists before the tabs: the Dataset tab fills its CSV fields, the Fine-tune tab shows it.
        ctx.register(
            "form",
            form.create_components(
                choices={
                    "version": version_choices(),
                    "language": list(LANGUAGE_CHOICES),
                    "resume_from": [("(new run)", ""), *ctx.run_choices()],
                },
                values={} if detect_gpu().available else {"version": TINY},
            ),
        )
        ctx.register("dataset", {"usable_train_rows": gr.State(None)})
        with gr.Tabs():
            create_dataset_tab(ctx)
            create_train_tab(ctx)
            create_test_tab(ctx)
            create_export_tab(ctx)
            create_runs_tab(ctx)
        register_status_api(ctx)
        # A reload shows the runs as they are now, and follows a sweep still running.
        demo.load(
            functools.partial(table_if_changed, ctx),
            [ctx["runs.sort_by"], ctx["runs.seen"]],
            ctx["runs.refreshed"],
            api_visibility="undocumented",
        )
        demo.load(
            functools.partial(sweep_view.follow, ctx),
            None,
            [ctx["runs.sweep_status"], ctx["runs.sweep_timer"], ctx["runs.sweep_ended"]],
            api_visibility="undocumented",
        )
        # Opening or reloading the page shows the active run's settings in the form and lists the runs; the
        # timer's first tick re-attaches the live view to a running (or the last) run.
        form_components = [ctx[f"form.{cid}"] for cid in form.form_ids()]
        demo.load(
            lambda: form_on_load(ctx), None, [*form_components, ctx["train.batch_info"]], api_visibility="undocumented"
        )
        # Run lists follow the runs by themselves: refreshed on load and whenever a run starts or ends.
        pickers = [ctx["test.run"], ctx["export.run"]]
        lists = [ctx["form.resume_from"], *pickers]
        seen = gr.State("")
        # A picker's value set by these fires no change event: the Test tab's form is filled for it after them.
        demo.load(
            lambda *picked: run_lists(ctx, "", *picked), pickers, [*lists, seen], api_visibility="undocumented"
        ).then(*ctx["test.fill"], api_visibility="undocumented")
        ctx["train.pulse"].change(
            lambda last, *picked: run_lists(ctx, last, *picked),
            [seen, *pickers],
            [*lists, seen],
            api_visibility="undocumented",
            show_progress="hidden",
        ).then(*ctx["test.fill"], api_visibility="undocumented", show_progress="hidden")
    return demo, ctx
