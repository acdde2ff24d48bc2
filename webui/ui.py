"""The studio's Blocks: one tab per module, sharing a UIContext (output folder, training runner)."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from utils.base_models import available_versions
from utils.training_optimizations import detect_gpu
from webui.context import UIContext
from webui.dataset_tab import LANGUAGE_CHOICES, create_dataset_tab
from webui.export_tab import create_export_tab
from webui.runner import TrainingRunner
from webui.test_tab import create_test_tab
from webui.train_tab import create_train_tab, register_status_api

CSS = """
#memory-panel { font-variant-numeric: tabular-nums; }
"""


def build_ui(output_dir: str | Path, runner: TrainingRunner | None = None) -> tuple[gr.Blocks, UIContext]:
    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    ctx = UIContext(output_dir=output_dir, runner=runner or TrainingRunner(output_dir))
    with gr.Blocks(title="XTTS fine-tuning studio") as demo:
        gr.Markdown("# XTTS fine-tuning studio")
        # The Dataset tab fills these; they are shown in the Fine-tune tab.
        ctx.train_csv = gr.Textbox(label="Train CSV", render=False, placeholder="filled by the Dataset tab")
        ctx.eval_csv = gr.Textbox(label="Eval CSV (optional)", render=False, placeholder="empty: 15% held out")
        ctx.language = gr.Dropdown(LANGUAGE_CHOICES, value="en", label="Language", allow_custom_value=True, render=False)
        gpu = detect_gpu()
        ctx.version = gr.Dropdown(available_versions(), value="v2.0.2" if gpu.available else "tiny", label="Base model",
                                  allow_custom_value=True, render=False,
                                  info="'tiny' trains on a CPU in a minute (it speaks noise)")  # fmt: skip
        ctx.use_g2p = gr.Checkbox(False, label="Amharic G2P", render=False,
                                  info="language amh: train (and speak) on IPA phonemes")  # fmt: skip
        ctx.usable_train_rows = gr.State(None)
        with gr.Tabs():
            create_dataset_tab(ctx)
            train = create_train_tab(ctx)
            test = create_test_tab(ctx)
            export = create_export_tab(ctx)
        register_status_api(ctx)
        # Opening or reloading the page re-attaches to a running (or the last) run and lists the runs.
        demo.load(train["refresh"], None, train["refresh_outputs"], api_visibility="undocumented")
        demo.load(
            lambda: (gr.update(choices=[("(new run)", ""), *ctx.run_choices()]),
                     gr.update(choices=ctx.run_choices(ready_only=True)),
                     gr.update(choices=ctx.run_choices(ready_only=True))),
            None, [train["resume_from"], test["run"], export["run"]], api_visibility="undocumented",
        )  # fmt: skip
    return demo, ctx
