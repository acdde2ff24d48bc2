"""Regenerate the planner's shipped memory model (`utils.memory_plan.memory_model`, memory_model.json):

    python -m utils.memory_plan.regenerate              # every shipped option set: six full-size traces each
    python -m utils.memory_plan.regenerate --keep       # only the option sets (or inference parts) not in the file

The option sets are Fit my GPU's candidates, each with and without gradients held between micro-steps (grad_acumm
1 and 2), with SDPA and mixed precision (BF16; FP16 keeps the same tensors and shares the fit): train_gpt's
defaults are among them. Each costs six traces of the published XTTS v2 architecture (30-60 s each on a CPU).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from utils.memory_plan import memory_model as mm
from utils.memory_plan.fit_gpu import CANDIDATES
from utils.memory_plan.planner import _arguments, step_settings

PUBLISHED = "v2.0.2"  # every published version has this architecture in the planner (see architecture.py)


def shipped_keywords() -> list[dict[str, Any]]:
    """The estimate_gpt_memory keywords of every shipped option set."""
    return [
        {"version": PUBLISHED, "enable_sdpa": True, "precision": "bf16", **change, "grad_acumm": grad_acumm}
        for _, change in CANDIDATES
        for grad_acumm in (1, 2)
    ]


def regenerate(path: Path = mm.TABLE, keep: bool = False, progress: Any = print) -> dict[str, Any]:
    """Trace every shipped option set (with `keep`, only those missing from `path`) and write the table atomically."""
    import torch

    from utils.files import write_json_atomic
    from utils.memory_plan.run_phases import inference_parts

    started = time.perf_counter()
    old = json.loads(path.read_text(encoding="utf-8")) if keep and path.is_file() else {}
    old = old if old.get("format") == mm.FORMAT else {}
    kept = {json.dumps(item["key"], sort_keys=True): item for item in old.get("option_sets", [])}
    wanted = shipped_keywords()
    option_sets = []
    architectures: dict[str, Any] = {}
    for number, keywords in enumerate(wanted, 1):
        arguments, options, _ = _arguments((), {**keywords, "batch_size": 2})
        settings = step_settings(arguments, options)
        key = mm.option_key(settings)
        shape = json.dumps(key["model_args"], sort_keys=True)
        if shape not in architectures:
            architectures[shape] = {"model_args": key["model_args"], **inference_parts(settings.architecture)}
        if json.dumps(key, sort_keys=True) in kept:
            option_sets.append(kept[json.dumps(key, sort_keys=True)])
            continue
        progress(f"[{number}/{len(wanted)}] {keywords}")
        entry = mm.fit_option_set(settings, progress=lambda message: progress(f"    {message}"))
        option_sets.append({"keywords": keywords, "key": key, **entry})
        # Written after each option set: an interrupted regeneration keeps what it traced (--keep goes on).
        write_json_atomic(path, _table(option_sets, architectures, started, torch.__version__), indent=None)
    data = _table(option_sets, architectures, started, torch.__version__)
    write_json_atomic(path, data, indent=None)
    mm.reload()
    return data


def _table(option_sets: list, architectures: dict, started: float, torch_version: str) -> dict[str, Any]:
    return {
        "format": mm.FORMAT,
        "made_by": "python -m utils.memory_plan.regenerate",
        "torch": torch_version,
        "lengths_s": list(mm.LENGTHS_S),
        "range_s": list(mm.RANGE_S),
        "sizes": list(mm.SIZES),
        "categories": list(mm.t.CATEGORIES),
        "coefficients": "per category f0 f1 f2 g0 g1 g2: bytes = f0 + f1 s + f2 s^2 + batch (g0 + g1 s + g2 s^2)",
        "seconds": round(time.perf_counter() - started, 1),
        "architectures": list(architectures.values()),
        "option_sets": option_sets,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the planner's shipped memory model.")
    parser.add_argument("--output", type=Path, default=mm.TABLE)
    parser.add_argument("--keep", action="store_true", help="trace only the option sets missing from the file")
    args = parser.parse_args(argv)
    data = regenerate(args.output, keep=args.keep)
    print(f"{len(data['option_sets'])} option sets in {data['seconds']:.0f} s -> {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
