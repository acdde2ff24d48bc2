"""What many tests build: speech-like audio, datasets of it, and digests that prove files were left untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import soundfile as sf

from utils.device.gpu import GPUInfo, architecture_for

SAMPLE_RATE = 22050
SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "she sells sea shells by the sea shore",
    "a voice is a sound made by a person speaking",
    "we train the model on our own speech",
    "one two three four five six seven",
    "hello world this is a small test",
    "my voice sounds better every day",
    "bring the book back to the library",
]


def synth_speech(seconds: float, seed: int, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Speech-like audio: a few harmonics on a wandering pitch, syllable-rate envelope, a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    f0 = 110 + 40 * seed % 90 + 15 * np.sin(2 * np.pi * 0.7 * t + seed)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t + rng.uniform(0, np.pi))
    audio = 0.25 * voice * envelope + 0.01 * rng.standard_normal(t.size)
    fade = min(t.size // 10, 400)
    audio[:fade] *= np.linspace(0, 1, fade)
    audio[-fade:] *= np.linspace(1, 0, fade)
    return audio.astype(np.float32)


def write_clip(path: Path, seconds: float, seed: int, sample_rate: int = SAMPLE_RATE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), synth_speech(seconds, seed, sample_rate), sample_rate)
    return path


def write_dataset(
    folder: Path,
    n: int = 12,
    *,
    seconds: tuple[float, float] = (1.5, 3.0),
    texts: list[str] | None = None,
    csv_name: str = "metadata.csv",
    seed_offset: int = 0,
) -> Path:
    """n clips under folder/wavs and a coqui-format CSV (relative paths); returns the CSV path."""
    texts = texts or SENTENCES
    lines = ["audio_file|text|speaker_name"]
    for i in range(n):
        duration = seconds[0] + (seconds[1] - seconds[0]) * (i % 4) / 3
        name = f"wavs/clip_{seed_offset + i:03d}.wav"
        write_clip(folder / name, duration, seed_offset + i)
        lines.append(f"{name}|{texts[i % len(texts)]}|speaker_a")
    csv_path = folder / csv_name
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return csv_path


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under folder, to prove a run left the user's files untouched."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def tensorboard_scalars(run_dir: str | Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of one scalar in a run's TensorBoard event files, as TensorBoard itself reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(Path(run_dir) / "tensorboard"))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def page_text(markdown: str) -> str:
    """The text a person reads of a Markdown message, rendered as the page renders it (CommonMark with HTML, as
    Gradio's gr.Markdown): what the handlers escape reads as the plain words again."""
    import html
    import re

    from markdown_it import MarkdownIt

    page = MarkdownIt("commonmark", {"html": True}).render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", page)).strip()


def tiny_training_setup(tiny_base, tmp_path: Path, name: str, **arguments):
    """train_gpt's training setup (coqui's GPTTrainer and Trainer, not yet run) on 6 synthetic clips with the tiny
    model: one epoch of batch 2 (3 steps), no loader workers; `arguments` add to or override TrainArguments.
    Returns (setup, arguments); call setup.release() when done."""
    from utils.data.validation import validate_dataset
    from utils.options.arguments import TrainArguments
    from utils.text.frontend import TextFrontEnd
    from utils.training.metrics import MetricsLogger
    from utils.training.run_record import create_run_dir
    from utils.training.setup import build_training_setup

    csv_path = write_dataset(tmp_path / "data", n=6)
    base = {"num_epochs": 1, "batch_size": 2, "num_workers": 0}
    args = TrainArguments(
        version="tiny", train_csv=str(csv_path), output_path=str(tmp_path / "out"), **{**base, **arguments}
    )
    run_dir = create_run_dir(args.output_path, name)
    metrics = MetricsLogger(run_dir / "metrics.jsonl", batch_size=2, steps_per_epoch=3, total_steps=3)
    setup = build_training_setup(args, tiny_base, validate_dataset(csv_path), TextFrontEnd("en"), run_dir, metrics)
    return setup, args


def simulated_gpu(capability: tuple[int, int], total_memory_gb: float = 24.0) -> GPUInfo:
    """A GPU of `capability` as detect_gpu would describe it (for decisions; nothing runs on it)."""
    return GPUInfo(
        available=True,
        name="simulated",
        capability=capability,
        architecture=architecture_for(capability),
        total_memory_gb=total_memory_gb,
        bf16_native=capability >= (8, 0),
        device_count=1,
    )
