"""Length-grouped batches against random ones: padding share and training samples/s on real-length clips.

The clips are LJSpeech-like durations (1-10.1 s, skewed long, mean about 6.9 s; drawn from a seeded beta
distribution, since no corpus is downloaded here). Per clip the GPT sees ~21.5 audio codes per second (22.05 kHz,
code stride 1024) and ~6.5 text tokens per second (about 15 read characters a second, BPE). A batch is padded to
its longest clip in both, which is the padding counted here: the share of the batch's GPT positions
(text + audio codes) that are padding, over one whole epoch of the product's batch sampler
(utils.training.inputs.batching.LengthGroupedBatchSampler) with grouping off and on.

samples/s: the product's training path, not a stand-in. train_gpt's setup (coqui's GPTTrainer with the DVAE and
the conditioning encoder, train_gpt's CPU defaults: checkpointing, SDPA, leaner steps; coqui's Trainer and AdamW)
on a model whose GPT has the asked size (random weights), speech-like clips of LJSpeech-like durations written
to disk with texts of matching length, collated by the run's own training loader (TrainingClipsDataset and
LengthGroupedBatchSampler, grouping off or on), and coqui's `Trainer.train_step` timed per batch (mels, cached
DVAE codes, forward, backward, clipping, AdamW step). Each round is one epoch of the same clips both ways, the
two epochs' steps interleaved (off, on, off, on ...; which goes first alternates), so both settings share the
machine's load alike; several rounds (a new epoch order each), then medians, the spread (min-max) and the
share of rounds in which grouping was faster. The conditioning encoder (6 s of conditioning per clip, padded
alike both ways) and the optimizer step are costs grouping does not touch, so the speed-up is smaller than the
padding cut. Samples per CPU-second of this process is shown beside the wall rate (other processes' load).
Before the rounds one untimed epoch caches every clip's DVAE codes (as from a run's second epoch on).

    python benchmarks/bench_length_grouping.py                    # batch 4 and 8, 40 clips, 4 rounds (~30 min here)
    python benchmarks/bench_length_grouping.py --padding-only           # 2000 clips, seconds
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
import torch

from utils.training.inputs.batching import LengthGroupedBatchSampler, padding_share

CODES_PER_SECOND = 22050 / 1024
TEXT_TOKENS_PER_SECOND = 6.5
CHARACTERS_PER_SECOND = 15  # read speech


def positions(seconds: float) -> tuple[int, int]:
    """(text tokens, audio codes) of a clip of this length."""
    return max(2, round(seconds * TEXT_TOKENS_PER_SECOND)), max(2, round(seconds * CODES_PER_SECOND))


def epoch(durations: list[float], batch: int, grouped: bool, seed: int) -> list[list[int]]:
    sampler = LengthGroupedBatchSampler(durations, batch, seed, group_by_length=grouped)
    sampler.set_epoch(0)
    return list(sampler)


def gpt_padding_share(batches: list[list[int]], durations: list[float]) -> float:
    sizes = [sum(positions(d)) for d in durations]
    padded = sum(
        (max(positions(durations[i])[0] for i in b) + max(positions(durations[i])[1] for i in b)) * len(b)
        for b in batches
    )
    return 1.0 - sum(sizes[i] for b in batches for i in b) / padded


def write_clips(folder: Path, durations: list[float], seed: int) -> Path:
    """Speech-like clips of these durations read with a text of matching length (~15 characters a second), in
    coqui's CSV layout; written once per folder. Returns the training CSV."""
    import soundfile as sf

    train_csv = folder / "metadata_train.csv"
    if train_csv.is_file():
        return train_csv
    (folder / "wavs").mkdir(parents=True, exist_ok=True)
    words = " ".join(common.SENTENCES).split()
    lines = ["audio_file|text|speaker_name"]
    for i, seconds in enumerate(durations):
        name = f"wavs/clip_{i:04d}.wav"
        sf.write(str(folder / name), common.speech_like(seconds, seed=seed * 1000 + i), common.SAMPLE_RATE)
        text, w = "", i * 7
        while len(text) < CHARACTERS_PER_SECOND * seconds:
            text = f"{text} {words[w % len(words)]}".strip()
            w += 1
        lines.append(f"{name}|{text}.|speaker")
    (folder / "metadata_eval.csv").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    train_csv.write_text("\n".join(lines) + "\n", encoding="utf-8")  # last: marks the folder complete
    return train_csv


