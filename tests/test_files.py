"""utils.files: atomic writes leave the old file or the new one, never half of one; JSONL is followed line by line."""

from __future__ import annotations

from utils.files import JsonlFollower


def test_metrics_follower_reads_only_complete_new_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"type": "train", "step": 1}\n{"type": "tr')
    follower = JsonlFollower()
    assert [r["step"] for r in follower.follow(path)] == [1]
    with open(path, "a") as handle:
        handle.write('ain", "step": 2}\n')
    assert [r["step"] for r in follower.follow(path)] == [1, 2]


def test_records_removed_from_a_followed_file_are_not_read_twice(tmp_path):
    """A resume sets aside the steps it trains again (rewrite_jsonl); a follower of the file reads it anew."""
    from utils.files import append_jsonl, rewrite_jsonl

    path = tmp_path / "metrics.jsonl"
    for step in (1, 2, 3, 4):
        append_jsonl(path, {"type": "train", "step": step})
    with open(path, "a") as handle:
        handle.write('{"type": "train", "st')  # what a kill -9 mid-write leaves
    follower = JsonlFollower(path)
    assert [r["step"] for r in follower.follow()] == [1, 2, 3, 4]
    dropped = rewrite_jsonl(path, lambda r: r["step"] > 2)
    assert [r["step"] for r in dropped] == [3, 4]
    append_jsonl(path, {"type": "train", "step": 3})
    assert [r["step"] for r in follower.follow()] == [1, 2, 3], "each step once, the cut line gone"
