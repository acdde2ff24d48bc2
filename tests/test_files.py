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
