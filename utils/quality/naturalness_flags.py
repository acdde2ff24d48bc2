"""Clips that sound wrong although they match their text: naturalness (predicted MOS) far below the rest of the
dataset, or under a threshold the user set, flagged on the dataset check's rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

# As the audio measures' outliers (Iglewicz and Hoaglin's modified z): below -3.5 with at least 8 scored clips.
ROBUST_Z = 3.5
MIN_SCORED = 8
MAD_FLOOR = 0.15  # MOS: a very uniform dataset does not flag differences nobody hears


def flag_naturalness(rows: Sequence[Any], threshold: float | None) -> tuple[float | None, str]:
    """Add problems to the rows (RowCheck: .naturalness, .problems, .suggest_exclude) scoring under `threshold`
    or far below the dataset's median; return (the median, a suggestion naming the far-below clips, or "")."""
    scored = [row for row in rows if row.naturalness is not None]
    if not scored:
        return None, ""
    values = np.array([row.naturalness for row in scored], dtype=np.float64)
    median = float(np.median(values))
    mad = max(float(np.median(np.abs(values - median))), MAD_FLOOR)
    low = []
    for row in scored:
        if threshold is not None and row.naturalness < threshold:
            row.problems.append(
                f"naturalness {row.naturalness:.2f} (predicted MOS) under the threshold {threshold:.2f}"
            )
            row.suggest_exclude = True
        elif len(scored) >= MIN_SCORED and 0.6745 * (row.naturalness - median) / mad < -ROBUST_Z:
            row.problems.append(f"naturalness {row.naturalness:.2f} far below the dataset's median {median:.2f}")
            low.append(row.naturalness)
    if not low:
        return median, ""
    above = math.floor(max(low) * 10 + 1) / 10  # the next tenth above the best of them
    return median, (
        f"{len(low)} clip(s) score far below the rest on naturalness (MOS {min(low):.2f} to {max(low):.2f}; the "
        f"dataset's median {median:.2f}): listen to them, and set the naturalness threshold to {above:.1f} to "
        "exclude them."
    )
