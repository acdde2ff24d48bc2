"""Turning a run's state and metrics into what the Fine-tune tab shows (pure functions, no Gradio)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

import pandas as pd

from utils.options.arguments import TrainArguments, argument_defaults
from utils.training.recording.records import EvalRecord, MemoryRecord, TrainRecord, metric_from_json, records_of
from webui import line_plot
from webui.shown import shown

STATUS_COLORS = {
    "starting": "#d97706",
    "running": "#16a34a",
    "stopping": "#d97706",
    "finished": "#2563eb",
    "stopped": "#6b7280",
    "interrupted": "#6b7280",
    "failed": "#dc2626",
}


def _duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def progress(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Step, total, epoch, ETA and the latest losses from metrics records (as JSON, e.g. followed by the runner).
    Only the records it shows are parsed: a long run's page refreshes every second or two."""
    train = [r for r in records if r.get("type") == TrainRecord.TYPE]
    evals = [r for r in records if r.get("type") == EvalRecord.TYPE]
    parsed = (metric_from_json(r) for r in reversed(records))
    total = next((r.total_steps for r in parsed if getattr(r, "total_steps", None)), None)
    eval_loss = EvalRecord.from_json(evals[-1]).eval_loss if evals else None
    if not train:
        return {
            "step": 0,
            "total": total,
            "fraction": 0.0,
            "eta_s": None,
            "epoch": None,
            "loss": None,
            "eval_loss": eval_loss,
            "samples_per_sec": None,
            "clips_failed": 0,
        }
    last = TrainRecord.from_json(train[-1])
    recent = [r for r in records_of(train[-20:], TrainRecord) if r.step_time]
    per_step = sum(r.step_time + (r.loader_time or 0) for r in recent) / len(recent) if recent else None
    total = max(total or last.step, last.step)
    return {
        "step": last.step,
        "total": total,
        "fraction": last.step / total if total else 0.0,
        "eta_s": (total - last.step) * per_step if per_step is not None else None,
        "epoch": last.epoch,
        "loss": last.loss,
        "eval_loss": eval_loss,
        "samples_per_sec": last.samples_per_sec,
        "clips_failed": last.clips_failed or 0,
    }


MESSAGE_LINES = 6  # of a long failure (every unusable row): the rest is in the log below


def _message(text: str) -> str:
    lines = str(text or "").splitlines()
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[:MESSAGE_LINES], f"... ({len(lines) - MESSAGE_LINES} more lines in the log below)"]
    return shown("\n".join(lines), keep_newlines=True)


def status_markdown(state: Any, info: dict[str, Any], nan_steps: list[int] | None = None) -> str:
    """The status panel from the run state and `progress(records)`. The message names the one checkpoint
    that matters (the one to resume from, for a stopped run); an ETA is shown while the run goes on only;
    `nan_steps` (nan_loss_steps) are counted, as the loss plot marks them."""
    status = str(getattr(state.status, "value", state.status))
    color = STATUS_COLORS.get(status, "#6b7280")
    lines = [f'### <span style="color:{color}">{status.capitalize()}</span>', _message(state.message)]
    if info["step"]:
        total = info["total"] or "?"
        loss = "NaN/inf" if info["loss"] is None else f"{info['loss']:.4f}"
        eta = f" · ETA {_duration(info['eta_s'])}" if status in ("starting", "running") else ""
        lines.append(
            f"**Step {info['step']} / {total}** · epoch {info['epoch']}{eta} · "
            f"loss {loss}"
            + (f" · eval loss {info['eval_loss']:.4f}" if info["eval_loss"] is not None else "")
            + (f" · {info['samples_per_sec']:.2f} samples/s" if info["samples_per_sec"] else "")
        )
    if state.started_at:
        end = state.ended_at or time.time()
        lines.append(f"Elapsed {_duration(end - state.started_at)}")
    if state.run_dir:
        lines.append(f"Run folder: {shown(state.run_dir)}")
    if nan_steps:
        listed = ", ".join(map(str, nan_steps[:8])) + (", ..." if len(nan_steps) > 8 else "")
        lines.append(
            f"⚠ {len(nan_steps)} step(s) had a NaN/inf loss (step {listed}): not drawn, marked × on the loss plot."
        )
    if info.get("clips_failed"):
        lines.append(f"⚠ {info['clips_failed']} clip(s) could not be loaded and were skipped (the log names them).")
    return "\n\n".join(lines)


