"""spec.json: the frozen spec a worker runs, written atomically in the run folder and read back checked."""

from __future__ import annotations

import json
import os

import pytest

from utils.files import LinkOutRefused
from utils.options.arguments import TrainArguments
from utils.training.loop.auto_batch import resolve_batch
from utils.training.recording.spec import SPEC_FILE, RunSpec, read_spec


def test_a_spec_round_trips_and_refuses_what_is_not_its_own(tmp_path, dataset_csv):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    args = TrainArguments(version="tiny", train_csv=str(dataset_csv), output_path=str(tmp_path), batch_size=3)
    spec = RunSpec.create(args, run_dir, [tmp_path / "data"], resolved=True, batch_size_auto="")
    spec.write()
    back = read_spec(run_dir)
    assert back == spec and back.train_arguments() == args
    assert back.audio_roots == (str((tmp_path / "data").resolve()),)
    assert not list(run_dir.glob(".*.tmp")), "written through a temporary file"

    # A spec copied from another folder is not run there.
    other = tmp_path / "copy"
    other.mkdir()
    (other / SPEC_FILE).write_text((run_dir / SPEC_FILE).read_text())
    with pytest.raises(ValueError, match="names another run folder"):
        read_spec(other)
    # Hand edits: an unknown option, a resolved spec whose batch is still a word, another version.
    data = json.loads((run_dir / SPEC_FILE).read_text())
    for change, message in (
        ({"arguments": {**data["arguments"], "bogus": 1}}, "unknown argument"),
        ({"arguments": {**data["arguments"], "batch_size": "auto"}}, "marked resolved"),
        ({"version": 99}, "spec version"),
    ):
        (run_dir / SPEC_FILE).write_text(json.dumps({**data, **change}))
        with pytest.raises(ValueError, match=message):
            read_spec(run_dir)
    with pytest.raises(ValueError, match="no run spec"):
        read_spec(tmp_path / "missing")


def test_a_spec_is_never_written_through_a_link_out_of_the_run_folder(tmp_path, dataset_csv):
    run_dir, outside = tmp_path / "run", tmp_path / "outside.json"
    run_dir.mkdir()
    outside.write_text("{}")
    os.symlink(outside, run_dir / SPEC_FILE)
    args = TrainArguments(version="tiny", train_csv=str(dataset_csv), output_path=str(tmp_path))
    with pytest.raises(LinkOutRefused):
        RunSpec.create(args, run_dir).write()
    assert outside.read_text() == "{}"


def test_auto_batch_is_settled_when_the_spec_is_made(tmp_path, dataset_csv):
    args = TrainArguments(version="tiny", train_csv=str(dataset_csv), output_path=str(tmp_path), batch_size="auto")
    planned, choice, probe = resolve_batch(args, 5, None)
    assert planned.batch_size == 5 and "capped at the 5 training rows" in choice and probe
    fixed = args.replace(batch_size=4)
    assert resolve_batch(fixed, 5, None) == (fixed, "", False)