def build_setup(opts: argparse.Namespace, work: Path, durations: list[float]) -> Any:
    """train_gpt's training setup (bench_row.build_setup: the product's GPTTrainer, loader and coqui Trainer with
    train_gpt's defaults for a CPU: checkpointing, SDPA, mixed precision as the device allows, leaner steps) on a
    model folder whose GPT has the asked size (random weights)."""
    from bench_row import Row
    from bench_row import build_setup as product_setup

    from utils.memory_check.step_measure import build_model_folder

    size = f"gpt-{opts.layers}x{opts.width}x{opts.heads}"
    build_model_folder(opts.model_dir / size, opts.layers, opts.width, opts.heads, opts.model_dir)
    train_csv = write_clips(work / f"clips-{len(durations)}-{opts.seed}", durations, opts.seed)
    setup_opts = argparse.Namespace(
        version=size,
        model_dir=opts.model_dir,
        train_csv=train_csv,
        mixed_train_csv=train_csv,
        eval_csv=train_csv.with_name("metadata_eval.csv"),
        batch=max(opts.batch),
        precision="auto",
    )
    row = Row("all three + leaner steps", True, True, True, leaner=True, tf32=True, loader="grouped")
    return product_setup(row, setup_opts, work / "runs")


def epoch_batches(trainer: Any, batch: int, grouped: bool, epoch_index: int) -> list[dict[str, Any]]:
    """One epoch of the run's training loader (TrainingClipsDataset + LengthGroupedBatchSampler + its collate),
    length-grouped or plain shuffled: the batches a training epoch takes, collated."""
    model = trainer.model
    model.group_by_length = grouped
    trainer.config.batch_size = batch
    loader = model.get_data_loader(trainer.config, is_eval=False, samples=trainer.train_samples, verbose=False)
    loader.batch_sampler.set_epoch(epoch_index)
    return list(loader)


def train_step(trainer: Any, batch: dict[str, Any], steps: int) -> tuple[float, float]:
    """coqui's Trainer.train_step of one collated batch (mels, DVAE codes, forward, backward, clipping, AdamW):
    (wall seconds, CPU seconds of this process)."""
    started, cpu = time.perf_counter(), time.process_time()
    trainer.train_step(dict(batch), steps, 0, time.time())
    return time.perf_counter() - started, time.process_time() - cpu


def interleaved_round(trainer: Any, off: list, on: list, round_: int) -> dict[bool, tuple[float, float]]:
    """Both epochs' steps interleaved (off, on, off, on ...; which goes first alternates by step and round), so
    both settings share the machine's load alike. Returns {grouped: (wall seconds, CPU seconds)} per epoch."""
    spent = {False: [0.0, 0.0], True: [0.0, 0.0]}
    epochs = {False: off, True: on}
    for i in range(max(len(off), len(on))):
        first = (i + round_) % 2 == 1
        for grouped in (first, not first):
            if i < len(epochs[grouped]):
                wall, cpu = train_step(trainer, epochs[grouped][i], len(epochs[grouped]))
                spent[grouped][0] += wall
                spent[grouped][1] += cpu
    return {g: (s[0], s[1]) for g, s in spent.items()}


