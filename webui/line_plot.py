"""A line plot as a self-contained SVG (pure functions, no Gradio): what the page's live plots are drawn with.

Gradio's LinePlot (Vega-Lite) fixes its colour domain when it builds its chart and rebuilds only when an
option changes: a plot that first got an empty frame (the page opened before the run) drew every later line
with `stroke: none`, a series that appeared later (the first evaluation) was never drawn, and each refresh
re-ran the chart. Here each refresh is the whole picture, drawn from the data alone: every series in its
colour, a lone point as a dot, integer ticks for whole-number axes, the unit in the axis title, and the
points that have no value (a NaN loss) marked and counted instead of dropped. The class names (`plot-area`,
`plot-legend`, `plot-series`, `plot-gap`) are what tests and people's tools can find.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

# Distinct on a light and a dark background; a series keeps its colour while the set of series is the same.
PALETTE = ("#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777")
GAP_COLOR = "#dc2626"
MAX_POINTS = 600  # per series: about one per horizontal pixel, whatever the length of the run

WIDTH, HEIGHT = 560, 314
LEFT, RIGHT, TOP, BOTTOM = 62, 14, 28, 62  # margins: tick labels left; tick labels, title and legend below


@dataclass(frozen=True)
class Series:
    """One line: (x, y) points in x order; a y of None or NaN is a gap, drawn as a mark on the x axis."""

    name: str
    points: Sequence[tuple[float, float | None]]
    color: str = ""


@dataclass(frozen=True)
class Axes:
    x_title: str
    y_title: str
    x_whole: bool = False  # the x values are counts (steps): ticks at whole numbers only
    gap_label: str = "no value"  # the legend's name of the marked gaps, e.g. "NaN/inf loss (not plotted)"
    empty: str = "No data yet."


def nice_step(span: float, target: int = 6, whole: bool = False) -> float:
    """A tick spacing of 1, 2, 2.5 or 5 × 10^k giving about `target` ticks over `span` (at least 1 if `whole`)."""
    if not math.isfinite(span) or span <= 0:
        return 1.0
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return max(1.0, round(step)) if whole else step


def ticks(low: float, high: float, whole: bool = False, target: int = 6) -> tuple[list[float], int]:
    """Tick values covering [low, high], and the decimals that print each of them exactly (no two alike)."""
    step = nice_step(high - low, target, whole)
    first = math.floor(low / step + 1e-9)
    values = [round((first + i) * step, 10) for i in range(int(math.ceil(high / step - 1e-9)) - first + 1)]
    decimals = next((d for d in range(8) if abs(round(step, d) - step) <= step * 1e-6), 8)
    return values, decimals


def _label(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _thin(points: Sequence[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    if len(points) <= MAX_POINTS:
        return list(points)
    stride = -(-len(points) // MAX_POINTS)
    return list(points[::stride]) + ([points[-1]] if (len(points) - 1) % stride else [])


def _range(values: list[float], whole: bool) -> tuple[float, float]:
    low, high = min(values), max(values)
    if high - low > max(abs(low), abs(high)) * 1e-6:
        return low, high
    if whole:  # one step: the steps around it
        return max(0.0, low - 1), high + 1
    pad = abs(low) * 0.05 or 1.0  # one value: a band around it
    return low - pad, high + pad


def render(series: Sequence[Series], axes: Axes, gaps: Sequence[float] = ()) -> str:
    """The plot as an inline SVG scaling to its container's width. `gaps`: x values without a y (as are a series'
    points whose y is None or NaN), marked on the x axis and counted in the legend."""
    series = [Series(s.name, _thin(s.points), s.color or PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]
    xs = [x for s in series for x, _ in s.points if _finite(x)]
    ys = [y for s in series for _, y in s.points if _finite(y)]
    gaps = sorted(
        {*(x for x in gaps if _finite(x)), *(x for s in series for x, y in s.points if not _finite(y) and _finite(x))}
    )
    xs += gaps
    legend_rows = 1 + (len(series) + (1 if gaps else 0) - 1) // 3 if series else 0
    height = HEIGHT + 18 * max(0, legend_rows - 1)
    parts = [
        f'<svg class="line-plot" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'role="img" aria-label="{html.escape(axes.y_title)} over {html.escape(axes.x_title)}" '
        'style="max-width:100%;height:auto;font:12px sans-serif;color:inherit" xmlns="http://www.w3.org/2000/svg">'
    ]
    area_w, area_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts.append(
        f'<rect class="plot-area" x="{LEFT}" y="{TOP}" width="{area_w}" height="{area_h}" '
        'fill="none" stroke="currentColor" stroke-opacity="0.25"/>'
    )
    if not xs or not (ys or gaps):
        parts.append(
            f'<text x="{LEFT + area_w / 2}" y="{TOP + area_h / 2}" text-anchor="middle" fill="currentColor" '
            f'fill-opacity="0.6">{html.escape(axes.empty)}</text></svg>'
        )
        return "".join(parts)
    x_low, x_high = _range(xs, axes.x_whole)
    y_low, y_high = _range(ys or [0.0], False)
    x_ticks, x_decimals = ticks(x_low, x_high, axes.x_whole)
    y_ticks, y_decimals = ticks(y_low, y_high)
    x_low, x_high = min(x_low, x_ticks[0]), max(x_high, x_ticks[-1])
    y_low, y_high = min(y_low, y_ticks[0]), max(y_high, y_ticks[-1])

    def px(x: float) -> float:
        return round(LEFT + (x - x_low) / ((x_high - x_low) or 1) * area_w, 1)

    def py(y: float) -> float:
        return round(TOP + area_h - (y - y_low) / ((y_high - y_low) or 1) * area_h, 1)

    parts += _grid(x_ticks, x_decimals, y_ticks, y_decimals, px, py, axes, area_w, area_h)
    for one in series:
        parts += _line(one, px, py)
    if gaps:
        parts += _gap_marks(gaps, px, axes.gap_label)
    parts += _legend(series, axes.gap_label if gaps else "")
    parts.append("</svg>")
    return "".join(parts)


def _grid(x_ticks, x_decimals, y_ticks, y_decimals, px, py, axes: Axes, area_w: float, area_h: float) -> list[str]:
    out = ['<g class="plot-grid" stroke="currentColor" stroke-opacity="0.12">']
    out += [f'<line x1="{px(x)}" y1="{TOP}" x2="{px(x)}" y2="{TOP + area_h}"/>' for x in x_ticks]
    out += [f'<line x1="{LEFT}" y1="{py(y)}" x2="{LEFT + area_w}" y2="{py(y)}"/>' for y in y_ticks]
    out.append('</g><g class="plot-ticks" fill="currentColor" fill-opacity="0.75">')
    out += [
        f'<text class="x-tick" x="{px(x)}" y="{TOP + area_h + 15}" text-anchor="middle">{_label(x, x_decimals)}</text>'
        for x in x_ticks
    ]
    out += [
        f'<text class="y-tick" x="{LEFT - 6}" y="{py(y) + 4}" text-anchor="end">{_label(y, y_decimals)}</text>'
        for y in y_ticks
    ]
    out.append(
        f'<text class="x-title" x="{LEFT + area_w / 2}" y="{TOP + area_h + 32}" text-anchor="middle">'
        f"{html.escape(axes.x_title)}</text>"
        f'<text class="y-title" transform="translate(13 {TOP + area_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{html.escape(axes.y_title)}</text></g>"
    )
    return out


def _line(one: Series, px, py) -> list[str]:
    """A polyline per run of finite points (a gap breaks it), and a dot on each point of a sparse series (a
    lone evaluation is a point, which a line alone would not show)."""
    name, color = html.escape(one.name), html.escape(one.color)
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in one.points:
        if _finite(x) and _finite(y):
            runs[-1].append((px(x), py(y)))
        elif runs[-1]:
            runs.append([])
    out = [f'<g class="plot-series" data-series="{name}" stroke="{color}" fill="{color}"><title>{name}</title>']
    for run in runs:
        if len(run) > 1:
            points = " ".join(f"{x},{y}" for x, y in run)
            out.append(f'<polyline points="{points}" fill="none" stroke-width="2" stroke-linejoin="round"/>')
    finite = [point for run in runs for point in run]
    if len(finite) <= 40 or any(len(run) == 1 for run in runs):
        dots = finite if len(finite) <= 40 else [run[0] for run in runs if len(run) == 1]
        out += [f'<circle cx="{x}" cy="{y}" r="3.5" stroke="none"/>' for x, y in dots]
    out.append("</g>")
    return out


def _gap_marks(gaps: list[float], px, label: str) -> list[str]:
    """A red cross on the x axis at each x without a value: seen, and counted in the legend."""
    y = TOP + 7
    out = [f'<g class="plot-gap" stroke="{GAP_COLOR}" stroke-width="2"><title>{html.escape(label)}</title>']
    out += [
        f'<path d="M{px(x) - 4},{y - 4}L{px(x) + 4},{y + 4}M{px(x) - 4},{y + 4}L{px(x) + 4},{y - 4}"/>' for x in gaps
    ]
    out.append("</g>")
    return out


def _legend(series: list[Series], gap_label: str) -> list[str]:
    """Three entries a row under the x axis title."""
    entries = [(s.name, s.color, "line") for s in series] + ([(gap_label, GAP_COLOR, "cross")] if gap_label else [])
    out = ['<g class="plot-legend" fill="currentColor">']
    column = (WIDTH - LEFT) / 3
    for index, (name, color, kind) in enumerate(entries):
        x, y = LEFT + (index % 3) * column, HEIGHT - 6 + 18 * (index // 3)
        mark = (
            f'<line x1="{x}" y1="{y - 4}" x2="{x + 18}" y2="{y - 4}" stroke="{color}" stroke-width="3"/>'
            if kind == "line"
            else f'<path d="M{x + 5},{y - 8}L{x + 13},{y}M{x + 5},{y}L{x + 13},{y - 8}" stroke="{color}" '
            'stroke-width="2"/>'
        )
        out.append(f'{mark}<text x="{x + 24}" y="{y}">{html.escape(name)}</text>')
    out.append("</g>")
    return out
