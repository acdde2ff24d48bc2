"""Babble measures of a generated clip: did it stop, how long is it against the speaker's own pace, what did it say
beyond the text, and what did it repeat.

- `stopped`: the GPT emitted its stop token before the clip's token cap (utils.model.inference.generate_latents).
- `duration_ratio`: the clip's seconds over the seconds the speaker would take (`SpeakingPace`: a line fit on the
  dataset's training rows, seconds = overhead + characters / characters per second; the overhead is the silence and
  breath every clip has, so a one-word text is not expected to last a few hundredths of a second).
- `words_beyond`: words of the transcript after the last one that lines up with the text (a word-level edit
  alignment, insertions at the end counted): what the voice said after the sentence had ended.
- `repeats`: immediate repetitions of a word or of a 2- or 3-word group in the transcript ("the the", "I said I
  said"), beyond those the text itself has.
- babbled: did not stop, or ran over BABBLE_RATIO (1.5) times the expected length. The babble rate of an evaluation
  is the share of its clips that babbled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from utils.data.sentences import _no_space_char
from utils.quality.intelligibility import normalize_text

BABBLE_RATIO = 1.5
MAX_OVERHEAD_SECONDS = 1.0  # a fit with more silence per clip than this is not a pace
MAX_NGRAM = 3


@dataclass(frozen=True)
class SpeakingPace:
    """How long the speaker takes for a text: overhead_seconds + characters / chars_per_second."""

    chars_per_second: float
    overhead_seconds: float = 0.0

    def expected_seconds(self, text: str) -> float:
        return self.overhead_seconds + len(" ".join(text.split())) / self.chars_per_second

    def to_dict(self) -> dict[str, float]:
        seconds = round(self.overhead_seconds, 3)
        return {"chars_per_second": round(self.chars_per_second, 3), "overhead_seconds": seconds}

    @classmethod
    def fit(cls, rows: Iterable[tuple[str, float]]) -> SpeakingPace | None:
        """The pace of (text, seconds) rows: least squares with an overhead in [0, MAX_OVERHEAD_SECONDS] s; through
        the origin (characters over seconds) when the overhead comes out outside it. None without a usable row."""
        pairs = [(float(len(" ".join(t.split()))), float(s)) for t, s in rows if t and t.strip() and s and s > 0]
        if not pairs:
            return None
        chars = [c for c, _ in pairs]
        seconds = [s for _, s in pairs]
        n = len(pairs)
        mean_c, mean_s = sum(chars) / n, sum(seconds) / n
        spread = sum((c - mean_c) ** 2 for c in chars)
        if n >= 3 and spread > 0:
            slope = sum((c - mean_c) * (s - mean_s) for c, s in pairs) / spread
            overhead = mean_s - slope * mean_c
            if slope > 0 and 0.0 <= overhead <= MAX_OVERHEAD_SECONDS:
                return cls(1.0 / slope, overhead)
        return cls(sum(chars) / sum(seconds), 0.0)


def words(text: str, language: str | None) -> list[str]:
    """The words of a text as the error rates see them (normalised; each character of a script written without
    spaces is a word)."""
    spaced = "".join(f" {ch} " if _no_space_char(ch) else ch for ch in normalize_text(text, language))
    return spaced.split()


def trailing_insertions(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Words of `hypothesis` after the last one aligned (matched or substituted) to a word of `reference`, in a
    minimal word-level edit alignment (among equal ones, the one with the most insertions at the end)."""
    n, m = len(reference), len(hypothesis)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        cost[i][0] = i
    for j in range(m + 1):
        cost[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            same = reference[i - 1] == hypothesis[j - 1]
            cost[i][j] = min(cost[i - 1][j - 1] + (not same), cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    i, j, trailing = n, m, 0
    while j > 0 and i > 0:
        if cost[i][j] == cost[i][j - 1] + 1:  # an insertion at the end of what is left
            trailing += 1
            j -= 1
        elif cost[i][j] == cost[i - 1][j] + 1:  # a text word not heard: the end is still after it
            i -= 1
        else:
            return trailing
    return trailing if i > 0 else trailing + j  # no text word heard at all: every word is beyond it


def words_beyond(text: str, transcript: str, language: str | None) -> int:
    """Words the transcript has after the text (see the module docstring)."""
    return trailing_insertions(words(text, language), words(transcript, language))


def _repetitions(items: Sequence[str]) -> int:
    """Copies of a 1- to 3-word group that follow the same group at once ("go home go home" is one), each group
    size scanned without overlap; a group of one word repeated ("no no") counts once, as that word's repeat."""
    count = 0
    for n in range(1, MAX_NGRAM + 1):
        i = 0
        while i + 2 * n <= len(items):
            gram = items[i : i + n]
            if gram == items[i + n : i + 2 * n] and (n == 1 or len(set(gram)) > 1):
                count += 1
                i += n
            else:
                i += 1
    return count


def repeats(text: str, transcript: str, language: str | None) -> int:
    """Immediate repetitions of 1- to 3-word groups in the transcript beyond those of the text."""
    return max(0, _repetitions(words(transcript, language)) - _repetitions(words(text, language)))


def babbled(stopped: bool | None, duration_ratio: float | None) -> bool | None:
    """True when a clip did not stop or ran over BABBLE_RATIO times its expected length; None when neither is
    known."""
    if stopped is False or (duration_ratio is not None and duration_ratio > BABBLE_RATIO):
        return True
    if stopped is None and duration_ratio is None:
        return None
    return False


def babble_rate(flags: Iterable[bool | None]) -> float | None:
    """The share of clips that babbled, among those with a verdict (None when none has one)."""
    known = [flag for flag in flags if flag is not None]
    return sum(known) / len(known) if known else None
