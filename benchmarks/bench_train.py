"""Training-step benchmark of the XTTS GPT: the baseline, each optimization alone, and all three.

Builds coqui's XTTS `GPT` at full size (30 layers, width 1024, 16 heads; random weights cost the same
time and memory as real ones), feeds it synthetic in-memory batches shaped like ~11 s clips with
their text and a 6 s conditioning clip, and times full training steps (forward, backward, clipping,
AdamW) after warm-up. The optimizations are applied by the product's own `TrainingOptimizer`.

    python benchmarks/bench_train.py                  # on a CUDA GPU: full size, batch 8
    python benchmarks/bench_train.py --out docs/bench.md
    python benchmarks/bench_train.py --device cpu     # CPU: the tiny model, a smoke check only

Rows: baseline (FP32, eager attention, no checkpointing, TF32 off), +SDPA, +mixed precision,
+checkpointing, all three (as train_gpt applies them, TF32 included on Ampere+), and all three at
the largest batch that fits. Model FLOPs utilisation counts 6·N·tokens plus attention, against the
GPU's dense BF16 peak; the recompute of checkpointing is not counted as useful work.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from utils.model.tiny import TINY_GPT_HEADS, TINY_GPT_LAYERS, TINY_GPT_WIDTH  # noqa: E402
from utils.training_optimizations import TrainingOptimizer, detect_gpu, gpt_transformer  # noqa: E402

SAMPLE_RATE = 22050
CODE_STRIDE = 1024  # samples per DVAE code
COND_FRAMES = 517  # 6 s of conditioning audio at hop 256
TEXT_TOKENS_PER_SECOND = 5.0  # ~15 characters of speech per second, ~3 characters per BPE token

XTTS_V2 = dict(layers=30, model_dim=1024, heads=16, max_text_tokens=402, max_mel_tokens=605, max_prompt_tokens=70,
               number_text_tokens=6681, num_audio_tokens=1026, start_audio_token=1024, stop_audio_token=1025,
               start_text_token=261, stop_text_token=0, use_perceiver_resampler=True, code_stride_len=CODE_STRIDE)  # fmt: skip
TINY = {**XTTS_V2, "layers": TINY_GPT_LAYERS, "model_dim": TINY_GPT_WIDTH, "heads": TINY_GPT_HEADS}

# Dense BF16 tensor-core peaks (no sparsity), TFLOP/s, by a substring of the device name.
BF16_PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H100": 756.0,
                    "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10G": 70.0, "A10": 125.0, "RTX 4090": 165.0,
                    "RTX 3090": 71.0, "V100": 125.0, "T4": 65.0}  # fmt: skip


@dataclass
class Case:
    name: str
    grad_checkpoint: bool
    sdpa: bool
    mixed_precision: bool
    tf32: bool  # only "all three" rows take every flag TrainingOptimizer sets (TF32, cuDNN benchmark)
    largest_batch: bool = False


CASES = [
    Case("baseline (FP32, eager, no checkpointing)", False, False, False, False),
    Case("+ SDPA", False, True, False, False),
    Case("+ mixed precision", False, False, True, False),
    Case("+ gradient checkpointing", True, False, False, False),
    Case("all three", True, True, True, True),
    Case("all three, largest batch", True, True, True, True, largest_batch=True),
]


def make_batch(batch: int, device: torch.device, seed: int, sizes: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Clips of 9.5-11.6 s (the trainer's limit), their text, and 6 s conditioning mels."""
    g = torch.Generator().manual_seed(seed)
    seconds = 9.5 + 2.1 * torch.rand(batch, generator=g)
    wav_lengths = (seconds * SAMPLE_RATE).long().clamp(max=255995)
    text_lengths = (seconds * TEXT_TOKENS_PER_SECOND + torch.randn(batch, generator=g) * 3).round().long().clamp(4)
    codes = math.ceil(int(wav_lengths.max()) / CODE_STRIDE)
    audio_range = sizes["num_audio_tokens"] - 2
    return {
        "text_inputs": torch.randint(5, sizes["number_text_tokens"] - 1, (batch, int(text_lengths.max())), generator=g).to(device),
        "text_lengths": text_lengths.to(device),
        "audio_codes": torch.randint(0, audio_range, (batch, codes), generator=g).to(device),
        "wav_lengths": wav_lengths.to(device),
        "cond_mels": torch.randn(batch, 1, 80, COND_FRAMES, generator=g).to(device),
        "cond_idxs": None,
        "cond_lens": None,
    }  # fmt: skip


def model_flops_per_step(gpt: torch.nn.Module, batch: dict[str, torch.Tensor]) -> float:
    """6·N·tokens for the transformer and output heads, plus attention scores (forward + backward)."""
    transformer = gpt_transformer(gpt)
    n_params = sum(p.numel() for p in transformer.parameters())
    n_params += sum(p.numel() for p in gpt.text_head.parameters()) + sum(p.numel() for p in gpt.mel_head.parameters())
    b = batch["text_inputs"].shape[0]
    seq = 32 + batch["text_inputs"].shape[1] + 2 + batch["audio_codes"].shape[1] + 2  # latents + text + mel
    width, layers = transformer.config.n_embd, transformer.config.n_layer
    return 6 * n_params * b * seq + 12 * layers * width * seq * seq * b


