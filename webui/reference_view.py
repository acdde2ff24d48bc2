"""The Test tab's reference clips: the upload of one clip or several (passed to synthesize as a list, each confined to
the app's folders), and "Choose the best reference", which measures candidates on the picked run's voice
(utils.training.evaluation.reference_on_demand) and shows their scores."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from utils.model.inference import find_ready_dir
from utils.model.ready import READY_DIR
from utils.model.references import reference_paths, voice_references
from utils.options.arguments import argument_defaults, option_of
from utils.training.evaluation.reference_choice import RANKING
from webui.context import GPU_QUEUE, UIContext
from webui.shown import page_error, shown, shown_cells

CHOICE_COLUMNS = ("#", "kind", "clips", "clip seconds", "score", "cer", "similarity", "naturalness", "babble", "chosen")


def reference_input() -> Any:
    """The reference upload: one clip or several (XTTS combines them); empty is the run's own clips."""
    return gr.File(
        label="Reference voice (from the run, or upload one clip or several)",
        file_count="multiple",
        file_types=["audio"],
        type="filepath",
        elem_id="test-reference",
    )


def confined_references(ctx: UIContext, reference: Any) -> list[str] | None:
    """The uploaded (or a script's) reference clips, each inside the app's folders (PathRefused names one that is
    not); None when none is given: the voice's own."""
    paths = reference_paths(reference)
    roots = (*ctx.roots.data_roots(), ctx.output_dir.resolve())
    return [str(ctx.roots.confine(path, roots, "reference audio")) for path in paths] or None


def reference_update(ready: Path) -> Any:
    """The reference upload emptied, its label saying which clips the voice speaks with when none is given."""
    own = [path for path in voice_references(ready) if path.is_file()]
    if not own:
        said = "no reference clip in this run"
    elif len(own) == 1:
        said = "the run's own reference clip"
    else:
        said = f"the run's own {len(own)} reference clips"
    return gr.update(value=None, label=f"Reference voice: {said} (upload one clip or several to use others)")


def choice_frame(record: dict[str, Any]) -> pd.DataFrame:
    """One row per candidate: its clips (file names), length, score and measures, the chosen one marked."""
    rows = []
    for index, candidate in enumerate(record.get("candidates") or []):
        scores = candidate.get("scores") or {}

        def rounded(value: Any, digits: int = 3) -> Any:
            return None if value is None else round(float(value), digits)

        rows.append(
            {
                "#": index,
                "kind": candidate.get("kind", ""),
                "clips": ", ".join(Path(str(clip)).name for clip in candidate.get("clips") or []),
                "clip seconds": candidate.get("clip_seconds"),
                "score": rounded(candidate.get("score"), 4),
                "cer": rounded(scores.get("cer")),
                "similarity": rounded(scores.get("similarity")),
                "naturalness": rounded(scores.get("naturalness"), 2),
                "babble": rounded(scores.get("babble_rate"), 2),
                "chosen": "★" if index == record.get("chosen") else "",
            }
        )
    return shown_cells(pd.DataFrame(rows, columns=list(CHOICE_COLUMNS)))


def choose_reference_handler(
    ctx: UIContext,
    run: str,
    ready_path: str,
    candidates: Any,
    sentences: Any,
    whisper_model: str,
    progress: Any = gr.Progress(),
) -> tuple[str, pd.DataFrame, Any]:
    """Choose the picked run's reference clips by measurement: (what was chosen and why, the candidates' scores, the
    reference upload's update). A bad value, a run still training or without its dataset: a page error saying so."""
    from utils.training.evaluation.reference_on_demand import choose_reference

    source = (ready_path or "").strip() or run
    if not source:
        raise gr.Error("Pick a finished run first.")
    if why := ctx.gpu_in_use_by_training():
        raise page_error(why)
    try:
        ready = find_ready_dir(ctx.roots.run_folder(source, "model"))
        if ready.name != READY_DIR:
            raise ValueError(f"{ready} is not the ready/ folder of a run: the run's dataset is needed to choose.")
        record = choose_reference(
            ready.parent,
            candidates=candidates,
            sentences=sentences,
            whisper_model=ctx.roots.whisper_model(whisper_model) if str(whisper_model or "").strip() else None,
            progress=lambda done, total, message: progress((done, total), desc=message),
        )
    except ValueError as exc:
        raise page_error(exc) from exc
    except Exception as exc:  # a model that fails to load or generate: say so on the page
        raise page_error(f"The choice failed: {type(exc).__name__}: {exc}") from exc
    summary = f"**{shown(record.get('source') or '')}**"
    if record.get("reason"):
        summary += f"  \n{shown(record['reason'])}"
    summary += f"  \nRanked by {shown(RANKING)}. The voice speaks with: {shown(', '.join(record.get('files') or []))}."
    return summary, choice_frame(record), reference_update(ready)


def create_reference_choice_section(
    ctx: UIContext, run: Any, ready_path: Any, whisper_model: Any, reference: Any
) -> dict[str, Any]:
    """The "Choose the best reference" accordion and its wiring (inside the Test tab's layout)."""
    ui: dict[str, Any] = {}
    count, sentences, defaults = option_of("reference_search"), option_of("quality_eval"), argument_defaults()
    with gr.Accordion("Choose the best reference: clips of the training data tried on this voice", open=False):
        with gr.Row():
            ui["reference_candidates"] = gr.Number(
                defaults["reference_search"],
                precision=0,
                minimum=1,
                maximum=count.maximum,
                label="Candidates (the voice's own clips first)",
            )
            ui["reference_sentences"] = gr.Number(
                defaults["quality_eval"],
                precision=0,
                minimum=1,
                maximum=sentences.maximum,
                label="Held-out sentences each speaks",
            )
            ui["choose_reference"] = gr.Button("Choose the best reference")
        ui["reference_choice"] = gr.Markdown(
            "Each candidate speaks the run's held-out sentences and probes, scored as an evaluation is; the best "
            "goes into the run's ready/ (uses the Whisper model named above).",
            elem_id="reference-choice",
        )
        ui["reference_scores"] = gr.Dataframe(
            headers=list(CHOICE_COLUMNS), label="Candidates", wrap=True, interactive=False, elem_id="reference-scores"
        )
    ui["choose_reference"].click(
        functools.partial(choose_reference_handler, ctx),
        [run, ready_path, ui["reference_candidates"], ui["reference_sentences"], whisper_model],
        [ui["reference_choice"], ui["reference_scores"], reference],
        api_name="choose_reference",
        concurrency_id=GPU_QUEUE,
        concurrency_limit=1,
    )
    return ui
