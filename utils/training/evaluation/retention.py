"""Whether the base model's other languages survive the run: retention probes.

A fine-tune on one language can make the model forget the others. At every scored evaluation (step 0 included) the
run also speaks a few fixed sentences in languages it does not train, with its own voice, and scores them as any clip:
CER of a Whisper transcript (where the recogniser has the language), naturalness, whether each clip stopped. The
verdict and the page compare them with step 0 ("English CER 6% -> 19% since step 0"). The cure, replaying rows of
the base language, is a second dataset at a share of each epoch (utils.data.mix).

`retention_languages` (TrainArguments): comma separated codes, "" for none, or "auto": English, or the first of the
base model's languages the run does not train (Spanish for an English run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.quality.probes import PROBES
from utils.quality.retention_languages import retention_languages  # noqa: F401 - the run's reads it here
from utils.text.frontend import TextFrontEnd
from utils.text.languages import language_name
from utils.training.evaluation.quality_eval import EvalSentence, QualityEvaluator

# The probe kinds (utils.quality.probes) spoken as retention sentences: a question and an exclamation, every
# language's list has them, short enough to cost little.
SENTENCE_KINDS = (1, 2)
CHARACTERS_PER_SECOND = 14.0  # the pace of a sentence with no real clip, when the speaker's is not known
RETENTION_PREFIX = "retention_"


def retention_sentences(language: str, pace: Any = None) -> list[EvalSentence]:
    """The fixed sentences of `language`, as the model reads them; `seconds` from the speaker's pace (or a default)."""
    frontend = TextFrontEnd(language)
    texts = [PROBES[language][i] for i in SENTENCE_KINDS]
    return [EvalSentence(text, frontend.apply(text), "", _seconds(text, pace)) for text in texts]


def _seconds(text: str, pace: Any) -> float:
    if pace is not None:
        try:
            return round(float(pace.expected_seconds(text)), 3)
        except Exception:  # noqa: BLE001 - a pace fit on another script: the default pace
            pass
    return round(max(1.0, len(text) / CHARACTERS_PER_SECOND), 3)


def retention_evaluators(
    languages: list[str],
    run_dir: Path,
    reference_wav: Any,
    reference_clips: list[str],
    pace: Any,
    **keywords: Any,
) -> dict[str, QualityEvaluator]:
    """One evaluator per language: its sentences spoken with the run's voice, into evals/step_<N>/retention_<lang>/;
    similarity measured against the voice's real clips (does it keep its identity in that language)."""
    return {
        language: QualityEvaluator(
            retention_sentences(language, pace),
            run_dir,
            reference_wav,
            language,
            probes=[],
            reference_clips=reference_clips,
            subfolder=f"{RETENTION_PREFIX}{language}",
            **keywords,
        )
        for language in languages
    }


RETENTION_SCORES = ("cer", "wer", "similarity", "naturalness", "babble_rate")


def retention_summary(quality: dict[str, Any]) -> dict[str, Any]:
    """What a quality record keeps of one retention language: its scores, how many clips stopped, its files and the
    reasons of what is missing."""
    clips = quality.get("clips") or []
    stopped = [c.get("stopped") for c in clips if c.get("stopped") is not None]
    return {
        **{name: quality.get(name) for name in RETENTION_SCORES},
        "stopped": sum(bool(s) for s in stopped) if stopped else None,
        "clips": len(clips),
        "files": quality.get("files") or [],
        "texts": quality.get("texts") or [],
        "reasons": [
            r for r in quality.get("reasons") or [] if not r.startswith(("naturalness_real", "duration_ratio"))
        ],
    }


def retention_changes(baseline: dict[str, Any] | None, latest: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each retention language's CER and naturalness at step 0 and at `latest`, with a sentence: "English CER 6% ->
    19% since step 0". Records without retention give nothing."""
    before = (baseline or {}).get("retention") or {}
    after = (latest or {}).get("retention") or {}
    changes = []
    for language, now in after.items():
        then = before.get(language) or {}
        parts = []
        if now.get("cer") is not None and then.get("cer") is not None:
            parts.append(f"CER {then['cer']:.0%} -> {now['cer']:.0%}")
        elif now.get("cer") is not None:
            parts.append(f"CER {now['cer']:.0%}")
        if now.get("naturalness") is not None and then.get("naturalness") is not None:
            parts.append(f"naturalness {then['naturalness']:.2f} -> {now['naturalness']:.2f}")
        if now.get("stopped") is not None:
            parts.append(f"{now['stopped']} of {now['clips']} clips stopped")
        worse = now.get("cer") is not None and then.get("cer") is not None and now["cer"] > then["cer"] + 0.05
        text = f"{language_name(language)} " + (", ".join(parts) or "not scored") + (" since step 0" if then else "")
        changes.append({"language": language, "before": then, "after": now, "worse": worse, "text": text})
    return changes
