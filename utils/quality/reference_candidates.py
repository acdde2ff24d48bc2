"""Which training clips may become a voice's reference: clean ones, of a length XTTS clones well from.

A clip is a candidate when it is a usable training row of the run's dataset report with no warning of its own (the
validation's: a peak at full scale, a low level, an odd row or text), its length is in the first of DURATION_TIERS
that gives enough of them (5-15 s; then 3-11 s; a dataset of short clips only: any of at least 1 s), and its audio
breaks none of the dataset check's limits (utils.quality.audio_measures.flag_outliers: clipping, very quiet, noisy,
long edge silences, far from the other candidates). The clean ones come cleanest first: by SNR, then longest.

Two steps, so that a run takes its rows while the dataset is as validated and decodes them only at its end:
`reference_pool` (one pass over the rows: a seeded sample of POOL_SIZE per tier, nothing decoded) and `clean_clips`
(the pool's clips measured, tier by tier, until enough are clean). The user's files are only read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from utils.audio.io import AudioError
from utils.quality.audio_measures import ClipMeasures, flag_outliers, measure_file

# (shortest, longest) seconds, in the order they are tried: the first tier that gives enough clean clips is used.
DURATION_TIERS = ((5.0, 15.0), (3.0, 11.0), (1.0, 30.0))
POOL_SIZE = 24  # clips per tier drawn for measuring (a seeded sample: a huge dataset costs one pass, not memory)


@dataclass(frozen=True)
class ReferenceClip:
    """A clean training clip: where it is, its length and its SNR (dB; None when it has no pauses to measure)."""

    path: str
    seconds: float
    snr_db: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "seconds": round(self.seconds, 2), "snr_db": _rounded(self.snr_db)}


def reference_pool(report: Any, seed: int, size: int = POOL_SIZE) -> list[list[tuple[str, float]]]:
    """Per tier of DURATION_TIERS, up to `size` (audio path, seconds) of the report's training rows without a warning,
    drawn with `seed`; a clip is in the first tier whose range holds it."""
    warned = {(p.csv_file, p.line) for p in report.problems if p.line > 0}
    rng = random.Random(seed)
    pools: list[list[tuple[str, float]]] = [[] for _ in DURATION_TIERS]
    seen = [0] * len(DURATION_TIERS)
    for row, seconds in report.iter_usable("train"):
        if row.warnings or (row.csv_file, row.line) in warned:
            continue
        tier = next((i for i, (low, high) in enumerate(DURATION_TIERS) if low <= seconds <= high), None)
        if tier is None:
            continue
        seen[tier] += 1
        if len(pools[tier]) < size:
            pools[tier].append((row.audio_location, float(seconds)))
        elif (slot := rng.randrange(seen[tier])) < size:
            pools[tier][slot] = (row.audio_location, float(seconds))
    return pools


def clean_clips(pool: list[list[tuple[str, float]]], wanted: int) -> tuple[list[ReferenceClip], list[str]]:
    """(the clean clips of the pool's tiers, cleanest first, tier after tier until `wanted` are found; what was left
    out and why, one line per clip)."""
    clean: list[ReferenceClip] = []
    left_out: list[str] = []
    for rows in pool:
        if len(clean) >= wanted:
            break
        measured: list[ClipMeasures] = []
        for path, _seconds in rows:
            try:
                measured.append(measure_file(path))
            except (AudioError, OSError) as exc:  # moved or unreadable since the check: another clip will do
                left_out.append(f"{path}: unreadable ({exc})")
        flagged: dict[int, list[str]] = {}
        for outlier in flag_outliers(measured):
            flagged.setdefault(outlier.index, []).extend(outlier.reasons)
        left_out += [f"{measured[i].file}: {'; '.join(reasons)}" for i, reasons in sorted(flagged.items())]
        tier = [ReferenceClip(str(m.file), m.duration, m.snr_db) for i, m in enumerate(measured) if i not in flagged]
        tier.sort(key=lambda c: (-(c.snr_db if c.snr_db is not None else -1e9), -c.seconds, c.path))
        clean += tier
    return clean, left_out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 1)
