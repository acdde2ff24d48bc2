"""Benchmark utils.data.csv_index on a large generated metadata CSV (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_csv_index.py [--rows 1000000] [--out DIR] [--accesses 100000]

Writes a pipe-separated ``audio_file|text|speaker_name`` CSV of N realistic rows (streamed to
disk in batches, so generating it does not hold the file in memory), then reports time, rows/s
and memory for: building the index, reloading it from the cache, and random ``row_text`` calls.

Memory is reported three ways: the peak RSS seen by a 2 ms psutil sampler during the phase, that
peak minus the baseline RSS taken after generation (the number that shows memory stays bounded:
it should be about one read chunk plus 8 bytes per row, not the file size), and the process's
lifetime ``resource.getrusage`` max RSS (monotonic, so it only moves when a phase sets a record).
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from utils.data.csv_index import CsvRowIndex

MIB = 1024 * 1024
WORDS = [
    "the",
    "voice",
    "model",
    "learns",
    "from",
    "clear",
    "recordings",
    "of",
    "natural",
    "speech",
    "and",
    "short",
    "pauses",
    "between",
    "sentences",
    "so",
    "that",
    "every",
    "clip",
    "has",
    "one",
    "speaker",
    "reading",
    "a",
    "line",
    "of",
    "text",
    "at",
    "an",
    "even",
    "pace",
    "while",
    "the",
    "microphone",
    "stays",
    "close",
    "and",
    "the",
    "room",
    "stays",
    "quiet",
    "during",
    "the",
    "whole",
    "session",
    "today",
]


def maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024  # Linux reports KiB, macOS bytes


def sentence(rng: random.Random) -> str:
    target = rng.randint(40, 120)
    words: list[str] = []
    length = 0
    while length < target:
        w = rng.choice(WORDS)
        words.append(w)
        length += len(w) + 1
    text = " ".join(words)[:target].rstrip()
    return text[0].upper() + text[1:] + rng.choice(".?!")


def generate(path: Path, rows: int, seed: int = 0, batch: int = 10_000) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("audio_file|text|speaker_name\n")
        for first in range(0, rows, batch):
            # One batch of lines at a time: memory stays at one batch whatever N is.
            f.write(
                "".join(
                    f"wavs/clip_{i:07d}.wav|{sentence(rng)}|speaker_{i % 8}\n"
                    for i in range(first, min(rows, first + batch))
                )
            )


class RssSampler:
    """Samples this process's RSS every few ms in a thread and keeps the peak."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.proc = psutil.Process()
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.interval_s)

    def __enter__(self) -> RssSampler:
        self.start_rss = self.proc.memory_info().rss
        self.peak = self.start_rss
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def measure(name, fn, count, baseline, results):
    gc.collect()
    with RssSampler() as s:
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
    results.append(
        (name, dt, count / dt if dt > 0 else float("inf"), s.start_rss, s.peak, s.peak - baseline, maxrss_bytes())
    )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--accesses", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=None, help="folder for the CSV and cache (default: a temp dir)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_csv_index_") as tmp:
        root = args.out if args.out is not None else Path(tmp)
        data_dir, cache_dir = root / "data", root / "cache"
        data_dir.mkdir(parents=True, exist_ok=True)
        csv = data_dir / f"metadata_{args.rows}.csv"

        t0 = time.perf_counter()
        generate(csv, args.rows)
        gen_s = time.perf_counter() - t0
        gc.collect()
        baseline = psutil.Process().memory_info().rss
        # A leftover cache from an earlier --out run would make the "build" phase a reload.
        for old in cache_dir.glob("*.rowidx.*") if cache_dir.exists() else ():
            old.unlink()

        results: list[tuple] = []
        idx = measure("index build", lambda: CsvRowIndex.open(csv, cache_dir), args.rows, baseline, results)
        assert idx.built_now and len(idx) == args.rows
        idx.close()
        del idx

        idx = measure("cached reload", lambda: CsvRowIndex.open(csv, cache_dir), args.rows, baseline, results)
        assert not idx.built_now

        rng = random.Random(1)
        picks = [rng.randrange(len(idx)) for _ in range(args.accesses)]

        def access():
            n = 0
            for i in picks:
                n += len(idx.row_text(i))
            return n

        measure(f"{args.accesses:,} random row_text", access, args.accesses, baseline, results)
        # Spot-check that what we timed is right.
        assert idx.row_text(picks[0]).startswith(f"wavs/clip_{picks[0]:07d}.wav|")
        index_size = idx.cache_path.stat().st_size
        idx.close()

        print(
            f"rows: {args.rows:,}   csv: {csv.stat().st_size / MIB:,.1f} MiB   "
            f"index: {index_size / MIB:,.1f} MiB   generated in {gen_s:.1f} s (streamed)"
        )
        print(f"baseline RSS after generating: {baseline / MIB:,.1f} MiB")
        head = ("phase", "seconds", "rows/s", "RSS start", "peak RSS", "peak-baseline", "ru_maxrss")
        print(f"{head[0]:<26}{head[1]:>9}{head[2]:>14}{head[3]:>11}{head[4]:>10}{head[5]:>15}{head[6]:>11}")
        for name, dt, rate, start, peak, delta, maxrss in results:
            print(
                f"{name:<26}{dt:>9.3f}{rate:>14,.0f}{start / MIB:>10.1f}M{peak / MIB:>9.1f}M"
                f"{delta / MIB:>14.1f}M{maxrss / MIB:>10.1f}M"
            )


if __name__ == "__main__":
    main()
