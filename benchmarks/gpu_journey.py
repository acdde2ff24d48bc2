"""The GPU call's journey: the product's own `train_gpt`, start to ready/, with scored evaluation; and the memory
planner's plan for it (a child process on the CPU, while the GPU works).

    python benchmarks/gpu_journey.py run CONFIG.json RESULT.json     # started by benchmarks/gpu_table.py
    python benchmarks/gpu_journey.py plan CONFIG.json PLAN.json

The run is the guide's benchmark: ~10 minutes of synthetic speech-like clips (LJSpeech-like lengths, read text
of matching length), batch 8, every train_gpt default on (checkpointing, SDPA, mixed precision, TF32, the leaner
steps, length grouping), the XTTS v2 architecture at full size with weights built on the box; one epoch, every
evaluation scored, no inference search (the call's sizes: benchmarks/gpu_table.py). Its record: ok, the wall
time and run.json's phase times (with each phase's allocated and reserved CUDA peaks; run.json has them as of
each evaluation, so a journey cut by the window keeps them), the whole GPU's NVML peak, every scored evaluation,
and a tar of what it spoke (each evaluation's clips, the real clips of its sentences, the reference clip,
run.json and metrics.jsonl) for scoring elsewhere: Whisper does not travel to the box, so the CER is computed
afterwards on a CPU (scripts/gpu_record.py).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

GIB = 1024**3
TAR_LIMIT = 15 * 1024**2  # the device tool returns files of 16 MiB at most
# run.json phases -> the planner's phase names (estimate.phase_peaks_gib), in the order of a run.
PHASES = (
    ("train_steps", "training step"),
    ("eval_loss", "eval loss"),
    ("scored_eval", "scored evaluation"),
    ("saves", "checkpoint save"),
)


def journey_arguments(config: dict[str, Any], output: Path) -> dict[str, Any]:
    """train_gpt's keywords for the journey: its defaults but the epochs, the batch and the scoring share."""
    return {
        "version": config["version"],
        "models_dir": config["model_dir"],
        "language": "en",
        "train_csv": config["train_csv"],
        "eval_csv": config["eval_csv"],
        "output_path": str(output),
        "num_epochs": config["epochs"],
        "batch_size": config["batch"],
        **config.get("extra", {}),
    }


