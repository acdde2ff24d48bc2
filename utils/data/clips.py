"""Clips from timed words: sentence-like pieces of 1-11 s cut on word boundaries, padded into the pauses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from utils.data.sentences import ends_sentence, join_words
from utils.data.transcription import Word


@dataclass(frozen=True)
class Clip:
    """Samples ``[start, end)`` of the audio given to :func:`segments_to_clips`, and its text."""

    start: int
    end: int
    text: str


def segments_to_clips(
    wav: np.ndarray,
    sr: int,
    words: Sequence[Word],
    *,
    min_clip_s: float = 1.0,
    max_clip_s: float = 11.0,
    pad_s: float = 0.1,
) -> list[Clip]:
    """Group timed words into sentence-like clips of ``min_clip_s..max_clip_s`` seconds (padded).

    A word ending a sentence closes the clip once the clip's words span at least ``min_clip_s``.
    When the next word would make the padded clip longer than ``max_clip_s``, the clip is closed
    at its last sentence end, or failing that at the last word that fits. Clips shorter than
    ``min_clip_s`` are merged with the adjacent clip across the shorter pause when the result
    fits, else dropped; a single word longer than the maximum is dropped. Clips start and end on
    word boundaries plus ``pad_s``, never past the midpoint of the pause to the neighbouring word
    (so never into its time) and never outside the signal.
    """
    if not 0 < min_clip_s < max_clip_s - 2 * pad_s:
        raise ValueError("need 0 < min_clip_s < max_clip_s - 2 * pad_s")
    ws = sorted((w for w in words if w.text.strip() and w.end >= w.start), key=lambda w: w.start)
    max_span = max_clip_s - 2 * pad_s  # room for the padding on both sides
    groups = _merge_short(_group_words(ws, min_clip_s, max_span), ws, min_clip_s, max_span)
    return [clip for grp in groups if grp and (clip := _clip(grp, ws, len(wav), sr, pad_s)) is not None]


def _group_words(ws: list[Word], min_clip_s: float, max_span: float) -> list[list[int]]:
    """Word indices per clip, closed at sentence ends or when the next word would not fit. An empty group
    marks a dropped word (a "word" longer than a clip is a recognition error): clips never merge across it."""
    groups: list[list[int]] = []
    cur: list[int] = []
    for i, w in enumerate(ws):
        if w.end - w.start > max_span:
            if cur:
                groups.append(cur)
                cur = []
            groups.append([])
            continue
        while cur and w.end - ws[cur[0]].start > max_span:
            ends = [k for k, idx in enumerate(cur) if ends_sentence(ws[idx].text)]
            cut = ends[-1] + 1 if ends else len(cur)
            groups.append(cur[:cut])
            cur = cur[cut:]
        cur.append(i)
        if ends_sentence(w.text) and w.end - ws[cur[0]].start >= min_clip_s:
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    return groups


def _merge_short(groups: list[list[int]], ws: list[Word], min_clip_s: float, max_span: float) -> list[list[int]]:
    """Each group shorter than `min_clip_s` joins the neighbour across the shorter pause when the result fits,
    else it is dropped (its audio unused)."""

    def span(grp: list[int]) -> float:
        return ws[grp[-1]].end - ws[grp[0]].start

    while short := [g for g, grp in enumerate(groups) if grp and span(grp) < min_clip_s]:
        g = short[0]
        grp = groups[g]
        options = []
        if g > 0 and groups[g - 1]:
            options.append((ws[grp[0]].start - ws[groups[g - 1][-1]].end, g - 1))
        if g + 1 < len(groups) and groups[g + 1]:
            options.append((ws[groups[g + 1][0]].start - ws[grp[-1]].end, g + 1))
        for _, h in sorted(options):
            merged = sorted(groups[h] + grp)
            if span(merged) <= max_span:
                groups[min(g, h)] = merged
                del groups[max(g, h)]
                break
        else:
            groups[g] = []
    return groups


def _clip(grp: list[int], ws: list[Word], n: int, sr: int, pad_s: float) -> Clip | None:
    """The samples of one group of words, padded into the pauses up to their midpoints."""
    a, b = grp[0], grp[-1]
    first, last = ws[a].start, ws[b].end
    lo = (ws[a - 1].end + first) / 2 if a > 0 else 0.0
    hi = (last + ws[b + 1].start) / 2 if b + 1 < len(ws) else n / sr
    start = max(0, math.ceil(max(first - pad_s, lo) * sr))
    end = min(n, math.floor(min(last + pad_s, hi) * sr))
    # Overlapping word times (recogniser jitter) must not push a clip inside its own words.
    start = min(start, max(0, round(first * sr)))
    end = max(end, min(n, round(last * sr)))
    return Clip(start, end, join_words(ws[k].text for k in grp)) if end > start else None
