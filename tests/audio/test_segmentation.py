"""Tests for utils.audio.segmentation on synthetic "speech": tone/noise bursts at known places."""

from __future__ import annotations

import numpy as np
import pytest

from utils.audio.segmentation import Segment, split_on_silence

SR = 16000
FRAME = 400  # 25 ms at 16 kHz, the default frame
HOP = 160  # 10 ms


def synth(total_s: float, bursts, *, seed: int = 0, floor: float = 1e-4) -> np.ndarray:
    """Low noise floor plus band-limited bursts; bursts = [(start_s, end_s, amplitude), ...]."""
    rng = np.random.default_rng(seed)
    wav = rng.normal(0, floor, round(total_s * SR)).astype(np.float32)
    for start, end, amp in bursts:
        a, b = round(start * SR), round(end * SR)
        t = np.arange(b - a) / SR
        # A few harmonics plus noise: roughly voice-like, and never silent inside the burst.
        sig = sum(np.sin(2 * np.pi * f * t + f) for f in (180, 360, 720, 1500)) / 4
        sig = sig + 0.3 * rng.normal(0, 1, b - a)
        wav[a:b] = amp * sig.astype(np.float32)
    return wav


def s2n(sec: float) -> int:
    return round(sec * SR)


def test_finds_boundaries_within_a_frame():
    bursts = [(0.5, 2.0, 0.5), (2.6, 4.1, 0.5), (5.0, 7.5, 0.2)]  # the quieter one still counts
    wav = synth(8.5, bursts)
    segs = split_on_silence(wav, SR, pad_ms=0)
    assert len(segs) == 3
    for seg, (start, end, _) in zip(segs, bursts):
        assert isinstance(seg, Segment) and seg.sample_rate == SR
        # Edges lie on the outer edge of the first/last speech frame: at most one frame out.
        assert s2n(start) - FRAME <= seg.start <= s2n(start)
        assert s2n(end) <= seg.end <= s2n(end) + FRAME
        assert seg.start_s == pytest.approx(start, abs=0.03)
        assert seg.duration_s == pytest.approx(end - start, abs=0.05)


def test_short_pauses_do_not_split():
    wav = synth(5.0, [(0.5, 2.0, 0.5), (2.2, 3.5, 0.5)])  # 200 ms pause < min_silence 300 ms
    segs = split_on_silence(wav, SR, pad_ms=0)
    assert len(segs) == 1
    assert segs[0].start <= s2n(0.5) and segs[0].end >= s2n(3.5)
    # With a shorter min_silence the same pause does split.
    assert len(split_on_silence(wav, SR, pad_ms=0, min_silence_ms=100)) == 2


def test_silence_threshold_is_relative_to_peak():
    bursts = [(0.5, 2.0, 0.5), (3.0, 4.5, 0.5)]
    loud = synth(5.0, bursts)
    quiet = loud * 0.01  # -40 dB overall: absolute dBFS would lose it, relative must not
    a = split_on_silence(loud, SR)
    b = split_on_silence(quiet, SR)
    assert len(a) == 2
    assert [(s.start, s.end) for s in b] == [(s.start, s.end) for s in a]


def test_padding_bounds():
    # First burst starts 20 ms in, last ends 20 ms before the end: padding must clip at 0 / n.
    # The middle gap of 400 ms is narrower than 2 x 250 ms padding: shared at its midpoint.
    bursts = [(0.02, 1.5, 0.5), (1.9, 3.4, 0.5), (4.5, 6.98, 0.5)]
    wav = synth(7.0, bursts)
    raw = split_on_silence(wav, SR, pad_ms=0)
    padded = split_on_silence(wav, SR, pad_ms=250)
    pad = s2n(0.25)
    assert len(raw) == len(padded) == 3
    assert padded[0].start == 0
    assert padded[-1].end == len(wav)
    for r, p in zip(raw, padded):
        assert p.start <= r.start and p.end >= r.end  # padding only grows a segment
        assert r.start - p.start <= pad and p.end - r.end <= pad
    for left, right in zip(padded, padded[1:]):
        assert left.end <= right.start  # never overlapping the neighbour
    mid = (raw[0].end + raw[1].start) // 2
    assert padded[0].end == mid == padded[1].start  # narrow gap shared
    # A wide gap gets the full padding on both sides.
    assert padded[1].end - raw[1].end == pad and raw[2].start - padded[2].start == pad


