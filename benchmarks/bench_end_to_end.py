"""End to end: one whole `train_gpt` run, from the call to `ready/`, on a realistic small dataset, and where its
wall time goes: startup, data, training steps, eval loss, scored evaluation, saves, export.

The split is the run's own record: run.json `timings` (utils.training.recording.phase_times: exclusive seconds per
phase of the training thread, plus the background scoring that overlaps them), cross-checked against
metrics.jsonl (each step's step_time and loader_time, each scored evaluation's seconds). Nothing of the
product is wrapped or patched here.

The dataset: `--clips` training clips (20) and `--eval-clips` held-out ones (3, the sentences a scored
evaluation speaks) of LJSpeech-like durations (1-10.1 s, mean about 6.9 s, a seeded beta distribution) with
read text of matching length (~15 characters a second), speech-like synthetic audio. The model: XTTS v2 at
full size with random weights (bench_common; built once), or the tiny test model with `--size tiny`.
Every train_gpt default is kept but the batch size (2 here: a full-size batch of 8 does not fit beside the
other work of this shared 24 GB machine; `--batch` to change) and what `--set NAME=VALUE` changes.

    python benchmarks/bench_end_to_end.py                      # full size, 10 epochs (CPU: ~30 min, ~12 GB RAM)
    python benchmarks/bench_end_to_end.py --size tiny --epochs 2   # the pipeline in ~2 min
    python benchmarks/bench_end_to_end.py --epochs 3 --set quality_eval_share=0.2 --out /tmp/e2e.md
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common

# Read text to cut sentences of a clip's length from (about 15 characters a second of speech).
TEXT = " ".join(common.SENTENCES)
CHARS_PER_SECOND = 15.0
# run.json `timings` phases, in the order of a run, with what the table calls them.
PHASES = (
    ("startup", "startup (validation, model build and weights, trainer init)"),
    ("data", "data (the loader's next batch, the loop between steps)"),
    ("train_steps", "**training steps** (forward, backward, optimizer)"),
    ("eval_loss", "eval loss (coqui's eval pass)"),
    ("scored_eval", "scored evaluation in the loop (generation)"),
    ("scoring_wait", "scored evaluation: waiting for background scoring"),
    ("saves", "saves (checkpoint and best model: copy, waits)"),
    ("export", "export (ready/)"),
    ("other", "other (epoch bookkeeping, records)"),
)


def text_of_length(seconds: float, start: int) -> str:
    """Words of TEXT from word `start` (wrapping), about `seconds` of reading."""
    words = TEXT.split()
    chosen: list[str] = []
    i = start
    while len(" ".join(chosen)) < seconds * CHARS_PER_SECOND:
        chosen.append(words[i % len(words)])
        i += 1
    return " ".join(chosen).rstrip(",.") + "."


def write_real_length_dataset(folder: Path, train: int, held_out: int) -> tuple[Path, Path]:
    """`train` + `held_out` clips of real lengths with text to match, in coqui's CSV layout (written once)."""
    import soundfile as sf

    train_csv, eval_csv = folder / "metadata_train.csv", folder / "metadata_eval.csv"
    if train_csv.is_file() and eval_csv.is_file():
        return train_csv, eval_csv
    (folder / "wavs").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, seconds in enumerate(common.ljspeech_like_durations(train + held_out, seed=20)):
        name = f"wavs/clip_{i:04d}.wav"
        sf.write(str(folder / name), common.speech_like(seconds, seed=i), common.SAMPLE_RATE)
        lines.append(f"{name}|{text_of_length(seconds, start=7 * i)}|speaker")
    header = "audio_file|text|speaker_name\n"
    eval_csv.write_text(header + "\n".join(lines[train:]) + "\n", encoding="utf-8")
    train_csv.write_text(header + "\n".join(lines[:train]) + "\n", encoding="utf-8")  # last: marks complete
    return train_csv, eval_csv


def parse_setting(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    try:
        return name.strip(), ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name.strip(), value


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=("full", "tiny"), default="full")
    parser.add_argument("--clips", type=int, default=20, help="Training clips (default 20).")
    parser.add_argument("--eval-clips", type=int, default=3, help="Held-out clips (default 3).")
    parser.add_argument("--batch", type=int, default=2, help="batch_size (default 2; train_gpt's own is 8).")
    parser.add_argument("--epochs", type=int, default=None, help="num_epochs (default: train_gpt's, 10).")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="Another train_gpt argument (repeatable)."
    )
    parser.add_argument("--model-dir", type=Path, default=None, help="Where the model and clips are built once.")
    parser.add_argument("--output", type=Path, default=None, help="Keep the run here (default: a temporary folder).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the report here (markdown).")
    return parser.parse_args(argv)