def progress_html(info: dict[str, Any], status: str) -> str:
    """A progress bar from `progress(records)`."""
    status = str(getattr(status, "value", status))
    percent = 100.0 if status == "finished" else 100.0 * info["fraction"]
    if info["total"]:
        label = f"{info['step']} / {info['total']} steps"
    elif status in ("starting", "running"):
        label = "waiting for the first step"
    else:
        label = "no steps" if status != "idle" else "no run yet"
    return (
        '<div class="train-progress" style="border:1px solid #8884;border-radius:6px;height:22px;position:relative">'
        f'<div style="width:{percent:.1f}%;height:100%;background:#3b82f6aa;border-radius:6px"></div>'
        f'<span style="position:absolute;left:8px;top:1px;font-size:13px">{percent:.0f}% · {label}</span></div>'
    )


def _frame(rows: list[dict[str, Any]], dtypes: dict[str, str]) -> pd.DataFrame:
    # Typed even when empty: the plot fixes its axis types from the first data it receives.
    return pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)


MAX_PLOT_POINTS = 1500  # per series: a long run's plot stays light to send every refresh


def _thin(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(records) <= MAX_PLOT_POINTS:
        return records
    stride = -(-len(records) // MAX_PLOT_POINTS)
    return records[::stride] + ([records[-1]] if (len(records) - 1) % stride else [])


def loss_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    records = list(records)
    train = records_of(_thin([r for r in records if r.get("type") == TrainRecord.TYPE]), TrainRecord)
    evals = records_of(records, EvalRecord)
    rows = [{"step": r.step, "loss": r.loss, "series": "train"} for r in train if r.loss is not None]
    rows += [{"step": r.step, "loss": r.eval_loss, "series": "eval"} for r in evals if r.eval_loss is not None]
    return _frame(rows, {"step": "int64", "loss": "float64", "series": "object"})


_MEMORY_SERIES = {
    "gpu_allocated_mb": "GPU allocated",
    "gpu_reserved_mb": "GPU reserved",
    "gpu_used_mb": "GPU used (all processes)",
    "process_rss_mb": "training process RAM",
    "ram_used_mb": "system RAM used",
}


# A multi-GPU run: each rank's series (the launching process itself holds no GPU memory).
_RANK_SERIES = {"gpu_allocated_mb": "GPU allocated", "gpu_reserved_mb": "GPU reserved", "process_rss_mb": "RAM"}


def _memory_points(sample: dict[str, Any]) -> list[tuple[str, float]]:
    """(series, MB) of one memory sample: the training process's, or each rank's in a multi-GPU run."""
    memory = MemoryRecord.from_json(sample)
    if not memory.ranks:
        values = {key: getattr(memory, key) for key in _MEMORY_SERIES}
        return [(label, values[key]) for key, label in _MEMORY_SERIES.items() if values[key] is not None]
    points = [
        (f"{_rank_label(r)} {label}", r[key])
        for r in memory.ranks
        for key, label in _RANK_SERIES.items()
        if r.get(key) is not None
    ]
    if memory.ram_used_mb is not None:
        points.append(("system RAM used", memory.ram_used_mb))
    return points


def memory_frame(history: Iterable[dict[str, Any]]) -> pd.DataFrame:
    history = _thin(list(history))
    dtypes = {"seconds": "float64", "MB": "float64", "series": "object"}
    if not history:
        return _frame([], dtypes)
    start = MemoryRecord.from_json(history[0]).time or 0.0
    rows = [
        {"seconds": round((MemoryRecord.from_json(sample).time or 0.0) - start, 1), "MB": megabytes, "series": label}
        for sample in history
        for label, megabytes in _memory_points(sample)
    ]
    return _frame(rows, dtypes)


# Distinct on a light and a dark background; a series keeps its colour while the set of series is the same.
PLOT_PALETTE = line_plot.PALETTE
NAN_LOSS = "NaN/inf loss (not plotted)"


def nan_loss_steps(records: Iterable[dict[str, Any]]) -> list[int]:
    """The steps whose training loss was not finite (recorded as None): marked on the plot, counted in the status."""
    return [r["step"] for r in records if r.get("type") == TrainRecord.TYPE and r.get("loss") is None and r.get("step")]


def _series(frame: pd.DataFrame, x: str, y: str, scale: float = 1.0) -> list[line_plot.Series]:
    colors = series_colors(frame)
    return [
        line_plot.Series(name, list(zip(rows[x], rows[y] * scale, strict=True)), colors[name])
        for name, rows in ((name, frame[frame["series"] == name]) for name in colors)
    ]


def loss_plot(records: Iterable[dict[str, Any]]) -> str:
    """The loss plot (train and eval, by step) as SVG; a step whose loss was NaN/inf is marked on the x axis."""
    records = list(records)
    gaps = nan_loss_steps(records)
    axes = line_plot.Axes("step", "loss", x_whole=True, gap_label=f"{NAN_LOSS}: {len(gaps)}", empty="No steps yet.")
    return line_plot.render(_series(loss_frame(records), "step", "loss"), axes, gaps=gaps)


def memory_plot(history: Iterable[dict[str, Any]]) -> str:
    """Memory over time as SVG, in GB (the panel's unit), over seconds or, past ten minutes, minutes."""
    frame = memory_frame(history)
    minutes = len(frame) and frame["seconds"].max() > 600
    if minutes:
        frame = frame.assign(seconds=frame["seconds"] / 60)
    axes = line_plot.Axes(
        "minutes" if minutes else "seconds", "memory (GB)", empty="No run yet: memory is sampled every second."
    )
    return line_plot.render(_series(frame, "seconds", "MB", 1 / 1024), axes)


def series_colors(frame: pd.DataFrame) -> dict[str, str]:
    """{series: colour} of a plot frame's series in order of appearance (the plot's color_map)."""
    names = dict.fromkeys(str(name) for name in frame["series"]) if "series" in frame else {}
    return {name: PLOT_PALETTE[index % len(PLOT_PALETTE)] for index, name in enumerate(names)}


def _rank_label(rank: dict[str, Any]) -> str:
    return f"rank {rank.get('rank')} ({rank.get('device', '?')})"


def _gb(value: Any) -> str:
    return "—" if value is None else f"{value / 1024:.2f} GB"


def ranks_memory_markdown(ranks: list[dict[str, Any]]) -> str:
    """One line per rank of a multi-GPU run: its GPU (allocated, reserved, peak at its last step, whole GPU) and RAM."""
    lines = []
    for rank in ranks:
        gpu = (
            f"GPU allocated {_gb(rank.get('gpu_allocated_mb'))} · reserved {_gb(rank.get('gpu_reserved_mb'))} · "
            f"peak {_gb(rank.get('gpu_peak_allocated_mb'))} · whole GPU used {_gb(rank.get('gpu_used_mb'))} of "
            f"{_gb(rank.get('gpu_total_mb'))} · "
            if rank.get("gpu_total_mb") is not None
            else ""
        )
        lines.append(f"**{_rank_label(rank)}** {gpu}RAM {_gb(rank.get('process_rss_mb'))}")
    return "  \n".join(lines)


def memory_markdown(training: dict[str, Any] | None, app: dict[str, Any]) -> str:
    """The live memory panel: the training process's view (a memory record) when a run is active, else this
    app's (get_memory_stats())."""

    def gb(value: Any) -> str:
        return "—" if value is None else f"{value / 1024:.2f} GB"

    this = MemoryRecord.from_json(app)
    child = MemoryRecord.from_json(training) if training else None
    source = child or this
    if child is not None and child.ranks:
        return (
            f"{ranks_memory_markdown(child.ranks)}  \n**RAM** used {gb(this.ram_used_mb)} of "
            f"{gb(this.ram_total_mb)} · swap {gb(this.swap_used_mb)}  \n**Processes** launcher: "
            f"{gb(child.process_rss_mb)} · web app: {gb(this.process_rss_mb)}"
        )
    who = "training process" if child else "this app (no run active)"
    gpu = (
        f"**GPU** allocated {gb(source.gpu_allocated_mb)} · reserved {gb(source.gpu_reserved_mb)} · "
        f"peak {gb(source.gpu_peak_allocated_mb)}  \n"
        f"**Whole GPU** used {gb(source.gpu_used_mb)} of {gb(source.gpu_total_mb)}"
        if source.gpu_total_mb is not None
        else "**GPU** none (CPU only)"
    )
    return (
        f"{gpu}  \n**RAM** used {gb(this.ram_used_mb)} of {gb(this.ram_total_mb)} · "
        f"swap {gb(this.swap_used_mb)}  \n"
        f"**Processes** {who}: {gb(source.process_rss_mb)} · web app: {gb(this.process_rss_mb)}"
    )


def code_snippet(arguments: dict[str, Any]) -> str:
    """The train_gpt(...) call that reproduces a run, listing what differs from the defaults."""
    defaults = argument_defaults()
    positional = TrainArguments.positional_names()
    lines = ["from utils.gpt_train import train_gpt", "", "result = train_gpt("]
    for name in positional:
        lines.append(f"    {name}={arguments.get(name, defaults[name])!r},")
    for name, value in arguments.items():
        if name in positional or name not in defaults:
            continue
        if isinstance(defaults[name], tuple):
            value = tuple(value)
        if value != defaults[name]:
            lines.append(f"    {name}={value!r},")
    lines.append(")")
    return "\n".join(lines)
