"""Length-grouped batches against random ones: padding share and training samples/s on real-length clips.

The clips are LJSpeech-like durations (1-10.1 s, skewed long, mean about 6.9 s; drawn from a seeded beta
distribution, since no corpus is downloaded here). Per clip the GPT sees ~21.5 audio codes per second (22.05 kHz,
code stride 1024) and ~6.5 text tokens per second (about 15 read characters a second, BPE). A batch is padded to
its longest clip in both, which is the padding counted here: the share of the batch's GPT positions
(text + audio codes) that are padding, over one whole epoch of the product's batch sampler
(utils.training.batching.LengthGroupedBatchSampler) with grouping off and on.

samples/s: one epoch over the same clips is trained both ways (coqui's XTTS GPT at a reduced width with the
product's default CPU optimizations: gradient checkpointing, SDPA, fused GELU; forward, backward and an
AdamW step per batch, synthetic tokens of each clip's real length), interleaved and repeated, median per
setting. The work per clip is the same; only the padding differs. The conditioning encoder (6 s of
conditioning per clip, padded alike in both) is a fixed cost per clip that grouping does not touch, so the
speed-up is smaller than the padding cut; a narrow, shallow GPT shows almost none. On a shared machine the wall time
depends on the other processes: samples per CPU-second of this process (all its threads) is shown beside it.

    python benchmarks/bench_length_grouping.py                    # batch 4 and 8, 64 clips, 2 rounds
    python benchmarks/bench_length_grouping.py --clips 2000 --padding-only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
import numpy as np
import torch

from utils.training.batching import LengthGroupedBatchSampler, padding_share

CODES_PER_SECOND = 22050 / 1024
TEXT_TOKENS_PER_SECOND = 6.5
CONDITIONING_FRAMES = 6 * 22050 // 256  # the 6 s conditioning input as mel frames


def ljspeech_like(clips: int, seed: int) -> list[float]:
    return [float(d) for d in 1.0 + 9.1 * np.random.default_rng(seed).beta(3.0, 1.6, clips)]


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


def build_gpt(layers: int, width: int, heads: int) -> torch.nn.Module:
    """coqui's XTTS GPT (v2's vocabularies and limits) at this size, with the product's default CPU step."""
    from TTS.tts.layers.xtts.gpt import GPT

    from utils.options import optimizations as o

    gpt = GPT(
        layers=layers,
        model_dim=width,
        heads=heads,
        max_text_tokens=402,
        max_mel_tokens=605,
        max_prompt_tokens=70,
        number_text_tokens=6681,
        num_audio_tokens=1026,
        start_audio_token=1024,
        stop_audio_token=1025,
        use_perceiver_resampler=True,
    )
    gpt2 = o.gpt_transformer(gpt)
    o.configure_gradient_checkpointing(gpt2, True)
    o.configure_conditioning_checkpointing(gpt, True)
    o.configure_activation(gpt2)
    o.configure_attention(gpt2, True)
    return gpt.train()


def batch_inputs(indices: list[int], durations: list[float], generator: torch.Generator) -> dict[str, torch.Tensor]:
    text = [positions(durations[i])[0] for i in indices]
    codes = [positions(durations[i])[1] for i in indices]
    b = len(indices)
    return {
        "text_inputs": torch.randint(5, 6000, (b, max(text)), generator=generator),
        "text_lengths": torch.tensor(text),
        "audio_codes": torch.randint(0, 1024, (b, max(codes)), generator=generator),
        "wav_lengths": torch.tensor([c * 1024 for c in codes]),
        "cond_mels": torch.randn(b, 1, 80, CONDITIONING_FRAMES, generator=generator),
    }


def train_epoch(gpt: torch.nn.Module, optimizer: torch.optim.Optimizer, batches, durations) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to train these batches (forward, backward, optimizer step)."""
    generator = torch.Generator().manual_seed(0)
    inputs = [batch_inputs(b, durations, generator) for b in batches]
    started, cpu = time.perf_counter(), time.process_time()
    for batch in inputs:
        loss_text, loss_mel, _ = gpt(**batch)
        (loss_text * 0.01 + loss_mel).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started, time.process_time() - cpu


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=64, help="clips in the trained epoch")
    parser.add_argument("--padding-clips", type=int, default=2000, help="clips for the padding share")
    parser.add_argument("--batch", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repetitions of each epoch")
    # XTTS v2's depth at a quarter of its width: a CPU trains it in minutes, and the GPT's share of a step's
    # work (against the conditioning encoder, a fixed cost per clip) stays close to the full model's.
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--padding-only", action="store_true", help="no training, only the padding share")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    torch.manual_seed(opts.seed)
    many = ljspeech_like(opts.padding_clips, opts.seed)
    trained = ljspeech_like(opts.clips, opts.seed + 1)
    print(f"{common.machine()}, load {common.load_average()}, {common.now()}")
    print(
        f"durations: {len(many)} clips for the padding share (mean {statistics.mean(many):.2f} s), "
        f"{len(trained)} trained (mean {statistics.mean(trained):.2f} s)"
    )
    gpt = None if opts.padding_only else build_gpt(opts.layers, opts.width, opts.heads)
    if gpt is not None:
        params = sum(p.numel() for p in gpt.parameters())
        print(f"GPT: {opts.layers} layers, width {opts.width}, {params / 1e6:.1f} M parameters; {opts.rounds} rounds")
    rows = []
    for batch in opts.batch:
        shares = {g: gpt_padding_share(epoch(many, batch, g, opts.seed), many) for g in (False, True)}
        audio = {g: padding_share(epoch(many, batch, g, opts.seed), many) for g in (False, True)}
        speed: dict[bool, list[float]] = {False: [], True: []}
        per_cpu: dict[bool, list[float]] = {False: [], True: []}
        if gpt is not None:
            optimizer = torch.optim.AdamW(gpt.parameters(), lr=1e-6)
            train_epoch(gpt, optimizer, epoch(trained, batch, False, opts.seed)[:2], trained)  # warm-up
            for round_ in range(opts.rounds):
                for grouped in (False, True) if round_ % 2 == 0 else (True, False):
                    seconds, cpu = train_epoch(
                        gpt, optimizer, epoch(trained, batch, grouped, opts.seed + round_), trained
                    )
                    speed[grouped].append(len(trained) / seconds)
                    per_cpu[grouped].append(len(trained) / cpu)
                    print(
                        f"  batch {batch}, grouped={grouped}: {len(trained) / seconds:.3f} samples/s, "
                        f"{len(trained) / cpu:.3f} samples per CPU-second, load {common.load_average()}",
                        flush=True,
                    )
        for grouped in (False, True):
            rate = f"{statistics.median(speed[grouped]):.3f}" if speed[grouped] else "-"
            cpu_rate = f"{statistics.median(per_cpu[grouped]):.3f}" if per_cpu[grouped] else "-"
            share, audio_share = f"{100 * shares[grouped]:.1f}%", f"{100 * audio[grouped]:.1f}%"
            rows.append([batch, "on" if grouped else "off", share, audio_share, rate, cpu_rate])
        if speed[False]:
            ratio = statistics.median(speed[True]) / statistics.median(speed[False])
            cpu_ratio = statistics.median(per_cpu[True]) / statistics.median(per_cpu[False])
            rows.append([batch, "on / off", "", "", f"{ratio:.2f}x", f"{cpu_ratio:.2f}x"])
    header = [
        "batch",
        "length grouping",
        "padding (GPT positions)",
        "padding (audio seconds)",
        "samples/s (median)",
        "samples per CPU-second (median)",
    ]
    print()
    print(common.markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
