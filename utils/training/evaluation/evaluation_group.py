"""A scored evaluation of several parts: the run's voices (one per speaker, utils.training.evaluation.voices) and its
retention languages (utils.training.evaluation.retention), spoken at the same step and recorded as one "quality"
record.

`EvaluatorGroup` stands where a QualityEvaluator stands (CheckpointChoice, the sampling search): `generate` speaks
every part with the current weights, `finish` scores them. The record's scores are the voices' under the run's
`speaker_rule`: their mean, or the worst voice's value of each measure (highest CER, lowest similarity, lowest
combined...), so the best checkpoint and early stopping follow every speaker; each voice's own record is in `voices`,
each retention language's summary in `retention`. A run of one voice keeps its record as before, with `retention`
added.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.training.evaluation.quality_eval import QualityEvaluator
from utils.training.evaluation.retention import retention_summary

SPEAKER_RULES = ("mean", "worst")
# Measures where a higher value is worse (the worst voice's is its highest); the others, its lowest.
HIGHER_IS_WORSE = ("cer", "wer", "babble_rate")
VOICE_MEASURES = (
    "cer",
    "wer",
    "similarity",
    "duration_ratio",
    "combined",
    "naturalness",
    "naturalness_real",
    "babble_rate",
)


@dataclass
class GroupSpoken:
    """Every part of an evaluation spoken at `step` (each a quality_eval.Spoken); `folder` replaces evals/step_<N>/
    for all of them (a search's candidate folder)."""

    group: EvaluatorGroup
    step: int
    parts: dict[str, Any]
    loop_seconds: float
    folder: Path | None = None

    @property
    def error(self) -> str | None:
        return next((p.error for p in self.parts.values() if p.error), None)

    @property
    def generation_batch(self) -> int | None:
        return next(iter(self.parts.values())).generation_batch

    def finish(self) -> dict[str, Any]:
        scored = {
            key: (dataclasses.replace(part, folder=self.folder) if self.folder else part).finish()
            for key, part in self.parts.items()
        }
        return self.group.merged(scored, self.loop_seconds)


class EvaluatorGroup:
    """The run's voices and retention languages, spoken and scored together (see the module docstring)."""

    def __init__(
        self,
        voices: dict[str, QualityEvaluator],
        retention: dict[str, QualityEvaluator] | None = None,
        speaker_rule: str = "mean",
    ) -> None:
        if not voices:
            raise ValueError("An evaluation needs a voice to speak with.")
        if speaker_rule not in SPEAKER_RULES:
            raise ValueError(f"speaker_rule must be one of {', '.join(SPEAKER_RULES)}; got {speaker_rule!r}.")
        self.voices = voices
        self.retention = retention or {}
        self.speaker_rule = speaker_rule
        self.main = next(iter(voices.values()))

    @property
    def several_voices(self) -> bool:
        return len(self.voices) > 1

    # What the reference choice and the run's end read of the run's (first) voice.
    @property
    def sentences(self) -> list[Any]:
        return self.main.sentences

    @property
    def probes(self) -> list[Any]:
        return self.main.probes

    @property
    def reference_wav(self) -> Any:
        return self.main.reference_wav

    @reference_wav.setter
    def reference_wav(self, clips: Any) -> None:
        """The voice's clips chosen at the end of a run of one voice: its retention parts speak with them too."""
        for evaluator in (self.main, *self.retention.values()):
            evaluator.reference_wav = clips

    def parts(self, retention: bool = True) -> dict[str, QualityEvaluator]:
        return {
            **{f"voice:{name}": evaluator for name, evaluator in self.voices.items()},
            **{f"retention:{language}": e for language, e in self.retention.items() if retention},
        }

    def generate(
        self, xtts: Any, step: int, sampling: dict[str, Any] | None = None, reference: Any = None
    ) -> GroupSpoken:
        """Every part spoken with the current weights; `reference` (a reference search's candidate) speaks for the run's
        one voice. A search's candidate (step -1: sampling settings or reference clips tried at the end) is the voice
        alone: the retention languages are the evaluations' measure, not the search's."""
        spoken = {}
        for key, evaluator in self.parts(retention=step >= 0).items():
            given = reference if not self.several_voices else None
            spoken[key] = evaluator.generate(xtts, step, sampling, given)
        return GroupSpoken(self, step, spoken, sum(p.loop_seconds for p in spoken.values()))

    def evaluate(self, xtts: Any, step: int) -> dict[str, Any]:
        return self.generate(xtts, step).finish()

    def merged(self, scored: dict[str, dict[str, Any]], loop_seconds: float) -> dict[str, Any]:
        """One quality record's fields from the parts' (see the module docstring)."""
        voices = {key.split(":", 1)[1]: value for key, value in scored.items() if key.startswith("voice:")}
        retention = {
            key.split(":", 1)[1]: retention_summary(value)
            for key, value in scored.items()
            if key.startswith("retention:")
        }
        record = self._over_voices(voices) if self.several_voices else dict(next(iter(voices.values())))
        record["seconds"] = round(sum(v.get("seconds") or 0 for v in scored.values()), 2)
        record["loop_seconds"] = round(loop_seconds, 2)
        if retention:
            record["retention"] = retention
        return record

    def _over_voices(self, voices: dict[str, dict[str, Any]]) -> dict[str, Any]:
        record: dict[str, Any] = {
            "files": [f for v in voices.values() for f in v.get("files") or []],
            "texts": [t for v in voices.values() for t in v.get("texts") or []],
            "clips": [{**c, "voice": name} for name, v in voices.items() for c in v.get("clips") or []],
            "probes": [{**p, "voice": name} for name, v in voices.items() for p in v.get("probes") or []],
            "reasons": [f"{name}: {r}" for name, v in voices.items() for r in v.get("reasons") or []],
            "generation_batch": next(iter(voices.values())).get("generation_batch"),
            "speaker_rule": self.speaker_rule,
        }
        for measure in VOICE_MEASURES:
            values = [v.get(measure) for v in voices.values() if v.get(measure) is not None]
            record[measure] = over_voices(measure, values, self.speaker_rule) if len(values) == len(voices) else None
            if values and len(values) < len(voices):
                record["reasons"].append(f"{measure}: not measured for every voice")
        keep = (*VOICE_MEASURES, "files", "texts", "probes", "reasons")
        record["voices"] = {name: {k: v.get(k) for k in keep} for name, v in voices.items()}
        return record


def over_voices(measure: str, values: list[float], rule: str) -> float:
    """The voices' values of one measure under the speaker rule: their mean, or the worst one."""
    if rule == "worst" and measure != "duration_ratio":
        return max(values) if measure in HIGHER_IS_WORSE else min(values)
    return round(sum(values) / len(values), 4)
