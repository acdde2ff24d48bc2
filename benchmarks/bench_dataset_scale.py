"""The dataset doctor at scale: clips/s of Check, a second Check, Prepare and a run's start, on 1, 2 and all cores.

    .venv/bin/python benchmarks/bench_dataset_scale.py --clips 5000 50000 --workers 1 2 0 --out /tmp/scale.md

Synthetic speech-like clips of 1-4 s (22.05 kHz, 16-bit; the dataset is written once under --data and reused)
go through what a user runs, each phase in its own process so that its CPU time and memory are its own:

- check: validate_dataset with a fresh check cache (the product's default depth: every clip decoded up to
  20,000 rows, headers only above);
- check again: the same call, unchanged dataset (served from the cache);
- prepare: prepare_dataset (its check served from that cache; the conversion: decode, resample, loudness evened,
  write) into a fresh folder;
- run start: what train_gpt does with the prepared dataset before it builds the model (check_inputs with the
  output folder's cache: the text checks with the model's vocab, the check; the content fingerprint, the clip
  durations), first with an empty output folder, then again (a resume); check_s is the check's own part;
- prepare denoised (not in the default phases): prepare_dataset(..., denoise=True) into another folder;
- first step: train_gpt with the tiny model on the prepared dataset, in that output folder, stopped after its
  first training step: the seconds from the call to that step, of the model build and of the dataset validation
  (bench_startup's timers). The goal: the first step within the model build + 10 s.

Each phase's modules are imported before its clock starts (a notebook or the page has them loaded already).

For each: wall seconds, CPU seconds (this process and its workers), clips per wall second and per CPU second,
the peak RSS of the phase's whole process tree (sampled every 50 ms) and of its largest process, and the load
average before and after (the machine may be shared). --workers 0 means every core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_startup's timers

RATE = 22050
MIB = 1024 * 1024
PHASES = ("check", "check again", "prepare", "run start", "run start again", "first step", "prepare denoised")


def _clip(seed: int) -> np.ndarray:
    """1-4 s of a voice-like signal: harmonics on a wandering pitch, a syllable envelope, a little noise."""
    rng = np.random.default_rng(seed)
    seconds = 1.0 + 3.0 * rng.random()
    t = np.arange(int(seconds * RATE)) / RATE
    f0 = 100 + 80 * rng.random() + 15 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 5))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t + rng.uniform(0, np.pi))
    gain = 10 ** (rng.uniform(-26, 0) / 20)  # recorded at levels 26 dB apart, as people do
    return (gain * 0.3 * voice * envelope + 0.003 * rng.standard_normal(t.size)).astype(np.float32)


def make_dataset(folder: Path, clips: int) -> Path:
    """folder/metadata.csv and folder/wavs/ with `clips` clips (kept: a complete folder is reused)."""
    import soundfile as sf

    csv = folder / "metadata.csv"
    if csv.is_file() and sum(1 for _ in csv.open()) == clips + 1:
        return csv
    (folder / "wavs").mkdir(parents=True, exist_ok=True)
    lines = ["audio_file|text|speaker_name"]
    for i in range(clips):
        name = f"wavs/clip_{i:06d}.wav"
        if not (folder / name).is_file():
            sf.write(str(folder / name), _clip(i), RATE, subtype="PCM_16")
        lines.append(f"{name}|the voice reads sentence number {i} of the corpus|speaker")
    csv.write_text("\n".join(lines) + "\n")
    return csv


def _tree_rss(process: psutil.Process) -> tuple[int, int]:
    """(RSS of the process and its children, RSS of the largest of them)."""
    sizes = []
    for p in [process, *process.children(recursive=True)]:
        try:
            sizes.append(p.memory_info().rss)
        except psutil.Error:
            pass
    return sum(sizes), max(sizes, default=0)


def _phase(name: str, csv: Path, work: Path, workers: int | None) -> dict:
    """One phase, in this (child) process; returns its counts."""
    from utils.data.prepare import prepare_dataset
    from utils.data.validation import validate_dataset

    cache = work / "cache"
    prepared = work / "prepared"
    if name in ("check", "check again"):
        report = validate_dataset(csv, cache_dir=cache, workers=workers)
        return {
            "clips": report.rows_read,
            "decoded": report.check.decoded,
            "mode": report.audio_check,
            "cache_hit": report.check.cache_hit,
            "workers": report.check.workers,
        }
    if name in ("prepare", "prepare denoised"):
        denoise = name == "prepare denoised"
        folder = work / "denoised" if denoise else prepared
        result = prepare_dataset(csv, folder, workers=workers or 0, cache_dir=cache, denoise=denoise)
        return {
            "clips": result.added_train + result.added_eval,
            "workers": result.work.workers,
            "rejected": len(result.rejected),
        }
    if name == "first step":
        return _first_step(prepared, work)
    from utils.options.arguments import TrainArguments
    from utils.training.run import TrainingRun

    args = TrainArguments(
        version="tiny",
        train_csv=str(prepared / "metadata_train.csv"),
        eval_csv=str(prepared / "metadata_eval.csv"),
        output_path=str(work / "output"),
        num_epochs=1,
    )
    _, report = TrainingRun(args).check_inputs()
    fingerprint = report.fingerprint()
    durations = [seconds for _, seconds in report.iter_usable("train")]
    return {
        "check_s": round(report.check.seconds, 2),
        "clips": report.rows_read,
        "decoded": report.check.decoded,
        "cache_hit": report.check.cache_hit,
        "fingerprint": fingerprint[:12],
        "train_clips": len(durations),
    }


def _first_step(prepared: Path, work: Path) -> dict:
    """train_gpt on the prepared dataset with the tiny model (an output folder that has seen the dataset: the page
    checked it or a run started on it), stopped after its first step: the seconds from the call to that step and
    those of the model build in between (bench_startup's timers)."""
    import bench_startup

    from utils.gpt_train import train_gpt

    timeline = bench_startup.Timeline()
    bench_startup.instrument(timeline)
    timeline.start()
    train_gpt(
        version="tiny",
        language="en",
        num_epochs=1,
        batch_size=4,
        grad_acumm=1,
        train_csv=str(prepared / "metadata_train.csv"),
        eval_csv=str(prepared / "metadata_eval.csv"),
        output_path=str(work / "output"),
        progress_callback=timeline.on_record,
        stop_event=lambda: timeline.first_train_record is not None,
        quality_eval=0,
    )
    step = timeline.first("train step")
    build = timeline.first("model build (networks, weights, optimizations)")
    validation = timeline.first("dataset validation")
    return {
        "clips": sum(1 for _ in (prepared / "metadata_train.csv").open()) - 1,
        "first_step_s": round(step[0], 1),
        "model_build_s": round(build[1] - build[0], 1),
        "validation_s": round(validation[1] - validation[0], 1),
    }


def child(args: argparse.Namespace) -> None:
    # Imports before the clock: a phase's cost is its work, not the interpreter's start (a notebook or the page
    # has these modules loaded already).
    import utils.data.prepare
    import utils.data.validation

    if args.child.startswith("run start") or args.child == "first step":
        import utils.gpt_train  # noqa: F401

    start_cpu = resource.getrusage(resource.RUSAGE_SELF)
    peak = {"tree": 0, "largest": 0}
    done = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.is_set():
            tree, largest = _tree_rss(me)
            peak["tree"], peak["largest"] = max(peak["tree"], tree), max(peak["largest"], largest)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    counts = _phase(args.child, Path(args.csv), Path(args.work), args.workers[0] or None)
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (own.ru_utime - start_cpu.ru_utime) + (own.ru_stime - start_cpu.ru_stime) + kids.ru_utime + kids.ru_stime
    print(
        json.dumps(
            {
                **counts,
                "wall": wall,
                "cpu": cpu,
                "peak_tree_mib": peak["tree"] / MIB,
                "peak_largest_mib": peak["largest"] / MIB,
            }
        )
    )


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def run_phase(phase: str, csv: Path, work: Path, workers: int) -> dict:
    before = load()
    out = subprocess.run(
        [sys.executable, __file__, "--child", phase, "--csv", str(csv), "--work", str(work), "--workers", str(workers)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{phase} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": f"{before} -> {load()}"}


def row(size: int, workers: int, phase: str, r: dict) -> str:
    cores = workers or os.cpu_count()
    per_wall = r["clips"] / r["wall"] if r["wall"] else float("inf")
    per_cpu = r["clips"] / r["cpu"] if r["cpu"] > 0.05 else float("nan")
    note = ", ".join(
        f"{k} {r[k]}"
        for k in (
            "mode",
            "decoded",
            "cache_hit",
            "workers",
            "rejected",
            "check_s",
            "first_step_s",
            "model_build_s",
            "validation_s",
        )
        if k in r and r[k] is not None
    )
    return (
        f"| {size:,} | {cores}{' (all)' if not workers else ''} | {phase} | {r['wall']:.1f} | {r['cpu']:.1f} | "
        f"{per_wall:,.0f} | {per_cpu:,.0f} | {r['peak_tree_mib']:.0f} | {r['peak_largest_mib']:.0f} | {note} | "
        f"{r['load']} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 0], help="0: every core")
    parser.add_argument("--phases", nargs="+", default=list(PHASES[:-1]), choices=PHASES)
    parser.add_argument("--data", default="/tmp/xtts-bench-dataset-scale", help="where the synthetic datasets stay")
    parser.add_argument("--out", help="append the table to this markdown file")
    parser.add_argument("--child", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--csv", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    header = (
        f"Device: CPU ({os.cpu_count()} cores), load average at the start {load()}; "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
        f"Command: `python benchmarks/bench_dataset_scale.py {' '.join(argv or sys.argv[1:])}`\n\n"
        "| clips | cores | phase | wall (s) | CPU (s) | clips/s | clips/CPU-s | peak RSS, tree (MiB) | "
        "peak RSS, largest (MiB) | notes | load before -> after |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    print(header, flush=True)
    lines = [header]
    for size in args.clips:
        started = time.monotonic()
        csv = make_dataset(Path(args.data) / f"clips-{size}", size)
        print(f"(dataset of {size} clips ready in {time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
        for workers in args.workers:
            work = Path(args.data) / f"work-{size}-{workers}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            for phase in args.phases:
                line = row(size, workers, phase, run_phase(phase, csv, work, workers))
                print(line, flush=True)
                lines.append(line)
            shutil.rmtree(work, ignore_errors=True)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
