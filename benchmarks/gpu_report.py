"""The GPU record (benchmarks/gpu_table.py's gpu_record.json) as markdown: the tables docs/benchmarks.md takes."""

from __future__ import annotations

from typing import Any

from bench_common import markdown_table

GB = 1e9  # the guide states GB
GIB = 1024**3


def _fmt(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def journey_lines(journey: dict[str, Any]) -> list[str]:
    if not journey:
        return ["Not run."]
    if not journey.get("phase_seconds"):
        return [f"**Failed** after {journey.get('seconds')} s: {journey.get('error')}"]
    lines = [
        f"**{'Reached ready/' if journey.get('ok') else 'Did not finish'}** ({journey.get('status')}, "
        f"{journey.get('steps')} steps) in {journey.get('seconds')} s (run.json wall {journey.get('wall_s')} s). "
        f"{journey.get('message') or ''}",
        "",
    ]
    peaks, reserved = journey.get("phase_peak_gib") or {}, journey.get("phase_reserved_gib") or {}
    rows = [
        [name, f"{seconds:.1f}", _fmt(peaks.get(name), ".2f"), _fmt(reserved.get(name), ".2f")]
        for name, seconds in journey["phase_seconds"].items()
    ]
    header = ["phase (run.json timings)", "seconds", "CUDA peak allocated (GiB)", "reserved (GiB)"]
    lines += [markdown_table(header, rows), ""]
    background = journey.get("background_seconds") or {}
    if background:
        lines += [
            "Beside the loop (background): " + ", ".join(f"{k} {v:.1f} s" for k, v in background.items()),
            "",
        ]
    evaluations = journey.get("evaluations") or []
    if evaluations:
        rows = [
            [
                e.get("step"),
                _fmt(e.get("cer"), ".3f"),
                _fmt(e.get("similarity"), ".3f"),
                _fmt(e.get("duration_ratio"), ".2f"),
                _fmt(e.get("loop_seconds"), ".1f"),
                e.get("generation_batch") or "all",
                "; ".join(e.get("reasons") or []) or "",
            ]
            for e in evaluations
        ]
        header = ["scored evaluation at step", "CER", "similarity", "duration ratio", "in the loop (s)"]
        lines += [markdown_table([*header, "generation batch", "reasons"], rows)]
        afterwards = {e["scored_afterwards"] for e in evaluations if e.get("scored_afterwards")}
        if afterwards:
            lines += ["", f"Scored afterwards (scripts/gpu_record.py): {'; '.join(sorted(afterwards))}."]
    tar = journey.get("tar") or {}
    if tar:
        lines += [
            "",
            f"Spoken clips packed in {tar.get('file')} ({tar.get('members')} files, {tar.get('bytes')} bytes).",
        ]
    return lines


def memory_lines(memory: list[dict[str, Any]], plan: dict[str, Any], nvml_peak: float | None = None) -> list[str]:
    if not memory:
        return ["Not measured."]
    rows = [
        [
            m["phase"],
            _fmt(m.get("planned_allocated_gib"), ".2f"),
            _fmt(m.get("measured_gib"), ".2f"),
            _fmt(m.get("planner_error"), "+.1%"),
            _fmt(m.get("reserved_gib"), ".2f"),
        ]
        for m in memory
    ]
    header = ["phase", "planned allocated (GiB)", "measured allocated (GiB)", "planner error", "reserved (GiB)"]
    note = plan.get("error") or (
        f"planned in {plan.get('seconds')} s; "
        + ("per-phase figures: estimate.phase_peaks_gib" if plan.get("phase_peaks_gib") else "the step peak only")
        + f"; the plan without its {_fmt(plan.get('cuda_overhead_gib'), '.2f')} GiB of CUDA context and kernels,"
        " which the allocator does not count"
    )
    if nvml_peak is not None:
        note += f"; the whole GPU's used memory (NVML, context included) peaked at {nvml_peak:.2f} GiB"
    return [markdown_table(header, rows), "", note]


def out_of_memory_line(row: dict[str, Any]) -> str:
    """The out-of-memory row in words: the cap, what the recovery did, how the run ended."""
    if "skipped" in row:
        return row["skipped"]
    events = "; ".join(e.get("message", "") for e in row.get("events") or []) or "no out-of-memory error happened"
    planned = row.get("planned") or {}
    return (
        f"capped at {row.get('limit_gib')} GiB (planned: micro-batch 2 {planned.get('2')} GiB, batch "
        f"{row.get('batch')} {planned.get(str(row.get('batch')))} GiB): {events}. Run {row.get('status')} after "
        f"{row.get('steps')} steps at micro-batch {row.get('micro_batch_size')}, peak {row.get('peak_gib')} GiB "
        f"allocated, {row.get('reserved_gib')} reserved, in {row.get('row_s')} s"
        + (f"; error: {row['error']}" if row.get("error") else "")
    )


def rows_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["Not run."]
    header = [
        "configuration",
        "step (s, median)",
        "samples/s",
        "speed-up",
        "guide's speed-up",
        "peak (GB)",
        "guide's GB",
    ]
    header += ["MFU", "note"]
    table = []
    for row in rows:
        guide = row.get("guide") or {}
        claims = [_fmt(guide.get("speedup"), ".2f"), _fmt(guide.get("peak_gb"), ".1f")]
        if "step_s" not in row:
            note = row.get("skipped") or row.get("error") or ""
            if "limit_gib" in row:  # the out-of-memory row
                note = out_of_memory_line(row)
            table.append([row["name"], "", "", "", claims[0], "", claims[1], "", note])
            continue
        peak = row.get("gpu_peak_bytes") or row.get("cpu_allocator_peak_bytes")
        note = [f"compile {row['compile_s']:.0f} s" if row.get("compile_s") is not None else ""]
        note += [
            f"{row['allocated_at_start_gib']:.2f} GiB left from earlier rows"
            if row.get("allocated_at_start_gib", 0) > 0.05
            else ""
        ]
        table.append(
            [
                row["name"],
                f"{row.get('median_step_s') or row['step_s']:.3f}",
                f"{row['batch'] / (row.get('median_step_s') or row['step_s']):.2f}",
                _fmt(row.get("speedup"), ".2f"),
                claims[0],
                _fmt(peak and peak / GB, ".2f"),
                claims[1],
                _fmt(row.get("mfu"), ".1%"),
                "; ".join(filter(None, note)),
            ]
        )
    return [markdown_table(header, table)]


def markdown(record: dict[str, Any]) -> str:
    import gpu_env

    environment = record.get("environment") or {}
    install = environment.get("install") or {}
    smoke = record.get("smoke") or {}
    ended = record.get("sections_s") or {}
    lines = [
        f"Device: {record.get('device')}; torch {record.get('torch')}; {record.get('date')}  ",
        f"Command: `{record.get('command')}`; {record.get('wall_s')} s in all (budget {record.get('budget_s')} s)  ",
        "Sections ended at (s from the start): " + (", ".join(f"{k} {v}" for k, v in ended.items()) or "none") + "  ",
        f"Wheels: {install.get('wheels')} ({install.get('wheel_mib')} MiB, installed in {install.get('install_s')} s),"
        f" imports {install.get('imports')}  ",
        "Smoke step (tiny model, the product's path): "
        + (
            f"{'ok' if smoke.get('ok') else 'FAILED'}, {_fmt(smoke.get('step_s'), '.3f')} s, loss "
            f"{_fmt(smoke.get('loss'), '.3f')}" + (f": {smoke.get('error')}" if smoke.get("error") else "")
            if smoke
            else "not run"
        ),
        "",
        *([f"**STOPPED: {record['stopped']}**", ""] if record.get("stopped") else []),
        "**Environment**",
        "",
        *(gpu_env.summary(environment) if environment.get("versions") else ["Not run."]),
        "",
        f"**Journey**: train_gpt, {record.get('audio_minutes')} minutes of synthetic speech-like clips",
        "",
        *journey_lines(record.get("journey") or {}),
        "",
        "**Memory per phase: the planner beside CUDA's max_memory_allocated (like with like), reserved beside**",
        "",
        *memory_lines(
            record.get("memory") or [], record.get("plan") or {}, (record.get("journey") or {}).get("nvml_peak_gib")
        ),
        "",
        f"**Training step, batch {((record.get('rows') or [{}])[0]).get('batch')}** (peak: CUDA "
        "max_memory_allocated of the timed steps, in GB of 10^9 bytes as the guide states; the guide's figures "
        f"are its claims on an RTX 4090, not measured here; MFU against {record.get('mfu_peak', 'n/a')})",
        "",
        *rows_lines(record.get("rows") or []),
    ]
    if record.get("rows_cut"):
        lines += ["", record["rows_cut"]]
    return "\n".join(lines) + "\n"
