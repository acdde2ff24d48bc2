"""A fine-tuned voice beside its base model: the same text, reference clip and seed, both scored.

    from utils.quality.asr import get_transcriber
    from utils.model.compare import compare_with_base

    result = compare_with_base("output/my-run", "Hello, this is my voice.", seed=3,
                               transcriber=get_transcriber("small"))
    for side in (result.finetuned, result.base):
        print(side.label, side.score.cer, side.score.similarity, side.reason)
        # side.sample_rate, side.wav: play them (IPython.display.Audio(side.wav, rate=side.sample_rate))

The base model is the version the run was trained from (ready/finetune.json), loaded from the models
folder. Scores are those of :mod:`utils.quality.scoring`: CER/WER of a Whisper transcript (without a
transcriber they are None and say why) and the similarity of each clip to the reference clip's speaker.
A side that cannot speak (say, a base model without the run's new language) has no audio and a reason;
the other side is still produced.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utils.data.transcription import Transcriber
from utils.model.ready import read_finetune_info
from utils.model.references import reference_paths, voice_references
from utils.quality.scoring import ClipScore, score_clips


@dataclass
class SpokenClip:
    label: str
    file: Path | None = None
    sample_rate: int = 0
    wav: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    score: ClipScore | None = None
    reason: str = ""  # why there is no audio


@dataclass
class Comparison:
    text: str
    seed: int
    reference: Path
    finetuned: SpokenClip
    base: SpokenClip
    score_reasons: list[str] = field(default_factory=list)

    def table(self) -> list[dict[str, Any]]:
        """One row per side: model, CER, WER, similarity, seconds, transcript and why values are missing."""
        rows = []
        for side in (self.finetuned, self.base):
            score = side.score or ClipScore(file="", text=self.text)
            # A typed text has no real clip: the missing duration ratio needs no note.
            notes = [p for p in score.reason.split("; ") if p and not p.startswith("duration_ratio:")]
            rows.append(
                {
                    "model": side.label,
                    "cer": score.cer,
                    "wer": score.wer,
                    "similarity": score.similarity,
                    "seconds": score.duration,
                    "transcript": score.transcript or "",
                    "note": side.reason or "; ".join(notes),
                }
            )
        return rows


def speak_side(label: str, model_path: Path, text: str, target: Path, options: dict[str, Any]) -> SpokenClip:
    """One side of a comparison spoken into `target` (or why it could not be)."""
    from utils.model.inference import synthesize

    try:
        rate, wav = synthesize(model_path, text, output_wav=target, **options)
    except Exception as exc:  # noqa: BLE001 - one side failing leaves the other to compare
        return SpokenClip(label, reason=f"{label} could not speak it: {type(exc).__name__}: {exc}")
    return SpokenClip(label, target, rate, wav)


def compare_with_base(
    model_path: str | os.PathLike,
    text: str,
    *,
    language: str | None = None,
    reference_wav: str | os.PathLike | list[str | os.PathLike] | None = None,
    seed: int = 1,
    transcriber: Transcriber | None = None,
    whisper_model: str | None = None,
    output_dir: str | os.PathLike | None = None,
    models_dir: str | os.PathLike | None = None,
    **sampling: Any,
) -> Comparison:
    """Speak `text` with a run's fine-tuned model and with its base model (same reference, seed and sampling
    settings: temperature, top_k, top_p, max_audio_tokens... as `utils.model.inference.synthesize` takes them),
    and score both. The transcripts come from `transcriber`, else from `whisper_model` (a name or folder, loaded
    once per process on the CPU). Clips are written to `output_dir` (a new temporary folder when None)."""
    from utils.model.base_models import ensure_base_model
    from utils.model.inference import find_ready_dir

    if not text or not text.strip():
        raise ValueError("Text is empty: type what the voices should say.")
    ready = find_ready_dir(model_path)
    info = read_finetune_info(ready)
    references = reference_paths(reference_wav) or voice_references(ready)  # one clip or several
    reference = references[0]
    language = language or info.get("language") or "en"
    folder = Path(output_dir) if output_dir else Path(tempfile.mkdtemp(prefix="xtts-compare-"))
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{ready.parent.name}-seed{seed}"
    options = {**sampling, "language": language, "reference_wav": references, "seed": int(seed)}
    finetuned = speak_side("fine-tuned", ready, text, folder / f"{stem}-finetuned.wav", options)
    version = info.get("base_version")
    if not version:
        base = SpokenClip("base", reason=f"{ready}/finetune.json does not name its base model version")
    else:
        base = speak_side(
            f"base {version}", ensure_base_model(version, models_dir).folder, text, folder / f"{stem}-base.wav", options
        )
    why = None
    if transcriber is None and whisper_model:
        from utils.quality.asr import transcriber_or_reason

        transcriber, why = transcriber_or_reason(whisper_model, device="cpu", compute_type="int8", language=language)
    spoken = [side for side in (finetuned, base) if side.file is not None]
    report = score_clips(
        [(side.file, text.strip()) for side in spoken],
        language=language,
        reference_clips=references,
        transcriber=transcriber,
        no_transcriber_reason=why,
    )
    for side, score in zip(spoken, report.clips, strict=True):
        side.score = score
    reasons = [r for r in report.reasons if not r.startswith("duration_ratio:")]  # no real clip of a typed text
    return Comparison(text.strip(), int(seed), reference, finetuned, base, reasons)
