"""Time to the first audio byte and real-time factor of the speech server (utils.serving), streamed and whole, next to
`synthesize` (the Test tab's path: the whole clip, no server).

Starts the real standalone server (`python -m utils.serving FOLDER ...`) in a child process, calls it with the `openai`
client as a user would: `with_streaming_response.create` (streamed: the first chunk's arrival is the first audio byte)
and `create` (whole: the client has audio when the answer ends). Each case runs `--repeat` times after one cold call
(the model's load, reported apart); medians are printed. RTF is wall time / seconds of audio (below 1: faster than
real time). Without a folder, a tiny run is trained first (~30 s on a CPU); the tiny model speaks noise, so each
sentence is capped at `--max-audio-tokens` (~21.5 per second).

    python benchmarks/bench_speech_server.py                          # a tiny run, trained here
    python benchmarks/bench_speech_server.py output/my-run-2025... --max-audio-tokens 0   # a real run, uncapped
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common

ROOT = Path(__file__).resolve().parent.parent

TEXTS = {
    "1 sentence": "The quick brown fox jumps over the lazy dog.",
    "3 sentences": "We train the model on our own speech. It learns in a few minutes. Then it speaks any text.",
}
KEY = "bench-key"


def tiny_run(folder: Path) -> Path:
    from tests.helpers import write_dataset
    from utils.gpt_train import train_gpt

    result = train_gpt(
        version="tiny",
        language="en",
        train_csv=str(write_dataset(folder / "data", n=8)),
        output_path=str(folder / "output"),
        num_epochs=1,
        batch_size=4,
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=0,
        inference_search=0,
    )
    return Path(result.run_dir)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fresh_threads() -> int:
    """The torch threads of a fresh process (the server's, unless OMP_NUM_THREADS says otherwise)."""
    code = "import torch; print(torch.get_num_threads())"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


@contextlib.contextmanager
def server(
    folder: Path, max_tokens: int, chunk_tokens: int, threads: int, log: Path
) -> Iterator[tuple[str, list[str]]]:
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "utils.serving", str(folder), "--port", str(port), "--api-key", KEY]
    command += ["--chunk-tokens", str(chunk_tokens)] + (["--max-audio-tokens", str(max_tokens)] if max_tokens else [])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start:\n{log.read_text()[-2000:]}")
                try:
                    httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
                    break
                except httpx.TransportError:
                    time.sleep(0.3)
            yield f"http://127.0.0.1:{port}/v1", command
        finally:
            process.terminate()
            process.wait(60)


def seconds_of(data: bytes, response_format: str) -> float:
    import soundfile as sf

    if response_format == "pcm":
        return len(data) / 2 / 24000
    audio, rate = sf.read(io.BytesIO(data))
    return len(audio) / rate


def streamed(client, model: str, text: str, response_format: str) -> tuple[float, float, float]:
    """(first audio byte, total, audio seconds) of one streamed call."""
    start = time.perf_counter()
    first, data = None, b""
    with client.audio.speech.with_streaming_response.create(
        model=model, voice="default", input=text, response_format=response_format
    ) as response:
        for chunk in response.iter_bytes():
            first = first or time.perf_counter() - start
            data += chunk
    return first or 0.0, time.perf_counter() - start, seconds_of(data, response_format)


def whole(client, model: str, text: str, response_format: str) -> tuple[float, float, float]:
    start = time.perf_counter()
    data = client.audio.speech.create(model=model, voice="default", input=text, response_format=response_format).content
    total = time.perf_counter() - start
    return total, total, seconds_of(data, response_format)


def synthesized(run: Path, text: str, max_tokens: int) -> tuple[float, float, float]:
    """In-process synthesize of each sentence (as the server splits them), the whole clip at the end."""
    from utils.data.sentences import split_sentences
    from utils.model.inference import synthesize

    start = time.perf_counter()
    samples = 0
    for sentence in split_sentences(text):
        speech = synthesize(run, sentence, max_audio_tokens=max_tokens or None)
        samples += speech.wav.size
    total = time.perf_counter() - start
    return total, total, samples / speech.sample_rate


def row(name: str, text: str, cold: tuple[float, float, float], runs: list[tuple[float, float, float]]) -> str:
    first = statistics.median(r[0] for r in runs)
    total = statistics.median(r[1] for r in runs)
    audio = statistics.median(r[2] for r in runs)
    return (
        f"| {name:<28} | {text:<11} | {len(runs)} | {first:15.2f} | {total:9.2f} | {audio:9.2f} | {total / audio:3.1f} "
        f"| {cold[0]:14.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", help="A finished run folder (default: train a tiny run here).")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-audio-tokens", type=int, default=60, help="Per sentence; 0: the model's own limit.")
    parser.add_argument("--chunk-tokens", type=int, default=20)
    parser.add_argument("--format", default="wav", choices=["wav", "pcm", "mp3", "opus", "flac"])
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads of the server and of synthesize (default: torch's own)."
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import openai
    import torch

    work = Path(tempfile.mkdtemp(prefix="bench-speech-"))
    run = Path(args.folder).resolve() if args.folder else tiny_run(work)
    # The same threads on both sides (training leaves this process with one: coqui's dataset module sets it).
    threads = args.threads or fresh_threads()
    torch.set_num_threads(threads)
    load_before = common.load_average()
    lines = []
    with server(run, args.max_audio_tokens, args.chunk_tokens, threads, work / "server.log") as (url, command):
        client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=1800)
        for text_name, text in TEXTS.items():
            for name, call in (("server, streamed", streamed), ("server, whole (create)", whole)):
                cold = call(client, run.name, text, args.format)
                runs = [call(client, run.name, text, args.format) for _ in range(args.repeat)]
                lines.append(row(f"{name} ({args.format})", text_name, cold, runs))
        for text_name, text in TEXTS.items():
            cold = synthesized(run, text, args.max_audio_tokens)
            runs = [synthesized(run, text, args.max_audio_tokens) for _ in range(args.repeat)]
            lines.append(row("synthesize (in process)", text_name, cold, runs))
    print(f"speech server benchmark, {common.now()}")
    print(f"device: {common.machine()}; load average before {load_before}, after {common.load_average()}")
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"server: OMP_NUM_THREADS={threads} {shlex.join(command)}")
    print(f"model: {run}")
    print(
        f"first audio byte: streamed, the first chunk's arrival; whole, the answer's end (the client's first audio). "
        f"Medians of {args.repeat}; cold = the first call (model load)."
    )
    print(f"| {'case':<28} | {'text':<11} | n | first audio (s) | total (s) | audio (s) | RTF | cold first (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
