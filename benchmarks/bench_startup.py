"""Time from the `train_gpt` call to its first training step, with the breakdown; and what the finished run
leaves on disk.

Runs `train_gpt(..., num_epochs=1)` on a model folder (by default XTTS v2 at full size with random weights,
built once under --model-dir) and a few synthetic ~11 s clips. The product is not changed: its own functions
are wrapped with timers (dataset validation, the model build and its weight loading, coqui's Trainer init,
fit, every train and eval step, checkpoint writes, the ready/ export), and a progress_callback notes when the
first train record arrives. Times are seconds since the call.

    python benchmarks/bench_startup.py                     # full size (CPU: ~4 min, ~12 GB RAM, ~9 GB disk)
    python benchmarks/bench_startup.py --tiny --save-step 1 --epochs 2   # which checkpoints a run keeps
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common


class Timeline:
    """(label, start, end) of every timed call, in seconds since `start()`."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()
        self.events: list[tuple[str, float, float]] = []
        self.first_train_record: float | None = None
        self.machine = ""

    def start(self) -> None:
        self.origin = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def wrap(self, owner: Any, attribute: str, label: str) -> None:
        """Time every call of owner.attribute (a module function or a class's method) under `label`."""
        original = getattr(owner, attribute)
        timeline = self

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            begin = timeline.now()
            try:
                return original(*args, **kwargs)
            finally:
                timeline.events.append((label, begin, timeline.now()))

        setattr(owner, attribute, timed)

    def on_record(self, record: dict[str, Any]) -> None:
        if record.get("type") == "train" and self.first_train_record is None:
            self.first_train_record = self.now()
            self.machine = common.machine()  # torch threads while training (the run sets them)

    def first(self, label: str) -> tuple[float, float] | None:
        return next(((b, e) for name, b, e in self.events if name == label), None)


def instrument(timeline: Timeline) -> None:
    """Timers on the product's own functions (the names train_gpt's modules call them by)."""
    import utils.training.ending as ending
    import utils.training.loop.setup as setup
    import utils.training.run as run
    from utils.training.checkpointing.checkpoints import CheckpointWriter
    from utils.training.loop.gpt_model import FineTuneGPTTrainer
    from utils.training.loop.trainer import FineTuneTrainer

    for owner, attribute, label in (
        (run, "validate_dataset", "dataset validation"),
        (run, "ensure_base_model", "base model files checked"),
        (run, "build_training_setup", "training setup (samples, vocab, model, trainer)"),
        (setup, "build_model", "model build (networks, weights, optimizations)"),
        (FineTuneGPTTrainer, "load_checkpoint", "weights loaded (within the model build)"),
        (setup, "build_trainer", "coqui Trainer init (optimizer, loaders, logs)"),
        (run, "write_reference_wav", "reference clip chosen"),
        (FineTuneTrainer, "fit", "fit (all epochs, final checkpoint)"),
        (FineTuneTrainer, "train_step", "train step"),
        (FineTuneTrainer, "eval_step", "eval step"),
        (CheckpointWriter, "save", "full checkpoint written"),
        (CheckpointWriter, "save_best", "best model written"),
        (ending, "export_ready", "ready/ exported"),
    ):
        timeline.wrap(owner, attribute, label)


def timeline_table(timeline: Timeline, total: float) -> str:
    rows = []
    seen: dict[str, int] = {}
    for label, begin, end in sorted(timeline.events, key=lambda e: e[1]):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 2 and label in ("train step", "eval step"):
            continue  # the first two of each are enough to read
        name = label if label not in ("train step", "eval step") else f"{label} {seen[label]}"
        rows.append([name, f"{begin:.1f}", f"{end:.1f}", f"{end - begin:.1f}"])
    if timeline.first_train_record is not None:
        rows.append(["first train record (progress_callback)", "", f"{timeline.first_train_record:.1f}", ""])
    rows.append(["train_gpt returned", "", f"{total:.1f}", ""])
    return common.markdown_table(["phase", "start (s)", "end (s)", "duration (s)"], rows)


def disk_table(run_dir: Path, output: Path) -> str:
    """Every file of the run folder (and what the run put beside it) with its size."""
    rows, total = [], 0
    for path in sorted(p for p in output.rglob("*") if p.is_file()):
        size = path.stat().st_size
        total += size
        if size >= 1024**2 or path.suffix == ".pth":
            rows.append([str(path.relative_to(output)), f"{size / 1024**3:.3f}"])
    rows.append(["**all files under the output folder**", f"**{total / 1024**3:.3f}**"])
    return common.markdown_table(["file (MB-sized and .pth only)", "GiB"], rows)


