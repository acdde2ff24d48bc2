"""The training benchmark's markdown: the speed table, the memory table with the planner beside each measured
peak, and what ran on which machine."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import bench_common as common
import torch

GIB = 1024**3


def summary(record: dict[str, Any]) -> str:
    if "error" in record:
        return record["error"]
    peak = record.get("gpu_peak_bytes") or record.get("cpu_allocator_peak_bytes") or 0
    return f"{record['step_s']:.3f} s/step, {record['samples_per_s']:.2f} samples/s, peak {peak / GIB:.2f} GiB"


def measured_peak(record: dict[str, Any]) -> int | None:
    return record.get("gpu_peak_bytes") or record.get("cpu_allocator_peak_bytes")


def fmt(value: Any, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + suffix


def speed_rows(records: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The speed table: the mean of the timed steps, and the fastest one (on a shared machine the other work
    stretches some steps; the fastest is the least disturbed)."""
    header = [
        "configuration",
        "precision",
        "attention",
        "checkpointed",
        "GELU",
        "optimizer",
        "step (s)",
        "fastest step (s)",
        "samples/s",
        "speed-up",
        "epoch 2+ step (s)",
        "load avg",
    ]
    base = next((r for r in records if "step_s" in r), None)
    rows = []
    for r in records:
        if "step_s" not in r:
            rows.append([r["name"], r.get("skipped") or r.get("error", "")] + [""] * (len(header) - 2))
            continue
        e = r["evidence"]
        ckpt = e["checkpointed_blocks"] + (" + cond." if e["conditioning_checkpointed"] else "")
        rows.append(
            [
                r["name"],
                e["precision"],
                e["attention"],
                ckpt,
                e["activation"],
                e["optimizer"],
                f"{r['step_s']:.2f}",
                f"{min(r['step_times']):.2f}",
                f"{r['samples_per_s']:.3f}",
                fmt(base and base["step_s"] / r["step_s"], ".2f", "x"),
                fmt(r.get("epoch2_step_s"), ".2f"),
                r["load"],
            ]
        )
    return header, rows


def memory_rows(records: list[dict[str, Any]], gpu: bool) -> tuple[list[str], list[list[str]]]:
    header = [
        "configuration",
        "measured peak (GiB)",
        "vs baseline",
        "planner, same shapes (GiB)",
        "planner error",
        "planner, worst case (GiB)",
        "reserved (GiB)" if gpu else "process peak RSS (GiB)",
        "note",
    ]
    base = next((measured_peak(r) for r in records if measured_peak(r)), None)
    rows = []
    for r in records:
        if "step_s" not in r:
            continue
        peak, p = measured_peak(r), r.get("planner", {})
        same, worst = p.get("same_shapes_bytes"), p.get("worst_case_bytes")
        rows.append(
            [
                r["name"],
                fmt(peak and peak / GIB, ".2f"),
                fmt(peak and base and peak / base, ".0%"),
                fmt(same and same / GIB, ".2f"),
                fmt(same and peak and same / peak - 1, "+.1%"),
                fmt(worst and worst / GIB, ".2f"),
                fmt((r.get("gpu_reserved_bytes") or r.get("peak_rss_bytes")) / GIB, ".2f"),
                p.get("note", ""),
            ]
        )
    return header, rows


def tables(records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    gpu = meta["device_type"] == "cuda"
    kind = "CUDA allocator, max_memory_allocated" if gpu else "CPU allocator, profiler memory events of one step"
    return "\n".join(
        [
            f"Device: {meta['device']}  ",
            f"Model: {meta['model']}; batch {meta['batch']}, grad_acumm 1; clips {meta['clips']}  ",
            f"{meta['versions']}; {meta['warmup']} warm-up + {meta['steps']} timed steps per row, each row in its own "
            f"process; {meta['date']}  ",
            f"Command: `{meta['command']}`",
            "",
            common.markdown_table(*speed_rows(records)),
            "",
            f"Peak memory, measured ({kind}) and the planner's:",
            "",
            common.markdown_table(*memory_rows(records, gpu)),
            "",
        ]
    )


def metadata(opts: argparse.Namespace, records: list[dict[str, Any]]) -> dict[str, Any]:
    shapes = next((r["shapes"] for r in records if "shapes" in r), {})
    seconds = shapes.get("audio_samples", 0) / common.SAMPLE_RATE
    clips = (
        f"10.8-11.5 s (longest padded {seconds:.2f} s), text up to {shapes.get('text_tokens')} tokens "
        f"(tiny BPE vocab), conditioning {shapes.get('conditioning_samples', 0) / common.SAMPLE_RATE:.1f} s"
    )
    if opts.device_type == "cuda":
        device = f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    else:
        device = next((r["machine"] for r in records if "machine" in r), common.machine())
    size = (
        "full size: 30 layers, width 1024, 16 heads, 6681 text tokens, random weights"
        if opts.full_size
        else "tiny (2 layers, width 64)"
    )
    versions = ", ".join(f"{k} {v}" for k, v in common.library_versions().items())
    return {
        "device": device,
        "device_type": opts.device_type,
        "model": f"XTTS v2 GPT {size}",
        "batch": opts.batch,
        "clips": clips,
        "versions": versions,
        "warmup": opts.warmup,
        "steps": opts.steps,
        "date": common.now(),
        "command": "python " + " ".join(sys.argv),
    }
