"""What the training benchmarks share: a model folder of the right size, a dataset of ~11 s clips, the machine.

The full-size model is XTTS v2's published architecture (30 GPT layers, width 1024, 16 heads, 6681 text
tokens; the DVAE and HiFi-GAN at their real sizes) with random weights: it costs the same time and memory
as the real weights, and no model hub is needed. It is built once (about a minute and 2 GB on disk) and
reused from the folder given.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

FULL_SIZE_VERSION = "xtts-full-random"
SAMPLE_RATE = 22050
# model_args that differ between the tiny model and XTTS v2 (coqui/XTTS-v2 config.json); the text vocab
# stays the tiny one, so its ids all fall inside the published 6681-row embedding.
FULL_SIZE_ARGS = {
    "gpt_layers": 30,
    "gpt_n_model_channels": 1024,
    "gpt_n_heads": 16,
    "gpt_number_text_tokens": 6681,
    "decoder_input_dim": 1024,
}
# Long read sentences: ~11 s of speech each at ~15 characters per second.
SENTENCES = (
    "When the morning train finally pulled into the little station, the travellers gathered their bags, "
    "thanked the conductor and stepped out into the cold and quiet air.",
    "She explained that the new library would open next spring, with a reading room for children, a small "
    "cafe and long rows of shelves for the history collection.",
    "After three days of heavy rain the river rose above its banks, and the farmers worked through the night "
    "to move their animals and tools to the higher fields.",
    "He had always wanted to learn the piano, so on his sixtieth birthday he bought an old upright instrument "
    "and began to practise scales every single evening.",
)


def machine(threads: int | None = None) -> str:
    """The CPU and how many threads torch uses (now, or `threads` that a run recorded), e.g. 'CPU (x86_64, 2 cores,
    2 torch threads)'."""
    import torch

    return (
        f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{threads or torch.get_num_threads()} torch threads)"
    )


def load_average() -> str:
    """The 1/5/15-minute load averages: on a shared machine, whether a timing was disturbed."""
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def now() -> str:
    return datetime.now().isoformat(timespec="seconds")


def library_versions() -> dict[str, str]:
    from importlib.metadata import version

    import torch

    return {
        "torch": torch.__version__,
        "transformers": version("transformers"),
        "coqui-tts": version("coqui-tts"),
        "coqui-tts-trainer": version("coqui-tts-trainer"),
    }


def default_model_dir() -> Path:
    """A folder for the benchmark's model and data that outlives one run (the full-size model is 2 GB)."""
    return Path(tempfile.gettempdir()) / "xtts-bench-models"


def ensure_model(models_dir: Path, full_size: bool) -> str:
    """The version name of the benchmark's model under `models_dir`: 'tiny', or the full-size random one."""
    from utils.model.base_models import TINY, ensure_base_model

    ensure_base_model(TINY, models_dir)
    if full_size:
        build_full_size_folder(models_dir / FULL_SIZE_VERSION, models_dir)
        return FULL_SIZE_VERSION
    return TINY


def build_full_size_folder(folder: Path, models_dir: Path) -> Path:
    """XTTS v2 at full size with random weights, laid out like a base-model folder (built once)."""
    from utils.model.base_models import build_resized_model

    if (folder / "model.pth").is_file():
        return folder
    started = time.perf_counter()
    print(f"Building a full-size XTTS with random weights in {folder} (once) ...", flush=True)
    build_resized_model(folder, FULL_SIZE_ARGS, models_dir)
    print(f"... built in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def evict_from_page_cache(folder: Path) -> None:
    """Ask the kernel to drop these files' cached pages (clean pages only; other files are untouched), so the
    next read comes from the disk, as on a machine that has not read the model since it booted."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def ljspeech_like_durations(clips: int, seed: int) -> list[float]:
    """Clip lengths in seconds shaped like LJSpeech's: 1-10.1 s, skewed long, mean about 6.9 s."""
    return [float(d) for d in 1.0 + 9.1 * np.random.default_rng(seed).beta(3.0, 1.6, clips)]


def speech_like(seconds: float, seed: int) -> np.ndarray:
    """Harmonics on a wandering pitch with a syllable-rate envelope: passes the dataset checks like speech."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    pitch = 110 + 40 * rng.random() + 20 * np.sin(2 * np.pi * (0.3 + 0.4 * rng.random()) * t)
    phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t + rng.random() * 6.28)
    audio = 0.15 * voice * envelope + 0.003 * rng.standard_normal(t.shape)
    fade = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.05)  # no clicks at the ends
    return (audio * fade).astype(np.float32)


def write_dataset(
    folder: Path, train_rows: int, eval_rows: int, seconds: tuple[float, float] = (10.8, 11.5)
) -> tuple[Path, Path]:
    """`train_rows` + `eval_rows` clips of `seconds` (low, high), read long sentences, in coqui's CSV layout.
    Returns (train_csv, eval_csv). Written once per folder; a complete folder is reused."""
    import soundfile as sf

    train_csv, eval_csv = folder / "metadata_train.csv", folder / "metadata_eval.csv"
    if train_csv.is_file() and eval_csv.is_file():
        return train_csv, eval_csv
    (folder / "wavs").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    lines: list[str] = []
    for i in range(train_rows + eval_rows):
        name = f"wavs/clip_{i:04d}.wav"
        sf.write(str(folder / name), speech_like(rng.uniform(*seconds), seed=i), SAMPLE_RATE)
        lines.append(f"{name}|{SENTENCES[i % len(SENTENCES)]}|speaker")
    header = "audio_file|text|speaker_name\n"
    eval_csv.write_text(header + "\n".join(lines[train_rows:]) + "\n", encoding="utf-8")
    train_csv.write_text(header + "\n".join(lines[:train_rows]) + "\n", encoding="utf-8")  # last: marks complete
    return train_csv, eval_csv


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