def split_table(timings: dict[str, Any], total_s: float) -> tuple[str, float]:
    """The phases of run.json `timings` as a table; returns it and the training steps' share of the wall."""
    phases = timings["phases"]
    wall = timings["wall_s"]
    rows = []
    for key, label in PHASES:
        entry = phases.get(key, {"seconds": 0.0, "count": 0})
        rows.append([label, f"{entry['seconds']:.1f}", f"{100 * entry['seconds'] / wall:.1f}%", entry["count"]])
    known = {key for key, _ in PHASES}
    for key, entry in phases.items():
        if key not in known:
            rows.append([key, f"{entry['seconds']:.1f}", f"{100 * entry['seconds'] / wall:.1f}%", entry["count"]])
    rows.append(["**wall time (run.json: call to ready/ recorded)**", f"**{wall:.1f}**", "100%", ""])
    rows.append(["train_gpt call to return (this benchmark's clock)", f"{total_s:.1f}", "", ""])
    for key, seconds in timings.get("background", {}).items():
        rows.append([f"background, overlapping the above: {key} (decode, Whisper, speaker)", f"{seconds:.1f}", "", ""])
    share = phases.get("train_steps", {}).get("seconds", 0.0) / wall
    return common.markdown_table(["phase", "seconds", "share of wall", "count"], rows), share


def metrics_summary(records: list[dict[str, Any]]) -> list[str]:
    """The cross-check from metrics.jsonl: steps, their times, each scored evaluation."""
    train = [r for r in records if r.get("type") == "train"]
    quality = [r for r in records if r.get("type") == "quality"]
    evals = [r for r in records if r.get("type") == "eval"]
    lines = []
    if train:
        steps = [r["step_time"] for r in train if r.get("step_time") is not None]
        loader = [r["loader_time"] for r in train if r.get("loader_time") is not None]
        lines.append(
            f"- metrics.jsonl: {len(train)} train steps, step_time sum {sum(steps):.1f} s (median "
            f"{statistics.median(steps):.2f} s, first {steps[0]:.2f} s), loader_time sum {sum(loader):.1f} s "
            "(between steps, so it also holds an epoch end's eval and scored evaluation); "
            f"{len(evals)} eval records"
        )
    for q in quality:
        lines.append(
            f"- scored evaluation at step {q['step']}: {q.get('loop_seconds', '?')} s in the training loop "
            f"(generation), {q.get('seconds')} s in all; CER {q.get('cer')}, similarity {q.get('similarity')}, "
            f"duration ratio {q.get('duration_ratio')}; reasons: {'; '.join(q.get('reasons') or []) or 'none'}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    imported = time.perf_counter()
    from utils.files import read_jsonl
    from utils.gpt_train import train_gpt

    import_s = time.perf_counter() - imported
    models = (opts.model_dir or common.default_model_dir()).resolve()
    models.mkdir(parents=True, exist_ok=True)
    version = common.ensure_model(models, full_size=opts.size == "full")
    train_csv, eval_csv = write_real_length_dataset(
        models / f"e2e-clips-{opts.clips}-{opts.eval_clips}", opts.clips, opts.eval_clips
    )
    settings = dict(parse_setting(s) for s in opts.set)
    if opts.epochs is not None:
        settings["num_epochs"] = opts.epochs
    load_before = common.load_average()
    with tempfile.TemporaryDirectory() as scratch:
        output = (opts.output or Path(scratch) / "output").resolve()
        started = time.perf_counter()
        result = train_gpt(
            version=version,
            models_dir=str(models),
            language="en",
            batch_size=opts.batch,
            train_csv=str(train_csv),
            eval_csv=str(eval_csv),
            output_path=str(output),
            **settings,
        )
        total_s = time.perf_counter() - started
        load_after = common.load_average()
        run_dir = Path(result.run_dir)
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        records = read_jsonl(run_dir / "metrics.jsonl")
    timings = record.get("timings")
    if not timings:
        print("run.json has no timings: this product does not record them.", file=sys.stderr)
        return 1
    table, share = split_table(timings, total_s)
    threads = (record.get("device") or {}).get("torch_threads")  # the run's; the caller's are restored after it
    arguments = record.get("arguments") or {}
    durations = common.ljspeech_like_durations(opts.clips + opts.eval_clips, seed=20)
    text = "\n".join(
        [
            f"Device: {common.machine(threads)}; load average {load_before} before, {load_after} after  ",
            f"Model: {'XTTS v2 at full size, random weights' if opts.size == 'full' else 'tiny'} ({version}); "
            f"{opts.clips} train + {opts.eval_clips} eval clips of {min(durations):.1f}-{max(durations):.1f} s "
            f"(mean {statistics.mean(durations):.1f} s); batch {arguments.get('batch_size')}, grad_acumm "
            f"{arguments.get('grad_acumm')}, {arguments.get('num_epochs')} epochs, quality_eval "
            f"{arguments.get('quality_eval')} (share {arguments.get('quality_eval_share')}, best_by "
            f"{arguments.get('best_by')}), whisper_model {arguments.get('whisper_model')}; other arguments "
            f"train_gpt's defaults; status {record.get('status')}  ",
            f"{', '.join(f'{k} {v}' for k, v in common.library_versions().items())}; {common.now()}  ",
            f"Command: `python {' '.join(sys.argv)}`",
            "",
            f"Importing utils.gpt_train took {import_s:.1f} s (before the call, not counted).",
            "",
            table,
            "",
            f"**Training steps: {100 * share:.1f}% of the wall time.**",
            "",
            *metrics_summary(records),
            "",
        ]
    )
    print("\n" + text)
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