def test_short_segment_merged_with_near_neighbour():
    wav = synth(6.0, [(0.5, 3.0, 0.5), (3.5, 3.9, 0.5)])  # 0.4 s burst, 500 ms after a long one
    segs = split_on_silence(wav, SR, pad_ms=0)
    assert len(segs) == 1
    assert segs[0].start <= s2n(0.5) and segs[0].end >= s2n(3.9)


def test_isolated_short_segment_dropped():
    wav = synth(8.0, [(0.5, 3.0, 0.5), (6.0, 6.4, 0.5)])  # 3 s away: not merged, dropped
    segs = split_on_silence(wav, SR, pad_ms=0)
    assert len(segs) == 1
    assert segs[0].end < s2n(3.1)
    assert split_on_silence(synth(3.0, [(1.0, 1.4, 0.5)]), SR) == []


def test_long_segment_split_at_quietest_frame():
    # 24 s of continuous "speech" with 150 ms dips (too short to be silences): two silent dips
    # at 8.0 s and 14.0 s, two partial (0.3 x) dips at 3.0 s and 19.0 s.
    bursts = [
        (0.5, 3.0, 0.5),
        (3.0, 3.15, 0.15),
        (3.15, 8.0, 0.5),
        (8.15, 14.0, 0.5),
        (14.15, 19.0, 0.5),
        (19.0, 19.15, 0.15),
        (19.15, 24.5, 0.5),
    ]
    wav = synth(25.0, bursts)
    segs = split_on_silence(wav, SR, pad_ms=100, max_segment_s=11.0)
    assert len(segs) == 3
    cuts = [segs[0].end, segs[1].end]
    assert segs[1].start == cuts[0] and segs[2].start == cuts[1]  # no padding inside speech
    # Each cut lies inside a silent dip, not just anywhere near it.
    assert s2n(8.0) <= cuts[0] <= s2n(8.15)
    assert s2n(14.0) <= cuts[1] <= s2n(14.15)
    for seg in segs:
        assert 1.0 <= seg.duration_s <= 11.0
    # Smaller max: still every piece within the limits, covering the whole speech.
    segs = split_on_silence(wav, SR, pad_ms=100, max_segment_s=4.0)
    assert all(1.0 <= s.duration_s <= 4.0 for s in segs)
    assert segs[0].start <= s2n(0.5) and segs[-1].end >= s2n(24.5)
    assert all(a.end <= b.start for a, b in zip(segs, segs[1:]))


def test_edge_cases():
    assert split_on_silence(np.zeros(SR, dtype=np.float32), SR) == []
    assert split_on_silence(np.zeros(0, dtype=np.float32), SR) == []
    with pytest.raises(ValueError):
        split_on_silence(np.zeros((2, SR), dtype=np.float32), SR)
    with pytest.raises(ValueError):
        split_on_silence(np.zeros(SR, dtype=np.float32), SR, min_segment_s=2.0, max_segment_s=1.0)


def test_max_length_includes_padding():
    # The only pause sits 3.9+ s into the speech: cutting there would be fine unpadded but the
    # padded piece would exceed max_segment_s = 4.0, so the cut must go elsewhere.
    wav = synth(7.0, [(0.5, 4.4, 0.5), (4.55, 6.0, 0.5)])
    segs = split_on_silence(wav, SR, pad_ms=100, max_segment_s=4.0)
    assert len(segs) >= 2
    assert all(s.duration_s <= 4.0 for s in segs)
    assert segs[0].start == pytest.approx(s2n(0.5) - FRAME - s2n(0.1), abs=FRAME)
