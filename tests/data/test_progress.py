"""Progress as people read it (issue 29: the transcript check showed no counts): counts, then the time left at the
rate since the first item, a few messages a second at most."""

from __future__ import annotations

from utils.data import progress as progress_module
from utils.data.progress import CountedProgress, time_left_text


def test_time_left_reads_as_a_person_says_it():
    assert [time_left_text(s) for s in (3, 42, 180, 4800)] == [
        "about 3 s left",
        "about 40 s left",
        "about 3 min left",
        "about 1 h 20 min left",
    ]


def test_counts_and_time_left_from_the_rate_since_the_first_clip(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    seen = []
    counter = CountedProgress(lambda done, total, message: seen.append((done, total, message)), 2000, "checked")
    now[0] += 30  # starting the workers: not the rate
    counter(1)
    now[0] += 41.1  # 411 more clips in 41.1 s: 0.1 s a clip, 1,588 left
    counter(412)
    now[0] += 0.01
    counter(413)  # too soon after the last message: not passed on
    counter(2000)
    assert seen == [
        (1, 2000, "1 of 2,000 clips checked"),
        (412, 2000, "412 of 2,000 clips checked, about 3 min left"),
        (2000, 2000, "2,000 of 2,000 clips checked"),
    ]


def test_an_unknown_total_is_counted_without_an_estimate():
    seen = []
    counter = CountedProgress(lambda done, total, message: seen.append((done, total, message)), None, "converted")
    counter(5, "clip_5.wav")
    assert seen == [(5, 5, "5 clips converted (clip_5.wav)")]
