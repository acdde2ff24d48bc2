"""The Python API's reasons show a file name's or a text's invisible characters for what they are (issue 30): a
right-to-left override, a zero-width space or an escape sequence from a file reached the report's reasons, its
notes and the errors raw, so a terminal or a log showed the text reordered, hidden or recoloured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import write_clip
from utils.data.validation import validate_dataset
from utils.gpt_train import train_gpt

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "\u202egnp.\u200bevil\x1b[31m"  # RLO, zero-width space, an ANSI escape
RAW = ("\u202e", "\u200b", "\x1b")


def raw_in(text: str) -> list[str]:
    return [char for char in RAW if char in text]


def test_dataset_reasons_and_notes_show_invisible_characters(tmp_path):
    folder = tmp_path / f"data{HOSTILE}"
    for i in range(4):
        write_clip(folder / "wavs" / f"c{i}.wav", 1.5, i)
    lines = ["audio_file|text|speaker_name", *(f"wavs/c{i}.wav|Text number {i} here|spk" for i in range(4))]
    lines += [f"wavs/missing{HOSTILE}.wav|Text {HOSTILE}|spk", f"wavs/c0.wav|{HOSTILE}|spk|extra"]
    csv_path = folder / f"m{HOSTILE}.csv"
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = validate_dataset(csv_path)
    reasons = [p.reason for p in report.problems]
    assert any("[U+202E]gnp.[U+200B]evil[U+001B]" in reason for reason in reasons), reasons
    for text in [*reasons, *report.notes, report.summary()]:
        assert not raw_in(text), text


def test_the_errors_of_the_public_functions_and_the_cli_show_invisible_characters(tmp_path):
    missing = tmp_path / f"model{HOSTILE}.pth"
    with pytest.raises(ValueError) as refused:
        train_gpt(custom_model=str(missing), version="tiny", train_csv=str(tmp_path / "x.csv"), quality_eval=0)
    assert "custom_model not found" in str(refused.value) and "[U+202E]" in str(refused.value)
    assert not raw_in(str(refused.value)), str(refused.value)
    with pytest.raises(ValueError) as refused:
        validate_dataset(tmp_path / f"none{HOSTILE}.csv")
    assert not raw_in(str(refused.value)) and "[U+200B]" in str(refused.value), str(refused.value)
    result = subprocess.run(
        [sys.executable, "-m", "utils.cli", "validate", "--train-csv", str(tmp_path / f"none{HOSTILE}.csv")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.startswith("error:") and "[U+202E]" in result.stderr
    assert not raw_in(result.stderr), result.stderr
