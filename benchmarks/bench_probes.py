"""What the voice measures cost: one scored evaluation with and without its four probes, and a tiny run's baseline
and search for sampling settings.

A/B: the tiny model speaks `--sentences` held-out sentences (real clips of `--seconds`), alone and with the four
English probes, in one batch, and the clips are decoded and scored as a run scores them (Whisper tiny.en, bundled;
Resemblyzer; DistillMOS); the two are timed alternately, the median of `--rounds` shown. "loop" is the generation
(what the training loop waits for), "scoring" decoding and scoring (in the background under best_by eval_loss).
`--cap` fixes each clip's token cap (the tests' 10 tokens); 0 caps each at 1.5 times its expected length, as a
run does (the tiny model never stops, so every clip runs to its cap: the worst case, the long probe ~20 s).
`--run` then trains a tiny run (1 epoch) and prints its step-0 baseline, its evaluation and its search for sampling
settings, from its records.

    python benchmarks/bench_probes.py --rounds 3 --cap 10 --run
    python benchmarks/bench_probes.py --rounds 1 --cap 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common

from tests.helpers import SENTENCES, write_clip, write_dataset
from tests.training.model_helpers import build_model
from utils.files import read_jsonl
from utils.model.base_models import ensure_base_model
from utils.quality.asr import bundled_whisper_dir
from utils.quality.babble import SpeakingPace
from utils.quality.probes import probes_for
from utils.text.frontend import TextFrontEnd
from utils.training.evaluation.probe_eval import ProbeRow
from utils.training.evaluation.quality_eval import EvalSentence, QualityEvaluator


def evaluators(folder: Path, sentences: int, seconds: float, cap: int) -> dict[str, QualityEvaluator]:
    frontend = TextFrontEnd("en")
    rows = []
    for i in range(sentences):
        real = write_clip(folder / f"real_{i}.wav", seconds, seed=i)
        rows.append(EvalSentence(SENTENCES[i], frontend.apply(SENTENCES[i]), str(real), seconds))
    pace = SpeakingPace(15.0, 0.2)
    probes = [ProbeRow(p.kind, p.text, frontend.apply(p.text), pace.expected_seconds(p.text)) for p in probes_for("en")]
    reference = write_clip(folder / "reference.wav", 3.0, seed=9)
    common_args = dict(seed=1, whisper_model=str(bundled_whisper_dir()), max_audio_tokens=cap)
    return {
        "sentences": QualityEvaluator(rows, folder / "a", reference, "en", **common_args),
        "sentences + 4 probes": QualityEvaluator(rows, folder / "b", reference, "en", probes=probes, **common_args),
    }


def timed(evaluator: QualityEvaluator, xtts, step: int) -> tuple[float, float, int]:
    started = time.perf_counter()
    spoken = evaluator.generate(xtts, step)
    loop = time.perf_counter() - started
    record = spoken.finish()
    return loop, time.perf_counter() - started - loop, len(record["files"]) + len(record.get("probes") or [])


def ab(args: argparse.Namespace, folder: Path) -> None:
    model, _ = build_model(ensure_base_model("tiny"), folder)
    pairs = evaluators(folder, args.sentences, args.seconds, args.cap)
    for evaluator in pairs.values():
        timed(evaluator, model.xtts, 0)  # warm: Whisper, Resemblyzer and DistillMOS loaded once per process
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in pairs}
    for round_ in range(args.rounds):
        for name, evaluator in pairs.items():
            results[name].append(timed(evaluator, model.xtts, round_ + 1))
    cap = f"cap {args.cap} tokens" if args.cap else "cap 1.5x expected length"
    print(f"\n### One scored evaluation, tiny model, {args.sentences} sentences of {args.seconds:g} s, {cap}")
    print(f"{common.machine()}, load {common.load_average()}, median of {args.rounds} round(s)\n")
    print("| batch | clips | loop (generation) s | scoring (decode + score) s | total s |")
    print("|---|---|---|---|---|")
    for name, rows in results.items():
        loop = statistics.median(r[0] for r in rows)
        scoring = statistics.median(r[1] for r in rows)
        print(f"| {name} | {rows[0][2]} | {loop:.2f} | {scoring:.2f} | {loop + scoring:.2f} |")


def tiny_run(folder: Path) -> None:
    from utils.gpt_train import train_gpt

    result = train_gpt(
        version="tiny",
        language="en",
        train_csv=str(write_dataset(folder / "data", n=12)),
        output_path=str(folder / "out"),
        num_epochs=1,
        batch_size=4,
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        print_step=50,
        quality_eval=2,
        quality_max_audio_tokens=10,
        quality_eval_share=1.0,
        inference_search=5,
        whisper_model=str(bundled_whisper_dir()),
    )
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    phases = run["timings"]["phases"]
    title = "A tiny run (1 epoch of 3 steps, 2 sentences + 4 probes, cap 10 tokens)"
    print(f"\n### {title}, load {common.load_average()}\n")
    print("| what | loop s | whole s |")
    print("|---|---|---|")
    for record in read_jsonl(Path(result.run_dir) / "metrics.jsonl"):
        if record["type"] == "quality":
            name = "baseline (step 0)" if record.get("baseline") else f"evaluation (step {record['step']})"
            print(f"| {name} | {record.get('loop_seconds')} | {record['seconds']} |")
    search = phases.get("inference_search", {}).get("seconds")
    tried = len(json.loads((Path(result.ready_dir) / "finetune.json").read_text())["inference"]["candidates"])
    print(f"| search, {tried} candidates | - | {search} |")
    print(f"| the whole run (wall) | - | {run['timings']['wall_s']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each sentence's real clip")
    parser.add_argument("--cap", type=int, default=10, help="token cap of every clip; 0: 1.5x its expected length")
    parser.add_argument("--run", action="store_true", help="also a tiny run: baseline, evaluation, search")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as tmp:
        ab(args, Path(tmp))
        if args.run:
            tiny_run(Path(tmp) / "run")


if __name__ == "__main__":
    main()
