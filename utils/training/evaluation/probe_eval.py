"""The probes and the voice measures of a scored evaluation (utils.training.evaluation.quality_eval speaks them).

Beside the held-out sentences, every scored evaluation speaks the probes of utils.quality.probes (a short text, a
question, an exclamation, a long sentence), in the same generation batch, each capped at 1.5 times the length the
speaker's own pace gives it (utils.quality.babble.SpeakingPace, fit on the training rows). Every clip, sentence or
probe, then gets the measures of utils.quality.babble (`stopped`, `duration_ratio`, `words_beyond`, `repeats`,
`babbled`) and its naturalness (utils.quality.naturalness, a predicted MOS); the evaluation gets its babble rate,
its mean naturalness and, once per run, the naturalness of the speaker's real clips (the ceiling the page shows).

Nothing here fails an evaluation: a probe the model cannot read (over its text-token limit, a script its tokenizer
lacks) is not generated and says why; a measure that cannot be taken is None with its reason.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from utils.quality import babble
from utils.quality.babble import SpeakingPace
from utils.quality.probes import PROBES, probes_for
from utils.quality.selection import combined_score

log = logging.getLogger(__name__)

PACE_ROWS = 20000  # training rows the pace is fit on (a pass over a huge CSV costs time, not memory)
FALLBACK_TEXTS = 200  # eval rows a language without a probe list builds its probes from


@dataclass(frozen=True)
class ProbeRow:
    """A probe to speak: its kind, its text as written and as the model reads it, and the seconds the speaker would
    take for it (`seconds`, as EvalSentence's, sets its token cap)."""

    kind: str
    text: str
    prepared: str
    seconds: float


def speaking_pace(report: Any) -> SpeakingPace | None:
    """The speaker's pace on the dataset's training rows (utils.quality.babble.SpeakingPace.fit)."""
    rows = ((row.text, seconds) for row, seconds in itertools.islice(report.iter_usable("train"), PACE_ROWS))
    return SpeakingPace.fit(rows)


def probe_rows(report: Any, frontend: Any, pace: SpeakingPace | None, sentences: Sequence[Any]) -> list[ProbeRow]:
    """The run's probes (its language's list, else built from the eval texts), through the run's text front end."""
    if pace is None:
        return []
    texts = [s.text for s in sentences]
    if not texts or frontend.language not in PROBES:
        texts += [row.text for row, _ in itertools.islice(report.iter_usable("eval"), FALLBACK_TEXTS)]
    return [
        ProbeRow(p.kind, p.text, frontend.apply(p.text), round(pace.expected_seconds(p.text), 3))
        for p in probes_for(frontend.language, texts)
    ]


def speakable(model: Any, probes: Sequence[ProbeRow], language: str) -> tuple[list[ProbeRow], dict[str, str]]:
    """(the probes the model can read, {kind: why not} for the others): a probe over the GPT's text-token limit, or
    one its tokenizer cannot encode, is left out of the batch rather than failing it."""
    kept, skipped = [], {}
    limit = int(model.args.gpt_max_text_tokens)
    lang = language.split("-")[0]
    for probe in probes:
        try:
            tokens = len(model.tokenizer.encode(probe.prepared.strip().lower(), lang=lang))
        except Exception as exc:  # noqa: BLE001 - a tokenizer without this script, a missing optional package
            skipped[probe.kind] = f"not generated: the tokenizer cannot read it ({type(exc).__name__}: {exc})"
            continue
        if tokens >= limit:
            skipped[probe.kind] = f"not generated: {tokens} text tokens, over the model's limit of {limit}"
            continue
        kept.append(probe)
    return kept, skipped


class Naturalness:
    """Predicted MOS of clips (utils.quality.naturalness), with the reason when it cannot be had."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.unavailable: str | None = None
        self.real: float | None = None  # the mean of the speaker's real clips, scored once
        self.real_reason: str | None = None

    def of_wav(self, wav: np.ndarray, rate: int) -> tuple[float | None, str]:
        from utils.quality.naturalness import NaturalnessUnavailable, naturalness_of_wav

        if self.unavailable:
            return None, self.unavailable
        try:
            return round(naturalness_of_wav(wav, rate, self.device), 3), ""
        except NaturalnessUnavailable as exc:
            self.unavailable = f"naturalness: {exc}"
            return None, self.unavailable
        except Exception as exc:  # noqa: BLE001 - a silent or too short clip, or anything else on one clip
            return None, f"naturalness: {exc}"

    def of_real_clips(self, files: Sequence[str]) -> tuple[float | None, str | None]:
        """The mean naturalness of the speaker's real clips, computed at the first call (the page's ceiling)."""
        if self.real is None and self.real_reason is None:
            from utils.audio.io import load_audio
            from utils.quality.naturalness import MOS_SAMPLE_RATE

            scores, why = [], []
            for file in files:
                try:
                    wav, rate = load_audio(file, MOS_SAMPLE_RATE)
                except Exception as exc:  # noqa: BLE001 - a moved or unreadable real clip is left out
                    why.append(f"{file}: {exc}")
                    continue
                score, reason = self.of_wav(wav, rate)
                (scores.append(score) if score is not None else why.append(reason))
            self.real = round(float(np.mean(scores)), 3) if scores else None
            self.real_reason = None if scores else f"naturalness_real: {why[0] if why else 'no real clip'}"
        return self.real, self.real_reason


def _clip_measures(clip: dict[str, Any], expected: float | None, stopped: bool | None, language: str) -> dict[str, Any]:
    """The babble measures of one scored clip (a ClipScore as a dict): stopped, expected seconds, duration ratio (the
    clip's own when it has one, against its real clip), words beyond the text, repeats, babbled."""
    ratio = clip.get("duration_ratio")
    if ratio is None and expected and clip.get("duration") is not None:
        ratio = round(clip["duration"] / expected, 4)
    transcript = clip.get("transcript")
    beyond = None if transcript is None else babble.words_beyond(clip["text"], transcript, language)
    repeated = None if transcript is None else babble.repeats(clip["text"], transcript, language)
    return {
        "stopped": stopped,
        "expected_seconds": None if expected is None else round(expected, 3),
        "duration_ratio": ratio,
        "words_beyond": beyond,
        "repeats": repeated,
        "babbled": babble.babbled(stopped, ratio),
    }


def _reason(clip: dict[str, Any], extra: str) -> str:
    return "; ".join(r for r in (clip.get("reason") or "", extra) if r)


def voice_measures(
    *,
    sentence_clips: list[dict[str, Any]],
    probe_clips: list[dict[str, Any]],
    sentences: Sequence[Any],
    probes: Sequence[ProbeRow],
    skipped: dict[str, str],
    stopped: Sequence[bool] | None,
    wavs: Sequence[np.ndarray],
    rate: int,
    language: str,
    naturalness: Naturalness,
) -> dict[str, Any]:
    """The fields a scored evaluation adds for its voice: `clips` (the sentences', with their measures), `probes`
    (each probe, spoken or not), `babble_rate`, `naturalness`, `naturalness_real` and the reasons of what is
    missing. `probes` are all the run's probes, `skipped` {kind: why} those not generated; `probe_clips`, `stopped` and
    `wavs` follow the batch: the sentences, then the generated probes."""
    flags = list(stopped) if stopped is not None else [None] * len(wavs)
    generated = [p for p in probes if p.kind not in skipped]
    rows = [*sentences, *generated]
    measured = []
    for index, (clip, row) in enumerate(zip([*sentence_clips, *probe_clips], rows, strict=True)):
        score, why = naturalness.of_wav(wavs[index], rate)
        measures = _clip_measures(clip, row.seconds, flags[index], language)
        measured.append({**clip, **measures, "naturalness": score, "reason": _reason(clip, why)})
    count = len(sentence_clips)
    spoken = {p.kind: clip for p, clip in zip(generated, measured[count:], strict=True)}
    probe_records = [{"kind": p.kind, **(spoken.get(p.kind) or not_generated(p, skipped))} for p in probes]
    natural = [c["naturalness"] for c in measured if c["naturalness"] is not None]
    real, real_reason = naturalness.of_real_clips([s.real_clip for s in sentences if s.real_clip])
    reasons = [r for r in (real_reason,) if r]
    if not natural:
        reasons.append(next((p for c in measured for p in c["reason"].split("; ") if p.startswith("naturalness:")), ""))
    return {
        "clips": measured[:count],
        "probes": probe_records,
        "babble_rate": _rounded(babble.babble_rate(c["babbled"] for c in measured)),
        "naturalness": _rounded(float(np.mean(natural)) if natural else None),
        "naturalness_real": real,
        "reasons": [r for r in reasons if r],
    }


def not_generated(probe: ProbeRow, skipped: dict[str, str]) -> dict[str, Any]:
    """A probe that was not generated: its text, every measure None, and why."""
    empty = dict.fromkeys(("file", "transcript", "cer", "wer", "similarity", "duration", "naturalness"))
    measures = dict.fromkeys(("stopped", "expected_seconds", "duration_ratio", "words_beyond", "repeats", "babbled"))
    return {"text": probe.text, **empty, **measures, "reason": skipped.get(probe.kind, "not generated")}


def _rounded(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 4)


def combined(metrics: dict[str, Any]) -> float | None:
    """The evaluation's combined score (utils.quality.selection.combined_score) with its naturalness and babble."""
    return combined_score(
        metrics.get("cer"),
        metrics.get("similarity"),
        naturalness=metrics.get("naturalness"),
        babble_rate=metrics.get("babble_rate"),
    )
