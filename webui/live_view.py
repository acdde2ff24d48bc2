"""The Fine-tune tab's live view: status, progress bar, plots, memory, log, the run's code and the Start/Stop buttons,
refreshed by the page's timer.

A page left open must cost little. The timer's tick only computes a `pulse` (a short digest of what the page
shows, into a State: no component is touched); the refreshes run when the pulse changed, and each sends only
what changed since this page's last one; the timer slows down while no run is active. One event writes these
components, the refresh chained to the pulse, which Gradio never runs twice at once for a page: so what a
page's `seen` state remembers is what that page shows, and a reload starts a new `seen` that sends everything.
Every value of a refresh comes from one snapshot of the run: the buttons always match the status above them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from utils.device.memory import get_memory_stats
from webui import run_view
from webui.context import UIContext

ACTIVE_S = 1.5  # the timer's interval while a run is active
IDLE_S = 10.0  # ... and while none is: a run started elsewhere (a script, another page) shows within this
FIRST_S = 0.3  # the timer's first tick after the page loads: the page shows the run at once
# The components a refresh writes, in the order of the tick's outputs (then the timer and the `seen` state).
OUTPUTS = ("status", "bar", "loss_plot", "memory", "memory_plot", "log", "code", "start", "stop", "start_message")
_UNSENT = object()


def pulse(ctx: UIContext) -> str:
    """A digest of everything the live view, the scores and the run lists show, cheap to compute: it changes when
    there is something new to show (a step, a memory sample, a log line, a status, a run). This app's own memory,
    shown while no run is active, is read when something else changed: a machine's RAM moves all the time."""
    state = ctx.runner.poll()
    log = Path(state.log_path) if state.log_path else None
    parts = (
        state.status.value,
        state.message,
        state.run_dir,
        len(ctx.runner.metrics()),
        len(state.memory_history),
        log.stat().st_size if log is not None and log.is_file() else 0,
        len(state.traceback),
        hash(repr(ctx.run_choices())),
    )
    return "|".join(map(str, parts))


def view(ctx: UIContext) -> dict[str, Any]:
    """What the live components show now, from one snapshot of the run (plain values, keyed as OUTPUTS)."""
    state = ctx.runner.snapshot()
    records = ctx.runner.metrics()
    info = run_view.progress(records)
    training_memory = dict(state.memory) if state.active and state.memory else None
    return {
        "status": run_view.status_markdown(state, info, nan_steps=run_view.nan_loss_steps(records)),
        "bar": run_view.progress_html(info, state.status),
        "loss_plot": run_view.loss_plot(records),
        "memory": run_view.memory_markdown(training_memory, get_memory_stats()),
        "memory_plot": run_view.memory_plot(state.memory_history),
        "log": ctx.runner.log_tail(40) + (f"\n\n{state.traceback}" if state.traceback else ""),
        "code": run_view.code_snippet(state.arguments) if state.arguments else "",
        "start": not state.active,
        "stop": state.active and state.status.value != "stopping",
        "active": state.active,
        "timer": ACTIVE_S if state.active else IDLE_S,
    }


def refresh(ctx: UIContext, seen: dict[str, Any] | None) -> tuple[Any, ...]:
    """The tick's outputs: each of OUTPUTS updated only when it differs from what this page was last sent, the
    timer's interval when it changes, and the new `seen`."""
    now, seen = view(ctx), dict(seen or {})
    out = []
    for key in OUTPUTS:
        if key == "start_message":
            # Start's and Stop's own words ("Training started.") stay while the run is active and go when it ends.
            ended = not now["active"] and seen.get("active", True)
            out.append("" if ended else gr.skip())
            continue
        if seen.get(key, _UNSENT) == now[key]:
            out.append(gr.skip())
        elif key in ("start", "stop"):
            out.append(gr.update(interactive=now[key]))
        else:
            out.append(now[key])
    out.append(gr.update(value=now["timer"]) if seen.get("timer") != now["timer"] else gr.skip())
    return (*out, {key: value for key, value in now.items() if key != "start_message"})
