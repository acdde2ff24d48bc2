"""Whether the voice stops, how natural it sounds, and what fine-tuning changed, as the page shows them (pure
functions, no Gradio): the quality plot over steps, the babble line of the latest evaluation, the probe clips, the
verdict against the base model, and where the Test tab's sampling settings came from."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from utils.model.ready import INFERENCE_DEFAULTS, InferenceSettings, read_inference_settings
from utils.training.evaluation.retention import retention_changes
from utils.training.recording.records import QualityRecord, records_of
from utils.training.recording.run_record import load_run
from webui import line_plot
from webui.quality_view import read_eval_clip
from webui.run_view import PLOT_PALETTE, _frame
from webui.shown import shown

# The quality plot's series, each a number in [0, 1] per evaluation (naturalness, a MOS of 1-5, divided by 5).
QUALITY_SERIES = {
    "cer": "CER (capped at 1)",
    "similarity": "similarity",
    "naturalness": "naturalness (MOS ÷ 5)",
    "babble_rate": "babble rate",
}
# Fixed per score, so a score keeps its colour whichever of them an evaluation could measure.
QUALITY_PLOT_COLORS = {label: PLOT_PALETTE[i] for i, label in enumerate(QUALITY_SERIES.values())}
PROBE_PLAYERS = 4  # one per probe kind (utils.quality.probes.PROBE_KINDS)


def quality_plot_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """(step, score, series) of every scored evaluation, the baseline at step 0 included: CER, similarity,
    naturalness / 5 and the babble rate."""
    rows = []
    for record in records_of(records, QualityRecord):
        for key, label in QUALITY_SERIES.items():
            value = getattr(record, key)
            if value is None:
                continue
            value = min(value, 1.0) if key == "cer" else value / 5.0 if key == "naturalness" else value
            rows.append({"step": int(record.step), "score": round(float(value), 4), "series": label})
    return _frame(rows, {"step": "int64", "score": "float64", "series": "object"})


def quality_plot(records: Iterable[dict[str, Any]]) -> str:
    """The quality plot as SVG (webui.line_plot): each score over steps in its fixed colour, a lone evaluation as
    a dot."""
    frame = quality_plot_frame(records)
    series = [
        line_plot.Series(label, list(zip(rows["step"], rows["score"], strict=True)), QUALITY_PLOT_COLORS[label])
        for label, rows in ((label, frame[frame["series"] == label]) for label in QUALITY_PLOT_COLORS)
        if len(rows)
    ]
    axes = line_plot.Axes("step", "score (0-1)", x_whole=True, empty="No scored evaluation yet.")
    return line_plot.render(series, axes)


def _not_stopped(probes: list[dict[str, Any]]) -> tuple[int, int]:
    """(probes that did not stop, probes generated)."""
    spoken = [p for p in probes if p.get("stopped") is not None]
    return sum(not p["stopped"] for p in spoken), len(spoken)


def babble_line(record: QualityRecord) -> str:
    """'⚠ Step 6: 2 of 4 probes did not stop; babble rate 0.50 (sentences and probes).' or the all-clear."""
    step = "the base model (step 0)" if record.baseline else f"step {record.step}"
    not_stopped, spoken = _not_stopped(record.probes or [])
    rate = "" if record.babble_rate is None else f"; babble rate {record.babble_rate:.2f} (sentences and probes)"
    if not spoken:
        return f"Probes at {step}: none generated{rate}." if record.probes else ""
    if not_stopped or (record.babble_rate or 0) > 0:
        return f"⚠ **{step.capitalize()}: {not_stopped} of {spoken} probes did not stop**{rate}."
    return f"✓ {step.capitalize()}: all {spoken} probes stopped by themselves{rate}."


def naturalness_line(record: QualityRecord) -> str:
    if record.naturalness is None:
        return ""
    ceiling = "" if record.naturalness_real is None else f" (the speaker's real clips: {record.naturalness_real:.2f})"
    return f"Naturalness {record.naturalness:.2f} of 5{ceiling}."


def voice_markdown(run_dir: str | Path | None, records: list[dict[str, Any]]) -> str:
    """The latest evaluation's babble and naturalness lines, then the run's verdict against the base model."""
    scored = records_of(records, QualityRecord)
    lines = [line for line in (babble_line(scored[-1]), naturalness_line(scored[-1])) if line] if scored else []
    quality = [r for r in records if r.get("type") == QualityRecord.TYPE]
    baseline = next((r for r in quality if r.get("baseline")), None)
    retention = retention_changes(baseline, quality[-1]) if quality and quality[-1].get("retention") else []
    if retention:
        mark = "⚠" if any(r["worse"] for r in retention) else "✓"
        said = shown("; ".join(r["text"] for r in retention))
        lines.append(f"{mark} **Other languages** (step {quality[-1].get('step')}): {said}")
    verdict = load_run(run_dir).verdict if run_dir else None
    if verdict:
        mark = "✓" if verdict.get("better") else "⚠"
        lines.append(f"{mark} {shown(verdict.get('text', ''))}")
    return "  \n".join(lines)


def probe_clips(run_dir: str | Path, record: dict[str, Any], count: int = PROBE_PLAYERS) -> list[tuple[str, Any]]:
    """(label, (rate, samples)) of an evaluation's probe clips, each saying whether it stopped (only clips inside
    the run's evals/ folder are read; the page gets samples, never a path)."""
    scored = QualityRecord.from_json(record)
    clips = []
    for probe in (scored.probes or [])[:count]:
        audio = read_eval_clip(run_dir, probe.get("file")) if probe.get("file") else None
        if audio is None:
            continue
        stopped = {True: "stopped", False: "did not stop"}.get(probe.get("stopped"), "?")
        text = str(probe.get("text", ""))[:50]
        label = f"step {scored.step} · {probe.get('kind')} · {stopped} · {text}"
        clips.append((shown(label, "plain"), audio))
    return clips


def sampling_source(ready_dir: str | Path, settings: InferenceSettings | None = None) -> str:
    """Where a ready/ voice's sampling settings come from, for the Test tab: measured at the end of its run (and
    what they are), its config.json's own, or the base model's; then a ⚠ line for each value of its files that is
    not used (the file, the setting, the value and its range) or record that cannot be read. `settings`: the
    folder's read_inference_settings, when the caller has it."""
    settings = settings or read_inference_settings(ready_dir)
    record = settings.record
    values = ", ".join(f"{k} {v:g}" for k, v in settings.values.items())
    candidates = record.get("candidates")
    if record.get("searched") and candidates:
        tried = f"{len(candidates)} tried, each with its scores in ready/finetune.json"
        line = f"**Sampling settings** {values}: {shown(record.get('source', ''))} ({tried})."
    else:
        why = shown(record.get("reason") or "this run did not search for them")
        # "The base model's" only when every value is: a valid value set by hand in config.json is the voice's own.
        whose = "the base model's" if settings.values == INFERENCE_DEFAULTS else "ready/config.json's, not measured"
        line = f"**Sampling settings** {values}: {whose} ({why})."
    return "  \n".join([line, *(f"⚠ {shown(warning)}" for warning in settings.warnings)])
