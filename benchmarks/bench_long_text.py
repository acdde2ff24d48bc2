"""What checking costs when a text is spoken sentence by sentence (utils.model.long_text through `synthesize`): seconds
per sentence with one try (nothing checked) against up to N tries, each heard by the bundled Whisper tiny.en.

The tiny model speaks noise, so every try of it fails its checks and is spoken N times: the checked rows are the worst
case (every sentence retried to the end); a real voice that passes on its first try pays one try and one transcription.
Each try is capped at `--max-audio-tokens` (~21.5 a second), a sentence's length. Also measured apart: one Whisper
transcription of a clip that long (SentenceCheck.score), the part of a checked try that is not generation. Medians of
`--repeat` calls after a cold one (the model's and Whisper's load, reported apart).

    python benchmarks/bench_long_text.py                     # a tiny run, trained here (~30 s on a CPU)
    python benchmarks/bench_long_text.py output/my-run-... --tries 3 --max-audio-tokens 0   # a real voice
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common
from bench_speech_server import tiny_run

# Eight sentences of a story, 47-74 characters each: eight pieces.
TEXT = (
    "The morning was quiet, and the river ran slow beside the old mill. "
    "Birds sang in the trees while the wind moved the reeds along the bank. "
    "Nobody knew where the road ended, but everyone had a story about it. "
    "At night the lamps were lit in every window of the village. "
    "The bells rang once from the tower on the hill. "
    "Children were called home from the fields before the dark came down. "
    "In the morning the travellers had gone, and the road was empty again. "
    "Only the river went on, slow and brown, past the mill and into the valley."
)


def spoken(run: Path, tries: int, max_tokens: int) -> tuple[float, object]:
    from utils.model.inference import synthesize

    start = time.perf_counter()
    speech = synthesize(run, TEXT, tries=tries, seed=1, max_audio_tokens=max_tokens or None)
    return time.perf_counter() - start, speech


def transcription_seconds(speech: object, repeat: int) -> float:
    """The median seconds of one check of a kept piece's clip (Whisper's transcription, CER, repeats)."""
    from utils.quality.sentence_check import UNKNOWN_PACE, SentenceCheck

    check = SentenceCheck("en", UNKNOWN_PACE)
    report = speech.sentences[0]
    rate = speech.sample_rate
    clip = speech.wav[int(report.start * rate) : int((report.start + report.seconds) * rate)]
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        check.score(report.text, clip, rate, True, 1, 1)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", help="A finished run folder (default: train a tiny run here).")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tries", type=int, default=3, help="Tries per sentence of the checked rows.")
    parser.add_argument("--max-audio-tokens", type=int, default=40, help="Per try; 0: the model's own limit.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load_before = common.load_average()
    run = Path(args.folder).resolve() if args.folder else tiny_run(Path(tempfile.mkdtemp(prefix="bench-long-")))
    rows = []
    for tries in (1, args.tries):
        cold, _ = spoken(run, tries, args.max_audio_tokens)
        calls = [spoken(run, tries, args.max_audio_tokens) for _ in range(args.repeat)]
        seconds = statistics.median(c[0] for c in calls)
        speech = calls[0][1]
        pieces = len(speech.sentences)
        made = sum(s.tries for s in speech.sentences)
        audio = len(speech.wav) / speech.sample_rate
        rows.append((tries, pieces, made, seconds, audio, cold))
    whisper = transcription_seconds(calls[0][1], args.repeat)
    print(f"long text benchmark, {common.now()}")
    print(f"device: {common.machine()}; load average before {load_before}, after {common.load_average()}")
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"model: {run}; each try capped at {args.max_audio_tokens or 'the model limit of'} audio tokens")
    print(f"medians of {args.repeat} calls; cold = the first call (model or Whisper load)")
    header = "| tries | pieces | tries made | total (s) | per sentence (s) | per try (s) | clip (s) | cold (s) |"
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    for tries, pieces, made, seconds, audio, cold in rows:
        print(
            f"| {tries} | {pieces} | {made} | {seconds:.2f} | {seconds / pieces:.2f} | {seconds / made:.2f} "
            f"| {audio:.2f} | {cold:.2f} |"
        )
    print(f"one check of a {rows[0][4] / rows[0][1]:.1f} s piece (Whisper tiny.en on the CPU, CER): {whisper:.2f} s")


if __name__ == "__main__":
    main()