def build(case: Case, device: torch.device, sizes: dict[str, Any], precision: str):
    from TTS.tts.layers.xtts.gpt import GPT

    torch.manual_seed(0)
    gpt = GPT(**sizes).to(device)
    gpt.train()
    config = SimpleNamespace(mixed_precision=False, precision="fp32", allow_tf32=False, cudnn_benchmark=False)
    report = TrainingOptimizer(case.grad_checkpoint, case.sdpa, case.mixed_precision, precision).apply(gpt, config)
    torch.backends.cuda.matmul.allow_tf32 = case.tf32 and config.allow_tf32
    torch.backends.cudnn.allow_tf32 = case.tf32 and config.allow_tf32
    torch.backends.cudnn.benchmark = case.tf32 and config.cudnn_benchmark
    optimizer = torch.optim.AdamW(gpt.parameters(), lr=5e-6, betas=(0.9, 0.96), eps=1e-8, weight_decay=1e-2)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.precision, torch.float32)
    scaler = torch.amp.GradScaler(device.type) if config.mixed_precision and config.precision == "fp16" else None
    return gpt, optimizer, config, dtype, scaler, report


def train_step(gpt, optimizer, config, dtype, scaler, batch) -> float:
    device_type = batch["text_inputs"].device.type
    with torch.autocast(device_type, dtype=dtype, enabled=config.mixed_precision):
        loss_text, loss_mel, _ = gpt(**batch)
        loss = loss_text * 0.01 + loss_mel
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def measure(case: Case, batch_size: int, device: torch.device, sizes: dict, args) -> dict[str, Any]:
    gpt, optimizer, config, dtype, scaler, report = build(case, device, sizes, args.precision)
    try:
        batches = [make_batch(batch_size, device, seed, sizes) for seed in range(args.warmup + args.steps)]
        for batch in batches[: args.warmup]:
            train_step(gpt, optimizer, config, dtype, scaler, batch)
        sync(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        times, flops = [], 0.0
        for batch in batches[args.warmup :]:
            start = time.perf_counter()
            loss = train_step(gpt, optimizer, config, dtype, scaler, batch)
            sync(device)
            times.append(time.perf_counter() - start)
            flops += model_flops_per_step(gpt, batch)
        total = sum(times)
        return {
            "case": case.name,
            "batch": batch_size,
            "precision": config.precision,
            "attention": gpt_transformer(gpt).config._attn_implementation,
            "checkpointing": case.grad_checkpoint,
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "step_s": total / len(times),
            "samples_per_s": batch_size * len(times) / total,
            "peak_gb": torch.cuda.max_memory_allocated() / 1024**3 if device.type == "cuda" else None,
            "tflops": flops / total / 1e12,
            "loss": loss,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2 if device.type == "cpu" else None,
            "skipped": [s["name"] for s in report.skipped if not s["reason"].startswith("turned off by the user")],
        }
    finally:
        del gpt, optimizer
        free(device)


def fits(case: Case, batch_size: int, device: torch.device, sizes: dict, args) -> bool:
    gpt, optimizer, config, dtype, scaler, _ = build(case, device, sizes, args.precision)
    try:
        for seed in range(2):
            train_step(gpt, optimizer, config, dtype, scaler, make_batch(batch_size, device, seed, sizes))
        sync(device)
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        del gpt, optimizer
        free(device)


def largest_batch(case: Case, start: int, device: torch.device, sizes: dict, args) -> int:
    """Double until out of memory, then bisect; keeps a margin-free maximum for this batch shape."""
    good, bad = 0, None
    size = start
    while bad is None and size <= args.max_batch:
        if fits(case, size, device, sizes, args):
            good, size = size, size * 2
        else:
            bad = size
    if bad is None:
        return good
    while bad - good > max(1, good // 16):
        middle = (good + bad) // 2
        if fits(case, middle, device, sizes, args):
            good = middle
        else:
            bad = middle
    return good


def measure_in_subprocess(index: int, batch: int, args) -> dict[str, Any]:
    """Run one case in a fresh process: on CPU its peak RSS is then that case's alone."""
    command = [sys.executable, __file__, "--device", args.device, "--batch", str(batch), "--warmup", str(args.warmup),
               "--steps", str(args.steps), "--precision", args.precision, "--only-case", str(index)]  # fmt: skip
    if args.full_size:
        command.append("--full-size")
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def run(args) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    device = torch.device(args.device)
    sizes = XTTS_V2 if args.full_size or (device.type == "cuda" and not args.tiny) else TINY
    gpu = detect_gpu()
    peak = args.peak_tflops or next((v for k, v in BF16_PEAK_TFLOPS.items() if k in gpu.name), None)
    rows = []
    for case in CASES:
        batch = args.batch
        if case.largest_batch:
            if device.type != "cuda":
                continue
            batch = largest_batch(case, args.batch, device, sizes, args)
        print(f"... {case.name} (batch {batch})", flush=True)
        try:
            if device.type == "cpu":
                row = measure_in_subprocess(CASES.index(case), batch, args)
            else:
                row = measure(case, batch, device, sizes, args)
        except torch.cuda.OutOfMemoryError:
            free(device)
            row = {"case": case.name, "batch": batch, "oom": True}
        row["mfu"] = row["tflops"] / peak if peak and "tflops" in row else None
        rows.append(row)
    base = rows[0]
    for row in rows:
        if "samples_per_s" in row and "samples_per_s" in base:
            row["speedup"] = row["samples_per_s"] / base["samples_per_s"]
            key = "peak_gb" if base.get("peak_gb") else "peak_rss_gb"
            row["memory_ratio"] = row[key] / base[key] if row.get(key) and base.get(key) else None
    meta = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "device": gpu.summary() if device.type == "cuda" else f"CPU ({platform.processor() or platform.machine()}, "
                                                              f"{torch.get_num_threads()} threads)",  # fmt: skip
        "model": f"XTTS GPT {sizes['layers']} layers, width {sizes['model_dim']}, {sizes['heads']} heads",
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "coqui-tts": __import__("importlib.metadata").metadata.version("coqui-tts"),
        "bf16_peak_tflops": peak,
        "warmup": args.warmup,
        "steps": args.steps,
        "command": " ".join(["python"] + sys.argv),
    }
    return rows, meta


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    cpu = any(r.get("peak_rss_gb") is not None for r in rows)
    memory_label = "peak RSS (GB)" if cpu else "peak alloc (GB)"
    lines = [
        f"Device: {meta['device']}  ",
        f"Model: {meta['model']}; synthetic batches of 9.5-11.6 s clips, ~5 text tokens/s, 6 s conditioning  ",
        f"torch {meta['torch']}, transformers {meta['transformers']}, coqui-tts {meta['coqui-tts']}; "
        f"{meta['warmup']} warm-up + {meta['steps']} timed steps; {meta['date']}  ",
        f"Command: `{meta['command']}`",
        "",
        f"| configuration | batch | precision | attention | ckpt | TF32 | samples/s | step (s) | {memory_label} "
        "| speed-up | memory vs baseline | MFU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("oom"):
            lines.append(f"| {r['case']} | {r['batch']} | out of memory | | | | | | | | | |")
            continue
        lines.append(
            f"| {r['case']} | {r['batch']} | {r['precision']} | {r['attention']} | {'yes' if r['checkpointing'] else 'no'} "
            f"| {'on' if r['tf32'] else 'off'} | {r['samples_per_s']:.2f} | {r['step_s']:.3f} | {fmt(r['peak_rss_gb'] if cpu else r['peak_gb'], '.2f')} "
            f"| {fmt(r.get('speedup'), '.2f')}x | {fmt(r.get('memory_ratio'), '.0%')} | {fmt(r['mfu'], '.1%')} |"
        )
    skipped = sorted({name for r in rows for name in r.get("skipped", [])})
    if skipped:
        lines += ["", f"Not applicable on this device (TrainingOptimizer skipped them): {', '.join(skipped)}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=None, help="Batch size (default 8 on GPU, 2 on CPU).")
    parser.add_argument("--warmup", type=int, default=None, help="Untimed steps first (default 3 GPU, 1 CPU).")
    parser.add_argument("--steps", type=int, default=None, help="Timed steps (default 10 GPU, 2 CPU).")
    parser.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp16"), help="For mixed-precision rows.")
    parser.add_argument("--max-batch", type=int, default=256, help="Upper bound of the largest-batch search.")
    parser.add_argument("--peak-tflops", type=float, default=None, help="Dense BF16 peak for MFU, if not known.")
    parser.add_argument("--tiny", action="store_true", help="Use the tiny model on a GPU too (a quick check).")
    parser.add_argument("--full-size", action="store_true", help="Use the full-size GPT on the CPU too (slow).")
    parser.add_argument("--only-case", type=int, default=None, help=argparse.SUPPRESS)  # internal: one case, JSON
    parser.add_argument("--out", type=Path, default=None, help="Also write the table (and a .json beside it).")
    args = parser.parse_args(argv)
    gpu_run = args.device.startswith("cuda")
    args.batch = args.batch or (8 if gpu_run else 2)
    args.warmup = args.warmup if args.warmup is not None else (3 if gpu_run else 1)
    args.steps = args.steps or (10 if gpu_run else 2)
    if gpu_run and not torch.cuda.is_available():
        parser.error("no CUDA GPU: use --device cpu for the smoke check")
    if args.only_case is not None:
        device = torch.device(args.device)
        sizes = XTTS_V2 if args.full_size or device.type == "cuda" else TINY
        print(json.dumps(measure(CASES[args.only_case], args.batch, device, sizes, args)))
        return 0
    rows, meta = run(args)
    table = to_markdown(rows, meta)
    print("\n" + table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table, encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
