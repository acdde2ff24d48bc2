"""TrainArguments checks values only (types, bounds, combinations): building one reads no file, so the planner and
the web form build them without a dataset. The files they name are checked where a run starts
(`check_input_files`), with the messages train_gpt has always given."""

from __future__ import annotations

import os
import sys

import pytest

from utils.options.arguments import TrainArguments
from utils.options.input_files import check_input_files


@pytest.fixture
def files_touched(monkeypatch):
    """What the code under it opens, lists or stats (Python's audit events for file access, and os.stat, which
    Path.exists/is_file and os.path.samefile call)."""
    watching, seen = [False], []

    def hook(event: str, args: tuple) -> None:
        if watching[0] and event in ("open", "os.listdir", "os.scandir", "glob.glob"):
            seen.append((event, args[0] if args else None))

    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if watching[0]:
            seen.append(("os.stat", path))
        return real_stat(path, *args, **kwargs)

    TrainArguments(language="amh", use_amharic_g2p=True, lora_rank=8)  # modules imported on first use, first
    sys.addaudithook(hook)  # an audit hook cannot be removed: it is switched off after the test instead
    monkeypatch.setattr(os, "stat", stat)
    watching[0] = True
    yield seen
    watching[0] = False


def test_building_arguments_reads_no_file(tmp_path, files_touched):
    missing = tmp_path / "nowhere"
    args = TrainArguments(
        custom_model=str(missing / "model.pth"),
        resume_from=str(missing),
        train_csv=str(missing / "metadata.csv"),
        eval_csv=str(missing / "metadata.csv"),
        language="amh",
        use_amharic_g2p=True,
        lora_rank=8,
        devices="cuda:0, cuda:1",
        batch_size="6",
    )
    assert files_touched == []
    assert (args.devices, args.batch_size) == ("0,1", 6)
    assert not missing.exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(custom_model="MISSING/model.pth"), "custom_model not found"),
        (dict(resume_from="MISSING"), "resume_from not found"),
        (dict(eval_csv="TRAIN"), "eval_csv is the training CSV"),
    ],
)
def test_the_files_named_are_checked_where_a_run_starts(tmp_path, change, message):
    train = tmp_path / "metadata.csv"
    train.write_text("a.wav|hello|speaker\n")
    names = {"MISSING": str(tmp_path / "missing"), "TRAIN": str(train)}
    change = {k: next((v.replace(a, b) for a, b in names.items() if a in v), v) for k, v in change.items()}
    args = TrainArguments(train_csv=str(train), **change)  # the values alone are fine
    with pytest.raises(ValueError, match=message):
        check_input_files(args)


def test_existing_files_pass(tmp_path):
    train, evaluation, model = tmp_path / "train.csv", tmp_path / "eval.csv", tmp_path / "model.pth"
    for path in (train, evaluation, model):
        path.write_text("x")
    check_input_files(TrainArguments(train_csv=str(train), eval_csv=str(evaluation), custom_model=str(model)))
