"""Progress of long dataset work as people read it: "412 of 2,000 clips checked, about 3 min left".

A `CountedProgress` wraps the caller's `progress(done, total, message)` callback (the page's bar, a notebook's print):
the message carries the counts and, once enough is done to tell, the time left at the rate so far. Calls are
thinned to a few a second or one a percent, the first and the last always passed on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

ProgressCallback = Callable[[int, int, str], None]
MIN_INTERVAL_S = 0.25  # between two messages
ESTIMATE_AFTER_S = 2.0  # the time left is estimated after this long past the first item done


def time_left_text(seconds: float) -> str:
    """'about 40 s left', 'about 3 min left', 'about 1 h 20 min left'."""
    if seconds < 60:
        return f"about {max(1, round(seconds / 5) * 5 if seconds > 10 else round(seconds))} s left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60} min left"


class CountedProgress:
    """progress(done, total, "<done> of <total> <noun> <verb>, about <t> left") for `callback`."""

    def __init__(self, callback: ProgressCallback | None, total: int | None, verb: str, noun: str = "clips") -> None:
        self.callback = callback
        self.known = total is not None  # an unknown total: counts only, and done stands for the total
        self.total = max(0, int(total or 0))
        self.verb, self.noun = verb, noun
        self.first: tuple[int, float] | None = None  # (done, when) at the first item: start-up is not the rate
        self.last = -1.0
        self.last_done = 0

    def message(self, done: int) -> str:
        if not self.known:
            return f"{done:,} {self.noun} {self.verb}"
        text = f"{done:,} of {self.total:,} {self.noun} {self.verb}"
        now = time.monotonic()
        if done > 0 and self.first is None:
            self.first = (done, now)
        if self.first is not None and done < self.total:
            since, elapsed = done - self.first[0], now - self.first[1]
            if since > 0 and elapsed >= ESTIMATE_AFTER_S:
                text += ", " + time_left_text(elapsed / since * (self.total - done))
        return text

    def __call__(self, done: int, detail: str = "") -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        step = max(1, self.total // 100)  # or every percent, however fast the items go
        if done not in (0, self.total) and now - self.last < MIN_INTERVAL_S and done - self.last_done < step:
            return
        self.last, self.last_done = now, done
        message = self.message(done) + (f" ({detail})" if detail else "")
        total = self.total if self.known else done
        self.callback(min(done, total), total, message)