def spread(values: list[float], digits: int = 3) -> str:
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=40, help="clips in the trained epoch")
    parser.add_argument("--padding-clips", type=int, default=2000, help="clips for the padding share")
    parser.add_argument("--batch", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--rounds", type=int, default=4, help="interleaved epoch pairs per batch size")
    # Deep enough that the GPT's padded positions are most of a step's work (not the per-clip conditioning
    # encoder, the optimizer step or per-operation overhead), small enough for minutes on a 2-core CPU.
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model-dir", type=Path, default=common.default_model_dir())
    parser.add_argument("--padding-only", action="store_true", help="no training, only the padding share")
    return parser.parse_args(argv)


def audio_padding(batches: list[dict[str, Any]]) -> float:
    """The share of the collated audio (the padded wav tensors the step turns into mels and codes) that is
    padding."""
    padded = sum(b["wav"].shape[0] * b["wav"].shape[-1] for b in batches)
    return 1.0 - sum(int(b["wav_lengths"].sum()) for b in batches) / padded


HEADER = [
    "batch",
    "length grouping",
    "padding, GPT positions ({clips} clips)",
    "padding, audio of the timed epochs",
    "samples/s, median (min-max)",
    "samples per CPU-second, median (min-max)",
    "load (1 min)",
]


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    began = time.perf_counter()
    torch.manual_seed(opts.seed)
    many = common.ljspeech_like_durations(opts.padding_clips, opts.seed)
    trained = common.ljspeech_like_durations(opts.clips, opts.seed + 1)
    print(f"{common.machine()}, load {common.load_average()}, {common.now()}", flush=True)
    print(
        f"durations: {len(many)} clips for the padding share (mean {statistics.mean(many):.2f} s), "
        f"{len(trained)} trained (mean {statistics.mean(trained):.2f} s, {min(trained):.2f}-{max(trained):.2f} s)",
        flush=True,
    )
    shares = {
        (b, g): (
            gpt_padding_share(epoch(many, b, g, opts.seed), many),
            padding_share(epoch(many, b, g, opts.seed), many),
        )
        for b in opts.batch
        for g in (False, True)
    }
    if opts.padding_only:
        rows = [[b, "on" if g else "off", f"{100 * s[0]:.1f}%", f"{100 * s[1]:.1f}%"] for (b, g), s in shares.items()]
        print()
        print(common.markdown_table(["batch", "length grouping", "padding (GPT positions)", "padding (audio)"], rows))
        return 0

    import tempfile

    rows = []
    from utils.training.controls import torch_settings_restored

    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as stack:
        setup = build_setup(opts, Path(work), trained)
        # As train_gpt: every core for training (building imported coqui's XTTS dataset module, which sets one thread).
        stack.enter_context(torch_settings_restored())
        trainer = setup.trainer
        gpt = trainer.model.xtts.gpt
        params = sum(p.numel() for p in gpt.parameters())
        print(
            f"GPT: {opts.layers} layers, width {opts.width}, {opts.heads} heads, {params / 1e6:.1f} M parameters "
            f"(the trained GPT with its conditioning encoder), {torch.get_num_threads()} torch threads; "
            f"{opts.rounds} interleaved rounds per batch size; "
            f"setup {time.perf_counter() - began:.0f} s",
            flush=True,
        )
        trainer.model.on_train_epoch_start(trainer)
        warm = epoch_batches(trainer, opts.batch[0], False, 1000)
        for batch in warm:  # every clip's DVAE codes cached once (as from a run's second epoch), kernels warm
            train_step(trainer, batch, len(warm))
        for size in opts.batch:
            speed: dict[bool, list[float]] = {False: [], True: []}
            per_cpu: dict[bool, list[float]] = {False: [], True: []}
            ratios, loads, padded = [], [], {False: [], True: []}
            train_step(trainer, epoch_batches(trainer, size, True, 1001)[0], 1)  # this batch size's shapes warm
            for round_ in range(opts.rounds):
                off, on = (epoch_batches(trainer, size, g, round_) for g in (False, True))
                padded[False].append(audio_padding(off))
                padded[True].append(audio_padding(on))
                spent = interleaved_round(trainer, off, on, round_)
                for g in (False, True):
                    speed[g].append(len(trained) / spent[g][0])
                    per_cpu[g].append(len(trained) / spent[g][1])
                ratios.append(speed[True][-1] / speed[False][-1])
                loads.append(os.getloadavg()[0])
                print(
                    f"  batch {size}, round {round_ + 1}: off {speed[False][-1]:.3f}, on {speed[True][-1]:.3f} "
                    f"samples/s ({ratios[-1]:.2f}x); per CPU-second off {per_cpu[False][-1]:.3f}, on "
                    f"{per_cpu[True][-1]:.3f}; load {common.load_average()}; {time.perf_counter() - began:.0f} s",
                    flush=True,
                )
            for g in (False, True):
                rows.append(
                    [
                        size,
                        "on" if g else "off",
                        f"{100 * shares[size, g][0]:.1f}%",
                        f"{100 * statistics.mean(padded[g]):.1f}%",
                        f"{statistics.median(speed[g]):.3f} ({spread(speed[g])})",
                        f"{statistics.median(per_cpu[g]):.3f} ({spread(per_cpu[g])})",
                        "",
                    ]
                )
            cpu_ratios = [a / b for a, b in zip(per_cpu[True], per_cpu[False], strict=True)]
            wins = sum(r > 1 for r in ratios)
            rows.append(
                [
                    size,
                    "on / off",
                    "",
                    "",
                    f"**{statistics.median(ratios):.2f}x** ({spread(ratios, 2)}; on faster in {wins}/{len(ratios)})",
                    f"{statistics.median(cpu_ratios):.2f}x ({spread(cpu_ratios, 2)})",
                    f"{min(loads):.1f}-{max(loads):.1f}",
                ]
            )
            print(common.markdown_table([h.format(clips=len(many)) for h in HEADER], rows[-3:]), flush=True)
        setup.release()
    print()
    print(f"{time.perf_counter() - began:.0f} s in all; load {common.load_average()}")
    print(common.markdown_table([h.format(clips=len(many)) for h in HEADER], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
