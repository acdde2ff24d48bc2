"""The GPU call's step table: every row in this one process, each appended to a JSON-lines file as it finishes.

    python benchmarks/gpu_rows.py CONFIG.json ROWS.jsonl      # started by benchmarks/gpu_table.py

The rows in the order users need them, so that a cut window loses the least: coqui's step as shipped (the
baseline), train_gpt's defaults, + 8-bit AdamW, + LoRA rank 16; then train_gpt itself squeezed into a few GiB
(the out-of-memory row: the run must go on at smaller micro-batches with the same effective batch); then the guide's
single optimizations beside the speed-up and peak it claims on an RTX 4090 (with "all three"); then mixed-length
clips (random batches, length grouping, and length grouping with cuDNN's benchmark mode, which the product leaves
off unless it wins here); torch.compile last (minutes of compiling). Each row builds the product's training setup
for its settings (bench_row.build_setup: train_gpt's own path; a fresh build per row, since each optimization
rewrites the model in place), times coqui's Trainer.train_step on real collated batches and reads the CUDA
allocator's peak; the setup is released before the next row, and the memory left allocated at a row's start is
recorded (a leak would inflate the next peak). The baseline's FLOPs per step (FlopCounterMode) give the MFU of
the rows that do its work.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import torch  # noqa: E402
from bench_row import DEFAULTS, EXTRA, ROWS, Row, build_setup, measure, skip_reason  # noqa: E402

GIB = 1024**3
# The guide's table (the optimization guide this product grew from; its figures, claimed on an RTX 4090, batch 8):
# speed-up over its baseline and peak GB. Not measured here: printed beside what is.
GUIDE_CLAIMS = {
    "baseline (coqui's step as shipped)": (1.0, 18.5),
    "+ checkpointing": (0.95, 13.2),
    "+ SDPA": (1.4, 11.8),
    "+ mixed precision": (1.8, 8.5),
    "all three": (2.1, 7.8),
}
OUT_OF_MEMORY_ROW = "out of memory: train_gpt at batch 8 in a few GiB"
COMPILE_ROW = "+ torch.compile (GPT blocks)"
_BY_NAME = {row.name: row for row in ROWS + EXTRA}
ORDER = [
    "baseline (coqui's step as shipped)",
    DEFAULTS,
    "+ 8-bit AdamW",
    "+ LoRA rank 16 (PEFT, c_attn/c_proj/c_fc)",
    OUT_OF_MEMORY_ROW,
    "+ checkpointing",
    "+ SDPA",
    "+ mixed precision",
    "all three",
    "mixed lengths (1-11.5 s), random batches",
    "mixed lengths (1-11.5 s), + length grouping",
    "mixed lengths, length grouping + cuDNN benchmark",
    COMPILE_ROW,
]
# Rows that do the baseline's work per step (the same clips, the whole GPT trained): MFU applies to them.
SAME_WORK = frozenset([ORDER[0], DEFAULTS, "+ 8-bit AdamW", *GUIDE_CLAIMS, COMPILE_ROW])


def table_rows(names: list[str] | None = None) -> list[Row | str]:
    """The rows to run, in ORDER (or the names given, e.g. the smoke step's one row); the out-of-memory row is
    named, not a Row: it is a whole train_gpt run."""
    return [name if name == OUT_OF_MEMORY_ROW else _BY_NAME[name] for name in (names or ORDER)]


def _options(config: dict[str, Any], row: Row, flops: bool) -> argparse.Namespace:
    return argparse.Namespace(
        version=config["version"],
        model_dir=Path(config["model_dir"]),
        train_csv=Path(config["train_csv"]),
        eval_csv=Path(config["eval_csv"]),
        mixed_train_csv=Path(config["mixed_train_csv"]),
        batch=config["batch"],
        batches=None,
        precision="auto",
        warmup=config["warmup"],
        steps=config["steps"],
        epoch2=False,
        flops=flops,
        device_type=config["device"],
    )


def run_row(row: Row, config: dict[str, Any], flops: bool) -> dict[str, Any]:
    """One row: build, measure, release; its record (an error is the row's, the table goes on)."""
    from utils.training.run import torch_settings_restored

    record: dict[str, Any] = {"name": row.name, "row": asdict(row), "batch": config["batch"]}
    reason = skip_reason(row, config["device"])
    if reason:
        return {**record, "skipped": reason}
    cuda = config["device"] == "cuda"
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        record["allocated_at_start_gib"] = round(torch.cuda.memory_allocated() / GIB, 3)
    opts = _options(config, row, flops)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as runs, torch_settings_restored():
        setup = None
        try:
            setup = build_setup(row, opts, Path(runs))
            record["setup_s"] = round(time.perf_counter() - started, 1)
            record.update(measure(row, opts, setup, config["batch"]))
        except torch.OutOfMemoryError as exc:
            record["error"] = f"out of memory at batch {config['batch']}: {str(exc).strip()[:200]}"
        except Exception as exc:  # noqa: BLE001 - one row's failure is that row's finding
            record["error"] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            record["traceback"] = traceback.format_exc()[-2000:]
        finally:
            if setup is not None:
                setup.release()
            del setup
    record["row_s"] = round(time.perf_counter() - started, 1)
    if "gpu_peak_bytes" in record:
        record["peak_gib"] = round(record["gpu_peak_bytes"] / GIB, 3)
    return record


def run_out_of_memory_row(config: dict[str, Any]) -> dict[str, Any]:
    """train_gpt at batch 8 on the ~11 s clips without gradient checkpointing, with this process's CUDA memory
    capped half way between the planned peaks of micro-batch 2 and of batch 8 (planned here, ~2 s): the product's
    recovery must split the batch into smaller micro-batches with the same effective batch, finish, and say so."""
    from gpu_journey import out_of_memory_cap

    from utils.files import read_json
    from utils.gpt_train import train_gpt
    from utils.training.run import torch_settings_restored

    record: dict[str, Any] = {"name": OUT_OF_MEMORY_ROW, "batch": config["batch"]}
    if config["device"] != "cuda":
        return {**record, "skipped": "skipped: no CUDA GPU here (a memory cap needs CUDA's allocator)"}
    try:  # the shipped memory model answers in about 2 s
        cap = out_of_memory_cap({**config, "clip_seconds": [config["oom_clip_seconds"]] * 2 * config["batch"]})
    except Exception as exc:  # noqa: BLE001 - the row says why it did not run
        return {**record, "skipped": f"not run: no memory cap planned ({type(exc).__name__}: {exc})"}
    limit = cap["oom_limit_gib"]
    total = torch.cuda.get_device_properties(0).total_memory
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    record.update(limit_gib=limit, planned=cap["oom_planned_gib"])
    started = time.perf_counter()
    torch.cuda.set_per_process_memory_fraction(limit * GIB / total)
    try:
        with tempfile.TemporaryDirectory() as runs, torch_settings_restored():
            try:
                result = train_gpt(
                    version=config["version"],
                    models_dir=config["model_dir"],
                    language="en",
                    train_csv=config["oom_train_csv"],
                    eval_csv=config["oom_eval_csv"],
                    output_path=runs,
                    num_epochs=1,
                    batch_size=config["batch"],
                    enable_grad_checkpoint=False,
                    quality_eval=0,
                    inference_search=0,
                    num_workers=0,
                )
                run = read_json(Path(result.run_dir) / "run.json", {})
            except Exception as exc:  # noqa: BLE001 - a run that could not recover is this row's finding
                record.update(error=f"{type(exc).__name__}: {str(exc).strip()[:400]}")
                found = sorted(Path(runs).glob("*/run.json"))
                run = read_json(found[-1], {}) if found else {}
            events = run.get("out_of_memory") or []
            record.update(
                status=run.get("status"),
                message=run.get("message"),
                steps=run.get("steps_done"),
                micro_batch_size=run.get("micro_batch_size"),
                events=[
                    {
                        k: e.get(k)
                        for k in ("step", "batch_before", "batch_after", "grad_acumm_after", "message")
                        if k in e
                    }
                    for e in events
                ][:6],
                effective_batch=(run.get("arguments") or {}).get("batch_size"),
                peak_gib=round(torch.cuda.max_memory_allocated() / GIB, 3),
                reserved_gib=round(torch.cuda.max_memory_reserved() / GIB, 3),
            )
            record["recovered"] = bool(events) and run.get("status") == "finished"
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        gc.collect()
        torch.cuda.empty_cache()
    record["row_s"] = round(time.perf_counter() - started, 1)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("rows", type=Path, help="JSON lines: one record per row, appended as each finishes.")
    opts = parser.parse_args(argv)
    config = json.loads(opts.config.read_text(encoding="utf-8"))
    deadline = float(config["deadline"])  # time.time() after which no row starts
    rows = table_rows(config.get("rows"))
    for index, row in enumerate(rows):
        name = row if isinstance(row, str) else row.name
        needs = config["compile_budget_s"] if name == COMPILE_ROW else config["row_budget_s"]
        if name == OUT_OF_MEMORY_ROW:
            needs = config.get("oom_budget_s", needs)
        described = {"name": name, **({"row": asdict(row)} if isinstance(row, Row) else {})}
        if name in config.get("leave_out", []):
            record = {**described, "skipped": "left out of this run (--leave-out)"}
        elif time.time() > deadline - needs:
            record = {**described, "skipped": "not run: the call's time budget is spent"}
        else:
            print(f"... row {index + 1}/{len(rows)}: {name}", flush=True)
            if name == OUT_OF_MEMORY_ROW:
                record = run_out_of_memory_row(config)
            else:
                record = run_row(row, config, flops=name == ORDER[0])
            print(f"    {record.get('error') or record.get('skipped') or _said(record)}", flush=True)
        with open(opts.rows, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
    return 0


def _said(record: dict[str, Any]) -> str:
    peak = record.get("peak_gib")
    if "step_s" not in record:  # the out-of-memory row
        return f"{record.get('status')}: micro-batch {record.get('micro_batch_size')}, peak {peak} GiB"
    return f"{record['step_s']:.3f} s/step" + (f", peak {peak:.2f} GiB" if peak is not None else "")


if __name__ == "__main__":
    sys.exit(main())