def summary(timeline: Timeline) -> list[str]:
    first = timeline.first("train step")
    lines = []
    if first:
        lines.append(
            f"- **time from the call to the first training step: {first[0]:.1f} s** (the step itself took "
            f"{first[1] - first[0]:.1f} s; first train record at {timeline.first_train_record or 0:.1f} s)."
        )
    for label in (
        "dataset validation",
        "model build (networks, weights, optimizations)",
        "weights loaded (within the model build)",
        "coqui Trainer init (optimizer, loaders, logs)",
    ):
        span = timeline.first(label)
        if span:
            lines.append(f"- {label}: {span[1] - span[0]:.1f} s")
    fit, setup = (
        timeline.first("fit (all epochs, final checkpoint)"),
        timeline.first("training setup (samples, vocab, model, trainer)"),
    )
    if fit and first and setup:
        lines.append(
            f"- between the setup and fit: {fit[0] - setup[1]:.1f} s; from fit to the first step (data "
            f"loader, first batch): {first[0] - fit[0]:.1f} s"
        )
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="The tiny model instead of the full-size one.")
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help=f"Where the model and clips are built once (default {common.default_model_dir()}).",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="Where the run goes (default: a temporary folder, deleted afterwards).",
    )
    parser.add_argument("--train-rows", type=int, default=4)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--save-step", type=int, default=None, help="train_gpt's save_step (default: its own).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the tables here (markdown).")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="Drop the model files from the page cache first (a first run after boot reads them from the disk).",
    )
    return parser.parse_args(argv)


def report(opts: argparse.Namespace, timeline: Timeline, run: dict[str, Any]) -> str:
    """The markdown: what ran, on what, the timeline and the disk use."""
    page_cache = "dropped from the page cache first (read from the disk)" if opts.cold else "possibly in the page cache"
    return "\n".join(
        [
            f"Device: {timeline.machine or common.machine()}; "
            f"load average {run['load_before']} before, {common.load_average()} after  ",
            f"Model: {'tiny' if opts.tiny else 'XTTS v2 at full size, random weights'} ({run['model']}); "
            f"{opts.train_rows} train + 2 eval clips of 10.8-11.5 s; batch {opts.batch}, grad_acumm 1, "
            f"{opts.epochs} epoch(s), train_gpt's other defaults ({run['status']})  ",
            f"{', '.join(f'{k} {v}' for k, v in common.library_versions().items())}; {common.now()}  ",
            f"Command: `python {' '.join(sys.argv)}`",
            "",
            f"Importing utils.gpt_train took {run['import_s']:.1f} s (before the call, not counted). "
            f"Model files {page_cache}.",
            "",
            *summary(timeline),
            "",
            timeline_table(timeline, run["total_s"]),
            "",
            "Disk use of the finished run:",
            "",
            disk_table(run["run_dir"], run["output"]),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    imported = time.perf_counter()
    from utils.gpt_train import train_gpt  # first: what a notebook's import costs (torch, coqui, transformers)

    import_s = time.perf_counter() - imported
    models = (opts.model_dir or common.default_model_dir()).resolve()
    models.mkdir(parents=True, exist_ok=True)
    version = common.ensure_model(models, full_size=not opts.tiny)
    train_csv, eval_csv = common.write_dataset(models / f"startup-clips-{opts.train_rows}", opts.train_rows, 2)
    if opts.cold:
        common.evict_from_page_cache(models / version)
    timeline = Timeline()
    instrument(timeline)
    extra = {} if opts.save_step is None else {"save_step": opts.save_step}
    load_before = common.load_average()
    with tempfile.TemporaryDirectory() as scratch:
        output = (opts.output or Path(scratch) / "output").resolve()
        timeline.start()
        result = train_gpt(
            version=version,
            models_dir=str(models),
            language="en",
            num_epochs=opts.epochs,
            batch_size=opts.batch,
            grad_acumm=1,
            train_csv=str(train_csv),
            eval_csv=str(eval_csv),
            output_path=str(output),
            progress_callback=timeline.on_record,
            **extra,
        )
        run = {
            "total_s": timeline.now(),
            "load_before": load_before,
            "model": models / version,
            "status": result.status,
            "import_s": import_s,
            "run_dir": Path(result.run_dir),
            "output": output,
        }
        text = report(opts, timeline, run)
    print("\n" + text)
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
