"""What a run's scored evaluations speak, built once when the run starts: its voice (or one per speaker,
utils.training.evaluation.voices), their probes, and the retention languages (utils.training.evaluation.retention),
as one EvaluatorGroup; and what run.json `quality` records of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.quality.retention_languages import retention_languages
from utils.training.evaluation.evaluation_group import EvaluatorGroup
from utils.training.evaluation.probe_eval import probe_rows, speaking_pace
from utils.training.evaluation.quality_eval import QualityEvaluator, pick_eval_sentences
from utils.training.evaluation.retention import retention_evaluators
from utils.training.evaluation.voices import VOICES_DIR, SpeakerRows
from utils.training.recording.records import QualitySetup


def own_language_rows(report: Any, split: str) -> Any:
    """(row, seconds) of `split` in the run's own language (a run of several datasets in several languages)."""
    return (
        (row, seconds)
        for row, seconds in report.iter_usable(split)
        if report.language_of(row.csv_file) == report.language
    )


def run_evaluator(
    args: Any,
    report: Any,
    frontend: Any,
    run_dir: Path,
    reference_wav: Path,
    generation_batch: int = 0,
    voices: list[SpeakerRows] | None = None,
) -> tuple[EvaluatorGroup | None, QualitySetup | None]:
    """(the evaluator, run.json `quality`); no evaluator when quality_eval is 0 or no held-out row can be spoken.
    `voices`: the run's voices (two or more speakers; their reference clips already written), else one voice."""
    if args.quality_eval <= 0:
        return None, None
    keywords = {
        "seed": args.seed,
        "whisper_model": args.whisper_model,
        "max_audio_tokens": args.quality_max_audio_tokens,
        "generation_batch": generation_batch,
    }
    pace = speaking_pace(report)
    evaluators: dict[str, QualityEvaluator] = {}
    voice_setup: dict[str, Any] = {}
    if voices:
        for voice in voices:
            spoken_as = frontend.for_language(voice.language)
            rows = voice.eval_rows_in(voice.language)  # spoken in its language: rows of another are not
            sentences = pick_eval_sentences(report, spoken_as, args.quality_eval, args.seed, rows=rows)
            probes = probe_rows(report, spoken_as, pace, sentences)
            evaluators[voice.name] = QualityEvaluator(
                sentences,
                run_dir,
                run_dir / VOICES_DIR / f"{voice.file_name}.wav",
                voice.language,
                probes=probes,
                subfolder=f"{VOICES_DIR}/{voice.file_name}",
                **keywords,
            )
            voice_setup[voice.name] = {"language": voice.language, "sentences": [s.text for s in sentences]}
    else:
        # Several datasets of one voice: the held-out rows of the run's language (they are spoken in it).
        rows = None if not report.file_languages else own_language_rows(report, "eval")
        sentences = pick_eval_sentences(report, frontend, args.quality_eval, args.seed, rows=rows)
        if not sentences:
            return None, None
        evaluators[""] = QualityEvaluator(
            sentences,
            run_dir,
            reference_wav,
            frontend.language,
            probes=probe_rows(report, frontend, pace, sentences),
            **keywords,
        )
    main = next(iter(evaluators.values()))
    trained = sorted(set(report.file_languages.values()) | {report.language})
    retention = retention_evaluators(
        retention_languages(args.retention_languages, trained),
        run_dir,
        main.reference_wav,
        main.reference_clips,
        pace,
        **keywords,
    )
    group = EvaluatorGroup(evaluators, retention, args.speaker_rule)
    every = [e for e in evaluators.values()]
    setup = QualitySetup(
        sentences=[s.text for e in every for s in e.sentences],
        real_clips=[s.real_clip for e in every for s in e.sentences],
        whisper_model=args.whisper_model,
        seed=args.seed,
        probes=[p.text for e in every for p in e.probes],
        pace=pace.to_dict() if pace else None,
        generation_batch=generation_batch or None,
        voices=voice_setup or None,
        speaker_rule=args.speaker_rule if voice_setup else None,
        retention={language: [s.text for s in e.sentences] for language, e in retention.items()} or None,
    )
    return group, setup
