"""The GPU call's step table: every row in this one process, each appended to a JSON-lines file as it finishes.

    python benchmarks/gpu_rows.py CONFIG.json ROWS.jsonl      # started by benchmarks/gpu_table.py

The rows answer two questions. First the guide's own five rows at batch 8 (baseline, + checkpointing, + SDPA,
+ mixed precision, all three: each optimization alone, then together) beside the speed-up and peak it claims on
an RTX 4090; then what the product adds on top of its defaults: 8-bit AdamW, LoRA rank 16, length grouping
against random batches on mixed-length clips, and torch.compile last (its compile time is minutes of the window,
and a cut window should lose it first). Each row builds the product's training setup for its settings
(bench_row.build_setup: train_gpt's own path), times coqui's Trainer.train_step on real collated batches and
reads the CUDA allocator's peak; the setup is released before the next row, and the memory left allocated at a
row's start is recorded (a leak would inflate the next peak). The baseline's FLOPs per step (FlopCounterMode)
give the MFU of the rows that do its work.
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
from bench_row import EXTRA, ROWS, Row, build_setup, measure, skip_reason  # noqa: E402

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
_BY_NAME = {row.name: row for row in ROWS + EXTRA}
ORDER = [
    *GUIDE_CLAIMS,
    "+ TF32/cuDNN benchmark (train_gpt's default)",
    "+ 8-bit AdamW",
    "+ LoRA rank 16 (PEFT, c_attn/c_proj/c_fc)",
    "mixed lengths (1-11.5 s), random batches",
    "mixed lengths (1-11.5 s), + length grouping",
    "+ torch.compile (GPT blocks)",
]
DEFAULTS_ROW = "+ TF32/cuDNN benchmark (train_gpt's default)"
# Rows that do the baseline's work per step (the same clips, the whole GPT trained): MFU applies to them.
SAME_WORK = frozenset(ORDER[:7]) | {ORDER[-1]}


def table_rows() -> list[Row]:
    return [_BY_NAME[name] for name in ORDER]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("rows", type=Path, help="JSON lines: one record per row, appended as each finishes.")
    opts = parser.parse_args(argv)
    config = json.loads(opts.config.read_text(encoding="utf-8"))
    deadline = float(config["deadline"])  # time.time() after which no row starts
    for index, row in enumerate(table_rows()):
        if row.name in config.get("leave_out", []):
            record = {"name": row.name, "row": asdict(row), "skipped": "left out of this run (--leave-out)"}
        elif time.time() > deadline - (config["compile_budget_s"] if row.torch_compile else config["row_budget_s"]):
            record = {"name": row.name, "row": asdict(row), "skipped": "not run: the call's time budget is spent"}
        else:
            print(f"... row {index + 1}/{len(ORDER)}: {row.name}", flush=True)
            record = run_row(row, config, flops=index == 0)
            print(f"    {record.get('error') or record.get('skipped') or _said(record)}", flush=True)
        with open(opts.rows, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
    return 0


def _said(record: dict[str, Any]) -> str:
    peak = record.get("peak_gib")
    return f"{record['step_s']:.3f} s/step" + (f", peak {peak:.2f} GiB" if peak is not None else "")


if __name__ == "__main__":
    sys.exit(main())
