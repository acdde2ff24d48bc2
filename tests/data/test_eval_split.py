"""The eval split is capped (issue 28): 15% of the usable rows held out, at least 1, at most MAX_EVAL_ROWS; an eval
CSV longer than that is run over MAX_EVAL_ROWS rows, evenly spread, by every eval-loss pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import write_clip
from utils.data.validation import MAX_EVAL_ROWS, eval_rows_held_out, validate_dataset


@pytest.mark.parametrize("usable, held_out", [(2, 1), (7, 1), (100, 15), (1000, 150), (1707, 256), (50_000, 256)])
def test_the_rule(usable, held_out):
    assert MAX_EVAL_ROWS == 256 and eval_rows_held_out(usable) == held_out


def _csv(folder: Path, name: str, clips: list[Path]) -> Path:
    lines = [
        "audio_file|text|speaker_name",
        *(f"{clip}|sentence {i} of the corpus|speaker" for i, clip in enumerate(clips)),
    ]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[Path]:
    """2,100 one-second clips (one recording copied: rows are told apart by their paths)."""
    folder = tmp_path_factory.mktemp("many")
    first = write_clip(folder / "wavs" / "c0000.wav", 1.2, 1, sample_rate=16000)
    data = first.read_bytes()
    for i in range(1, 2100):
        (folder / "wavs" / f"c{i:04d}.wav").write_bytes(data)
    return sorted((folder / "wavs").iterdir())


def test_a_large_dataset_holds_out_at_most_256_rows(tmp_path, clips):
    report = validate_dataset(_csv(tmp_path, "m.csv", clips[:2000]), audio_check="header")
    assert report.rows_usable == 2000 and (report.train_count, report.eval_count) == (1744, 256)
    assert "256 of 2000 usable rows (15%, at most 256) held out for evaluation" in report.summary()


def test_every_eval_loss_pass_runs_over_at_most_256_rows_of_an_eval_csv(tmp_path, clips):
    from utils.text.frontend import TextFrontEnd
    from utils.training.loop.setup import training_samples

    train, evaluation = _csv(tmp_path, "train.csv", clips[:100]), _csv(tmp_path, "eval.csv", clips[100:2100])
    report = validate_dataset(train, evaluation, audio_check="header")
    assert report.eval_count == 2000 and "eval.csv: 2000 usable eval rows; each eval-loss pass runs over 256" in (
        report.summary()
    )
    samples = training_samples(report, TextFrontEnd("en"))
    assert len(samples.train) == 100 and len(samples.eval) == MAX_EVAL_ROWS
    lines = [int(s["audio_unique_name"].split("#")[1]) for s in samples.eval]
    assert lines == sorted(set(lines)) and lines[0] == 2 and lines[-1] == 2001, "evenly spread, first to last"
