"""The Runs tab's blind A/B listening: two runs (or a run and its base model) speak one text with the same
reference and seed; A and B are played in an order drawn at random, the choice is recorded
(utils.sweep.listening), then revealed."""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

from utils.sweep.listening import BASE, agreement, blind_pair, record_choice
from webui.context import GPU_QUEUE, UIContext
from webui.shown import page_error, shown

DEFAULT_TEXT = "The quick brown fox jumps over the lazy dog, and then it rests in the shade."


def make_pair(ctx: UIContext, first: str, second: str, text: str, seed: float) -> tuple[Any, Any, str, str]:
    busy = ctx.gpu_in_use_by_training()
    if busy:
        raise page_error(busy)
    if not first or not second:
        raise page_error("Pick two voices: a run, and another run or the base model.")
    try:
        one = ctx.roots.run_folder(first)
        other = second if second == BASE else ctx.roots.run_folder(second)
        pair = blind_pair(ctx.output_dir, one, other, text, seed=int(seed or 1))
    except ValueError as exc:
        raise page_error(exc) from exc
    said = "Listen to A and B, then say which sounds better."
    return pair.clips[0], pair.clips[1], pair.pair_id, said


def choose(ctx: UIContext, pair_id: str, choice: str) -> tuple[str, str]:
    if not pair_id:
        raise page_error("Make a pair first.")
    try:
        record = record_choice(ctx.output_dir, pair_id, choice)
    except ValueError as exc:
        raise page_error(exc) from exc
    return shown(record["reveal"]), tally_text(ctx)


def tally_text(ctx: UIContext) -> str:
    agreed, decided = agreement(ctx.output_dir)
    if not decided:
        return "No choice with both voices scored yet."
    return f"Ears and combined scores agreed on {agreed} of {decided} choices where both voices were scored."


def create_listening(ctx: UIContext) -> dict[str, Any]:
    with gr.Accordion("Blind A/B listening", open=False, elem_id="listening-accordion"):
        gr.Markdown(
            "Two voices say the same text with the same reference clip and seed; you hear them as A and B in a "
            "random order and pick one before learning which was which. Choices are kept with the runs (the table's "
            "*listening* column: won-lost)."
        )
        with gr.Row():
            first = gr.Dropdown(
                ctx.run_choices(ready_only=True),
                label="Voice 1 (a run)",
                allow_custom_value=True,
                elem_id="listening-first",
            )
            second = gr.Dropdown(
                [("the base model", BASE), *ctx.run_choices(ready_only=True)],
                value=BASE,
                label="Voice 2",
                allow_custom_value=True,
            )
        with gr.Row():
            text = gr.Textbox(DEFAULT_TEXT, label="Text", scale=3, elem_id="listening-text")
            seed = gr.Number(1, label="Seed", precision=0, scale=1)
        make = gr.Button("Make a blind pair", elem_id="listening-make")
        said = gr.Markdown(elem_id="listening-said")
        with gr.Row():
            clip_a = gr.Audio(label="A", interactive=False, elem_id="listening-a")
            clip_b = gr.Audio(label="B", interactive=False, elem_id="listening-b")
        pair_id = gr.State("")
        with gr.Row():
            pick_a = gr.Button("A is better", elem_id="listening-pick-a")
            pick_same = gr.Button("The same", elem_id="listening-pick-same")
            pick_b = gr.Button("B is better", elem_id="listening-pick-b")
        reveal = gr.Markdown(elem_id="listening-reveal")
        tally = gr.Markdown(tally_text(ctx), elem_id="listening-tally")
    make.click(
        functools.partial(make_pair, ctx),
        [first, second, text, seed],
        [clip_a, clip_b, pair_id, said],
        api_name="blind_pair",
        concurrency_id=GPU_QUEUE,
    )
    for button, choice in ((pick_a, "A"), (pick_b, "B"), (pick_same, "same")):
        button.click(
            functools.partial(choose, ctx, choice=choice), pair_id, [reveal, tally], api_visibility="undocumented"
        )
    return {"listening_first": first, "listening_second": second, "listening_picks": [pick_a, pick_b, pick_same]}