class GpuUsed:
    """The whole GPU's used memory (NVML: every process, the CUDA context included), its peak sampled every 0.2 s
    while the block runs; None without NVML."""

    def __init__(self) -> None:
        self.peak_gib: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="nvml-peak")

    def _sample(self) -> None:
        from utils.device.memory import get_memory_stats

        while True:
            used = get_memory_stats().get("gpu_used_mb")
            if used is None:
                return
            self.peak_gib = max(self.peak_gib or 0.0, round(used / 1024, 3))
            if self._done.wait(0.2):
                return

    def __enter__(self) -> GpuUsed:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def run(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """The journey's record (see the module docstring); the tar goes to `out`."""
    from utils.files import read_jsonl
    from utils.gpt_train import train_gpt

    output = Path(config["scratch"]) / "journey"
    started = time.perf_counter()
    record: dict[str, Any] = {"ok": False, "arguments": journey_arguments(config, output)}
    try:
        with GpuUsed() as used:
            result = train_gpt(**record["arguments"])
    except Exception as exc:  # noqa: BLE001 - the failure is the journey's finding
        record.update(error=f"{type(exc).__name__}: {str(exc).strip()[:500]}", traceback=traceback.format_exc()[-3000:])
        record["seconds"] = round(time.perf_counter() - started, 1)
        return record
    record["nvml_peak_gib"] = used.peak_gib
    record["seconds"] = round(time.perf_counter() - started, 1)
    run_dir = Path(result.run_dir)
    run_json = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    timings = run_json.get("timings") or {}
    evaluations = [_evaluation(r) for r in metrics if r.get("type") == "quality"]
    record.update(
        ok=run_json.get("status") == "finished" and (run_dir / "ready" / "model.pth").is_file(),
        status=run_json.get("status"),
        message=run_json.get("message"),
        steps=run_json.get("steps_done"),
        **phases(timings),
        step_seconds=[r.get("step_time") for r in metrics if r.get("type") == "train"],
        quality=evaluations[-1] if evaluations else {"reasons": ["no scored evaluation was recorded"]},
        evaluations=evaluations,
        out_of_memory=run_json.get("out_of_memory"),
        device=(run_json.get("device") or {}).get("summary"),
    )
    record["tar"] = pack(run_dir, run_json, out / "journey.tar")
    return record


def phases(timings: dict[str, Any]) -> dict[str, Any]:
    """run.json `timings` as the record keeps them: seconds, allocated and reserved CUDA peaks per phase."""
    found = timings.get("phases") or {}
    return {
        "phase_seconds": {k: v["seconds"] for k, v in found.items()},
        "phase_peak_gib": {k: v["peak_gib"] for k, v in found.items() if "peak_gib" in v},
        "phase_reserved_gib": {k: v["reserved_gib"] for k, v in found.items() if "reserved_gib" in v},
        "background_seconds": timings.get("background"),
        "wall_s": timings.get("wall_s"),
    }


def partial(scratch: Path, out: Path, why: str) -> dict[str, Any]:
    """A journey stopped before its end: the steps and evaluations its run folder recorded, and what it spoke."""
    from utils.files import read_jsonl

    runs = sorted((scratch / "journey").glob("*/run.json"))
    record: dict[str, Any] = {"ok": False, "error": why}
    if not runs:
        return record
    run_dir = runs[-1].parent
    run_json = json.loads(runs[-1].read_text(encoding="utf-8"))
    metrics = read_jsonl(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").is_file() else []
    evaluations = [_evaluation(r) for r in metrics if r.get("type") == "quality"]
    record.update(phases(run_json.get("timings") or {}))  # as of the last evaluation: the run keeps them there
    record.update(
        status=run_json.get("status"),
        steps=max([r["step"] for r in metrics if r.get("type") == "train"], default=0),
        step_seconds=[r.get("step_time") for r in metrics if r.get("type") == "train"],
        evaluations=evaluations,
        quality=evaluations[-1] if evaluations else {"reasons": ["no scored evaluation was recorded"]},
        tar=pack(run_dir, run_json, out / "journey.tar"),
    )
    return record


def _evaluation(quality: dict[str, Any]) -> dict[str, Any]:
    keep = ("step", "cer", "wer", "similarity", "duration_ratio", "babble_rate", "naturalness", "naturalness_real")
    keep += ("reasons", "seconds", "loop_seconds", "files")
    found = {k: quality.get(k) for k in keep}
    found["generation_batch"] = quality.get("generation_batch")
    found["texts"] = [c.get("text") for c in quality.get("clips") or []]
    return found


def pack(run_dir: Path, run_json: dict[str, Any], target: Path) -> dict[str, Any]:
    """What the journey spoke, for scoring elsewhere, in one tar under TAR_LIMIT (the latest evaluations first,
    so a cut keeps them): evals/step_N/<i>.wav (sentence i spoken at step N), real/<i>.wav (its real clip),
    sentences.json, reference.wav, run.json, metrics.jsonl."""
    setup = run_json.get("quality") or {}
    members: list[tuple[str, Path]] = [("run.json", run_dir / "run.json"), ("metrics.jsonl", run_dir / "metrics.jsonl")]
    members += [("reference.wav", run_dir / "reference.wav")]
    members += [(f"real/{i}.wav", Path(p)) for i, p in enumerate(setup.get("real_clips") or []) if p]
    steps = sorted((run_dir / "evals").glob("step_*"), key=lambda p: -int(p.name.split("_")[-1]))
    members += [(str(wav.relative_to(run_dir)), wav) for step in steps for wav in sorted(step.glob("*.wav"))]
    packed, left_out, size = [], [], 0
    with tarfile.open(target, "w") as archive:
        for name, path in members:
            if not path.is_file():
                continue
            if size + path.stat().st_size + 1024 > TAR_LIMIT:
                left_out.append(name)
                continue
            archive.add(str(path), arcname=name)
            packed.append(name)
            size += path.stat().st_size + 1024
        sentences = json.dumps({"sentences": setup.get("sentences"), "real_clips": setup.get("real_clips")}).encode()
        info = tarfile.TarInfo("sentences.json")
        info.size = len(sentences)
        archive.addfile(info, io.BytesIO(sentences))
    return {"file": target.name, "bytes": target.stat().st_size, "members": len(packed), "left_out": left_out}


def plan(config: dict[str, Any]) -> dict[str, Any]:
    """The memory planner's answer for the journey's arguments and clip lengths (on the device it trains on).
    Planned figures include the CUDA context and kernels
    (`cuda_overhead_gib`), which the allocator's peaks do not: the record compares allocated with allocated."""
    from utils.memory_plan.planner import estimate_gpt_memory

    started = time.perf_counter()
    keywords = {
        k: v for k, v in journey_arguments(config, Path("unused")).items() if k not in ("train_csv", "eval_csv")
    }
    keywords.pop("output_path")
    estimate = estimate_gpt_memory(**keywords, device=config["device"], clip_seconds=config["clip_seconds"])
    phases = getattr(estimate, "phase_peaks_gib", None)
    found = {
        "peak_gib": estimate.peak_gib,
        "peak_phase": estimate.peak_phase,
        "phase_peaks_gib": dict(phases) if phases else None,
        "cuda_overhead_gib": estimate.cuda_overhead_bytes / GIB,
        "breakdown_gib": estimate.breakdown_gib,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return found


def out_of_memory_cap(row: dict[str, Any]) -> dict[str, Any]:
    """A CUDA memory cap (GiB, the allocator's) for train_gpt at `row["batch"]` without checkpointing on the rows'
    clips that batch 8 cannot fit and micro-batch 2 can: half way from micro-batch 2's planned peak to batch 8's,
    allocated bytes (the planner's CUDA overhead is outside the allocator). Half way leaves room for the planner's
    error either way: the recovery likely stops at micro-batch 4, and 2 still fits if the planner is 20% low."""
    from utils.memory_plan.planner import estimate_gpt_memory

    keywords = dict(
        version=row["version"],
        models_dir=row["model_dir"],
        language="en",
        enable_grad_checkpoint=False,
        quality_eval=0,
        inference_search=0,
        device="cuda",
        clip_seconds=row["clip_seconds"],
    )
    planned = {}
    for batch in (2, row["batch"]):
        estimate = estimate_gpt_memory(**keywords, batch_size=batch)
        planned[batch] = (estimate.peak_gib * GIB - estimate.cuda_overhead_bytes) / GIB
    small, large = planned[2], planned[row["batch"]]
    if large < small * 1.3:
        raise ValueError(f"batch {row['batch']} ({large:.2f} GiB) is too close to batch 2 ({small:.2f} GiB) to cap")
    return {
        "oom_limit_gib": round((small + large) / 2, 2),
        "oom_planned_gib": {str(b): round(v, 3) for b, v in planned.items()},
    }


def memory_rows(journey: dict[str, Any], planned: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per phase, like with like: the plan without the CUDA context and kernels (the planner's overhead) beside
    the CUDA allocator's peak allocated bytes in that phase, and the allocator's reserved peak beside them. The
    planner's per-phase figures where it gives them, else its step peak for the training step alone."""
    measured = journey.get("phase_peak_gib") or {}
    reserved = journey.get("phase_reserved_gib") or {}
    overhead = (planned or {}).get("cuda_overhead_gib") or 0.0
    phases = (planned or {}).get("phase_peaks_gib") or {}
    rows = []
    for key, name in PHASES:
        plan_gib = phases.get(name) if phases else ((planned or {}).get("peak_gib") if key == "train_steps" else None)
        rows.append({"phase": name, "planned_gib": plan_gib, "measured_gib": measured.get(key)})
        rows[-1]["reserved_gib"] = reserved.get(key)
    rows += [{"phase": name, "planned_gib": gib, "measured_gib": None} for name, gib in phases.items()]
    rows = [r for i, r in enumerate(rows) if r["phase"] not in [q["phase"] for q in rows[:i]]]  # named once
    for row in rows:
        if row["planned_gib"] is not None:
            row["planned_allocated_gib"] = round(row["planned_gib"] - overhead, 3)
        if row.get("planned_allocated_gib") is not None and row["measured_gib"]:
            row["planner_error"] = round(row["planned_allocated_gib"] / row["measured_gib"] - 1, 4)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("run", "plan"))
    parser.add_argument("config", type=Path)
    parser.add_argument("result", type=Path)
    opts = parser.parse_args(argv)
    config = json.loads(opts.config.read_text(encoding="utf-8"))
    try:
        found = run(config, opts.result.parent) if opts.what == "run" else plan(config)
    except Exception as exc:  # noqa: BLE001 - said in the record, not lost with the process
        found = {
            "error": f"{type(exc).__name__}: {str(exc).strip()[:500]}",
            "traceback": traceback.format_exc()[-3000:],
        }
    opts.result.write_text(json.dumps(found, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
