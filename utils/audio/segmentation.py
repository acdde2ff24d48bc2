"""Split long recordings into speech segments on silence, using frame RMS energy.

Choices (stated because callers depend on them):

* ``silence_db`` is relative to the recording's loudest frame (0 dB = peak frame RMS), not
  absolute dBFS: a quietly recorded voice and a loud one segment the same way.
* A silence splits only when it lasts at least ``min_silence_ms``; shorter pauses stay inside a
  segment.
* ``min_segment_s`` applies to the unpadded speech, ``max_segment_s`` to the padded segment.
  Longer segments are cut at the quietest frame in the window that keeps both sides within
  ``[min_segment_s, max_segment_s]`` where possible (ties: the earliest frame); a cut inside
  continuous speech gets no padding (the neighbour starts right there).
* Segments shorter than ``min_segment_s`` are MERGED with the neighbour across the shorter
  silence when that silence is at most ``max_merge_gap_ms`` and the merged segment still fits
  ``max_segment_s``; otherwise they are DROPPED (a lone cough or click is not training data).
* Padding by ``pad_ms`` is applied last; where two segments are closer than two paddings the gap
  is shared at its midpoint, so padded segments never overlap, and never leave ``[0, len(wav))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_FRAMES_PER_BLOCK = 8192  # frames per RMS block: bounds the temporary array for long recordings


@dataclass(frozen=True)
class Segment:
    """A half-open sample range ``[start, end)`` of a recording at ``sample_rate``."""

    start: int
    end: int
    sample_rate: int

    @property
    def start_s(self) -> float:
        return self.start / self.sample_rate

    @property
    def end_s(self) -> float:
        return self.end / self.sample_rate

    @property
    def duration_s(self) -> float:
        return (self.end - self.start) / self.sample_rate


def frame_rms(wav: np.ndarray, frame: int, hop: int) -> np.ndarray:
    """RMS of frames ``wav[i*hop : i*hop+frame]`` covering every sample (last ones zero-padded)."""
    n = len(wav)
    if n == 0:
        return np.zeros(0)
    n_frames = 1 + max(0, -(-(n - frame) // hop))
    n_full = 1 + (n - frame) // hop if n >= frame else 0
    out = np.empty(n_frames)
    if n_full:
        # A strided view, computed in blocks: no copy of the whole recording is made.
        windows = np.lib.stride_tricks.sliding_window_view(wav, frame)[::hop]
        for b in range(0, n_full, _FRAMES_PER_BLOCK):
            block = windows[b : b + _FRAMES_PER_BLOCK].astype(np.float64)
            out[b : b + len(block)] = np.sqrt(np.mean(block * block, axis=1))
    for i in range(n_full, n_frames):  # the few frames running past the end
        tail = wav[i * hop :].astype(np.float64)
        out[i] = np.sqrt(np.sum(tail * tail) / frame)
    return out


def split_on_silence(
    wav: np.ndarray,
    sample_rate: int,
    *,
    frame_ms: float = 25,
    hop_ms: float = 10,
    silence_db: float = -40,
    min_silence_ms: float = 300,
    min_segment_s: float = 1.0,
    max_segment_s: float = 11.0,
    pad_ms: float = 100,
    max_merge_gap_ms: float = 1000,
) -> list[Segment]:
    """Return the speech segments of a mono recording, in order, non-overlapping.

    A frame is speech when its RMS is above ``silence_db`` dB relative to the loudest frame's
    RMS. Unpadded segment edges lie on frame edges: a segment starts at the first speech frame's
    first sample and ends at the last speech frame's last sample (so onsets are never clipped).
    See the module docstring for how short, long and neighbouring segments are handled.
    A silent or empty recording gives ``[]``.
    """
    wav = np.asarray(wav, dtype=np.float32)
    if wav.ndim != 1:
        raise ValueError(f"expected a mono 1-D array, got shape {wav.shape}")
    if sample_rate <= 0 or hop_ms <= 0 or frame_ms < hop_ms:
        raise ValueError("need sample_rate > 0 and frame_ms >= hop_ms > 0")
    if not 0 < min_segment_s < max_segment_s:
        raise ValueError("need 0 < min_segment_s < max_segment_s")
    n = len(wav)
    frame = max(1, round(frame_ms * sample_rate / 1000))
    hop = max(1, round(hop_ms * sample_rate / 1000))
    min_len = round(min_segment_s * sample_rate)
    pad = round(pad_ms * sample_rate / 1000)
    # Leave room for the padding, so that padded segments still fit max_segment_s.
    max_len = round(max_segment_s * sample_rate) - 2 * pad
    if max_len <= min_len:
        raise ValueError("max_segment_s must exceed min_segment_s + 2 * pad_ms")
    rms = frame_rms(wav, frame, hop)
    peak = rms.max() if rms.size else 0.0
    if peak <= 0:
        return []
    speech = rms > peak * 10 ** (silence_db / 20)

    # Runs of speech frames as sample ranges; a pause splits only when the span from the end of
    # one speech frame to the start of the next is at least min_silence.
    min_silence = round(min_silence_ms * sample_rate / 1000)
    segs: list[tuple[int, int]] = []
    for i in np.flatnonzero(speech):
        s, e = int(i) * hop, min(n, int(i) * hop + frame)
        if segs and s - segs[-1][1] < min_silence:
            segs[-1] = (segs[-1][0], e)
        else:
            segs.append((s, e))

    segs = [piece for s, e in segs for piece in _split_long(s, e, rms, hop, frame, min_len, max_len)]
    segs = _merge_or_drop_short(segs, min_len, max_len, round(max_merge_gap_ms * sample_rate / 1000))
    return _pad(segs, pad, n, sample_rate)


def _split_long(s: int, e: int, rms: np.ndarray, hop: int, frame: int, min_len: int, max_len: int):
    """Cut [s, e) into pieces of at most max_len at the quietest frame of each allowed window."""
    out = []
    while e - s > max_len:
        # Cut positions c with min_len <= c - s <= max_len and e - c >= min_len.
        lo, hi = s + min_len, min(s + max_len, e - min_len)
        if hi < lo:  # too short to leave min_len on both sides: just cut at max_len
            lo = hi = s + max_len
        # Frame i is centred on sample i*hop + frame//2; candidates are frames centred in [lo, hi].
        f_lo = max(0, -(-(lo - frame // 2) // hop))
        f_hi = min(len(rms) - 1, (hi - frame // 2) // hop)
        if f_hi >= f_lo:
            best = f_lo + int(np.argmin(rms[f_lo : f_hi + 1]))
            cut = best * hop + frame // 2
        else:
            cut = hi
        out.append((s, cut))
        s = cut
    out.append((s, e))
    return out


def _merge_or_drop_short(segs, min_len: int, max_len: int, max_gap: int):
    segs = list(segs)
    while True:
        short = [k for k, (s, e) in enumerate(segs) if e - s < min_len]
        if not short:
            return segs
        k = short[0]
        s, e = segs[k]
        options = []  # (gap, neighbour index)
        if k > 0:
            options.append((s - segs[k - 1][1], k - 1))
        if k + 1 < len(segs):
            options.append((segs[k + 1][0] - e, k + 1))
        for gap, j in sorted(options):
            lo, hi = min(s, segs[j][0]), max(e, segs[j][1])
            if gap <= max_gap and hi - lo <= max_len:
                segs[min(k, j)] = (lo, hi)
                del segs[max(k, j)]
                break
        else:
            del segs[k]  # nothing to merge with: drop it


def _pad(segs, pad: int, n: int, sample_rate: int) -> list[Segment]:
    out = []
    for k, (s, e) in enumerate(segs):
        lo = 0 if k == 0 else (segs[k - 1][1] + s) // 2  # share a narrow gap at its midpoint
        hi = n if k + 1 == len(segs) else (e + segs[k + 1][0]) // 2
        out.append(Segment(max(lo, s - pad, 0), min(hi, e + pad, n), sample_rate))
    return out
