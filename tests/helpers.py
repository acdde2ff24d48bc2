"""What many tests build: speech-like audio, datasets of it, digests that prove files were left untouched, and
waits that last while the product makes progress (wait_until)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

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
    from utils.training.loop.setup import build_training_setup, trainer_parts
    from utils.training.recording.metrics import MetricsLogger
    from utils.training.recording.run_record import create_run_dir

    csv_path = write_dataset(tmp_path / "data", n=6)
    base = {"num_epochs": 1, "batch_size": 2, "num_workers": 0}
    args = TrainArguments(
        version="tiny", train_csv=str(csv_path), output_path=str(tmp_path / "out"), **{**base, **arguments}
    )
    run_dir = create_run_dir(args.output_path, name)
    metrics = MetricsLogger(run_dir / "metrics.jsonl", batch_size=2, steps_per_epoch=3, total_steps=3)
    parts = trainer_parts(args, run_dir, metrics)
    setup = build_training_setup(args, tiny_base, validate_dataset(csv_path), TextFrontEnd("en"), run_dir, parts)
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


# --- Waiting on progress ------------------------------------------------------------------------------------------
# A test waits for what it expects for as long as the product shows signs of work (a step counter, a log that
# grows, a process that uses CPU time): a loaded CI machine is slower, not stalled. Only when nothing advanced for
# `stall` seconds does the wait fail. Every wait of the suite goes through wait_until.

STALL_S = 180.0  # seconds without any sign of progress before a wait fails
BACKSTOP_S = 3600.0  # however busy the product looks, a wait ends after this (a loop that never ends)
_watched: list[Any] = []  # signals every wait adds: an app server's folder and processes, a browser's processes


class Stalled(AssertionError):
    """What a test waited for did not happen, and nothing advanced for `stall` seconds."""


def watch(signal: Any) -> Any:
    """Add a progress signal to every wait (until unwatch); returns it."""
    _watched.append(signal)
    return signal


def unwatch(signal: Any) -> None:
    if signal in _watched:
        _watched.remove(signal)


def _read(signal: Any) -> Any:
    try:
        return signal()
    except Exception:  # noqa: BLE001 - a file or process gone reads as no progress, not as a failure
        return None


def wait_until(
    condition: Any,
    what: str,
    *,
    progress: tuple[Any, ...] = (),
    stall: float = STALL_S,
    poll: float = 0.5,
    ignore: tuple[type[BaseException], ...] = (OSError, ValueError),
    describe: Any = None,
) -> Any:
    """Poll `condition()` until it returns something truthy, and return that. While it is falsy, the wait goes
    on as long as one of the progress signals (callables whose value changes while the work advances: see
    file_growth, folder_growth, cpu_seconds, and those watch() added) changed within the last `stall` seconds;
    it raises Stalled when none did. A condition raising one of `ignore` (a file half written, a page element
    re-rendered) is polled again. The failure says what `describe()` returns (what the test last saw), or the
    condition's last exception."""
    signals = [*progress, *_watched]
    seen = [_read(s) for s in signals]
    started = quiet_since = time.monotonic()
    while True:
        try:
            value, last = condition(), ""
        except ignore as exc:
            value, last = None, f"{type(exc).__name__}: {exc}"
        if value:
            return value
        now = [_read(s) for s in signals]
        if now != seen:
            seen, quiet_since = now, time.monotonic()
        idle = time.monotonic() - quiet_since
        if idle > stall or time.monotonic() - started > BACKSTOP_S:
            why = f"nothing advanced for {idle:.1f}s" if idle > stall else f"still waiting after {BACKSTOP_S:.0f}s"
            shown = _read(describe) if describe is not None else last
            raise Stalled(f"waiting for {what}: {why}" + (f"; last seen: {str(shown)[-1500:]}" if shown else ""))
        time.sleep(poll)


def file_growth(*paths: Any) -> Any:
    """A signal: the sizes of these files (paths, or callables returning one; a missing file reads as -1)."""

    def sizes() -> tuple[int, ...]:
        found = []
        for path in paths:
            path = Path(path() if callable(path) else path)
            found.append(path.stat().st_size if path.is_file() else -1)
        return tuple(found)

    return sizes


def folder_growth(folder: Path, ignore: tuple[str, ...] = ("memory.jsonl",)) -> Any:
    """A signal: the number and total size of the files under `folder` (a run's metrics and checkpoints, the
    logs). `ignore`: files written on a clock, not by progress (a worker's memory samples, every second)."""

    def total() -> tuple[int, int]:
        count = size = 0
        for root, _, names in os.walk(folder):
            for name in names:
                if name in ignore:
                    continue
                with contextlib.suppress(OSError):
                    size += os.stat(os.path.join(root, name)).st_size
                    count += 1
        return count, size

    return total


def cpu_seconds(process: Any, quantum: float = 1.0, include_self: bool = True) -> Any:
    """A signal: the CPU time used by a process (a pid, a Popen, or a callable returning a pid) and its children,
    counted in steps of `quantum` seconds. A working process advances it, however loaded the machine; a hung
    one (waiting on a lock, a pipe, a dead peer) does not. `quantum` above what a process spends while merely
    idling (an open page's timer) keeps that from counting as progress."""
    import psutil

    def used() -> int | None:
        pid = process() if callable(process) else getattr(process, "pid", process)
        if pid is None:
            return None
        parent = psutil.Process(int(pid))
        times = parent.cpu_times()
        total = times.children_user + times.children_system  # children already ended and waited for
        if include_self:
            total += times.user + times.system
        for child in parent.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child_times = child.cpu_times()
                total += child_times.user + child_times.system
        return int(total / quantum)

    return used


def children_working(folder: Path) -> tuple[Any, ...]:
    """The signals of work this test's child processes (a training worker, a CLI, torchrun's ranks) do in
    `folder`: its files grow, or the children use CPU time."""
    return (folder_growth(Path(folder)), cpu_seconds(os.getpid(), include_self=False))


def run_watched(
    command: list[str], *, stall: float = STALL_S, progress: tuple[Any, ...] = (), check: bool = False, **options: Any
) -> subprocess.CompletedProcess:
    """subprocess.run(command, capture_output=True, **options) that waits on progress: as long as the process
    writes output or uses CPU time (or `progress` advances); a process that stalls for `stall` seconds is killed
    with its children and the wait raises Stalled, with the output's tail."""
    import psutil

    text = bool(options.pop("text", False))
    options.pop("capture_output", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, **options)
        grown = lambda: (os.fstat(out.fileno()).st_size, os.fstat(err.fileno()).st_size)
        try:
            wait_until(
                lambda: process.poll() is not None,
                f"{' '.join(map(str, command))[:200]} to end",
                progress=(grown, cpu_seconds(process, quantum=0.2), *progress),
                stall=stall,
            )
        except Stalled as exc:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(process.pid).children(recursive=True):
                    child.kill()
            process.kill()
            process.wait()
            err.seek(0)
            raise Stalled(f"{exc}\n{err.read().decode(errors='replace')[-3000:]}") from None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if text:
        stdout, stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if check:
        result.check_returncode()
    return result
