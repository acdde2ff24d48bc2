"""The command line: every error a user can cause is one line on stderr and exit code 2, never a traceback; an
unknown language code is trained only when the new language is confirmed."""

from __future__ import annotations

import pytest

from tests.helpers import write_dataset
from utils import cli


def run_cli(capsys, *argv: str) -> tuple[int, list[str]]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()]


def assert_one_line_error(code: int, lines: list[str], *expected: str) -> str:
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Traceback" not in lines[0]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def test_a_missing_base_model_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XTTS_MODELS_DIR", str(tmp_path / "models"))
    csv = write_dataset(tmp_path / "data", 4)
    code, lines = run_cli(
        capsys, "train", "--train-csv", str(csv), "--version", "v2.0.2", "--output-path", str(tmp_path / "out")
    )
    line = assert_one_line_error(code, lines, "v2.0.2", "model.pth, config.json", "Put them in")
    assert str(tmp_path / "models" / "v2.0.2") in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["validate", "--train-csv", "/no/such/metadata.csv"], "/no/such/metadata.csv"),
        (["train", "--train-csv", "/no/such/metadata.csv", "--version", "tiny"], "train_csv not found"),
        (["train", "--num-epochs", "many"], "--num-epochs"),
        (["train", "--train-csv", "x.csv", "--learning-rate", "-1"], "learning_rate"),
    ],
)
def test_missing_files_and_bad_values_are_one_line(capsys, argv, expected):
    assert_one_line_error(*run_cli(capsys, *argv), expected)


def test_an_unknown_language_needs_an_explicit_new_language(capsys, tmp_path, tiny_base):
    csv = write_dataset(tmp_path / "data", 4)
    common = ["train", "--train-csv", str(csv), "--version", "tiny", "--output-path", str(tmp_path / "out")]
    code, lines = run_cli(capsys, *common, "--language", "xx")
    assert_one_line_error(code, lines, "'xx'", "new language", "--new-language")
    assert not (tmp_path / "out").exists(), "nothing is trained, nothing written"
    # Confirmed, the same code passes the arguments' checks (the zero epochs below are refused instead).
    code, lines = run_cli(capsys, *common, "--language", "xx", "--new-language", "--num-epochs", "0")
    assert_one_line_error(code, lines, "num_epochs")


def test_prepare_from_the_shell_with_its_declared_options(capsys, tmp_path):
    csv = write_dataset(tmp_path / "data", 4)
    out = tmp_path / "prepared"
    code = cli.main(["prepare", "--train-csv", str(csv), "--out-dir", str(out), "--denoise", "--workers", "1"])
    printed = capsys.readouterr().out
    assert code == 0 and (out / "metadata_train.csv").is_file() and (out / "prepared.json").is_file()
    assert "Loudness evened to -23 LUFS" in printed and "Denoised with DeepFilterNet 3" in printed
    code = cli.main(["prepare", "--train-csv", str(csv), "--out-dir", str(tmp_path / "kept"), "--no-even-loudness"])
    assert code == 0 and "Levels kept as recorded" in capsys.readouterr().out
    code, lines = run_cli(
        capsys, "prepare", "--train-csv", str(csv), "--out-dir", str(tmp_path / "x"), "--loudness-target", "5"
    )
    assert_one_line_error(code, lines, "loudness_target is 5.0; it must be from -40 to -10")
    assert not (tmp_path / "x").exists(), "a bad option is refused before anything is written"


def test_export_from_the_shell_writes_the_profile_and_refuses_a_bad_name_in_one_line(capsys, tmp_path, finished_run):
    import zipfile

    code = cli.main(["export", str(finished_run), "--profile", "ebook2audiobook", "--dest", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    (archive,) = tmp_path.glob("*.zip")
    with zipfile.ZipFile(archive) as flat:
        assert {"config.json", "model.pth", "vocab.json", "ref.wav"} <= set(flat.namelist())  # flat, ref.wav
    code, lines = run_cli(capsys, "export", str(finished_run), "--name", "../escape", "--dest", str(tmp_path))
    assert_one_line_error(code, lines, "../escape")
    code, lines = run_cli(capsys, "export", str(finished_run), "--profile", "nope", "--dest", str(tmp_path))
    assert_one_line_error(code, lines, "nope")


def test_choose_reference_from_the_shell_measures_and_records_or_refuses_in_one_line(capsys, tmp_path, finished_run):
    import json
    import shutil

    from utils.quality.asr import bundled_whisper_dir

    run = shutil.copytree(finished_run, tmp_path / finished_run.name)
    whisper = str(bundled_whisper_dir())
    fast = ["--sentences", "1", "--no-probes", "--max-audio-tokens", "10", "--whisper-model", whisper]
    code = cli.main(["choose-reference", str(run), "--candidates", "1", *fast])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.splitlines()
    assert lines[0] == "measured on demand: candidate 0 of 1 (seed 1)"
    assert lines[3].startswith("*  0  current"), "the chosen row starred"
    assert lines[-1] == "ready/ speaks with: reference.wav" and "[1/1]" in captured.err, "progress on stderr"
    record = json.loads((run / "ready" / "finetune.json").read_text())["reference"]
    assert record["measured"] is True and [c["kind"] for c in record["candidates"]] == ["current"]
    code, lines = run_cli(capsys, "choose-reference", str(tmp_path / "nowhere"))
    assert_one_line_error(code, lines, "nowhere", "not a run folder")
    code, lines = run_cli(capsys, "choose-reference", str(run), "--candidates", "0")
    assert_one_line_error(code, lines, "candidates", "at least 1")
