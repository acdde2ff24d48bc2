"""Hostile arguments to train_gpt and the CLI: every one is a clear ValueError (an `error:` line on the CLI) raised
before any folder or model exists, and the user's files are byte-identical afterwards."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from tests.helpers import digests, run_watched, write_dataset
from utils.gpt_train import train_gpt
from utils.options.arguments import TrainArguments

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(version="tiny", enable_mixed_precision=False, num_workers=0, quality_eval=0)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(num_epochs=1e30), "num_epochs must be at most 10000"),
        (dict(num_epochs=2.7), "num_epochs must be a whole number; got 2.7"),
        (dict(num_epochs=True), "num_epochs must be a whole number"),
        (dict(num_epochs="3"), "num_epochs must be a whole number"),
        (dict(num_epochs=math.nan), "num_epochs must be a whole number"),
        (dict(batch_size=-2), "batch_size must be a whole number of at least 1"),
        (dict(batch_size=10_000), "batch_size must be at most 512"),
        (dict(batch_size="lots"), "whole number or auto"),
        (dict(grad_acumm=0), "grad_acumm must be a whole number of at least 1"),
        (dict(learning_rate=math.inf), "learning_rate must be a number"),
        (dict(learning_rate=1.0), "learning_rate must be at most 0.01"),
        (dict(weight_decay=-0.1), "weight_decay must be a number >= 0"),
        (dict(grad_clip=math.nan), "grad_clip must be a number"),
        (dict(seed=-5), "seed must be a whole number of at least 0"),
        (dict(seed=2**40), "seed must be at most"),
        (dict(save_step=0), "save_step must be a whole number of at least 1"),
        (dict(num_workers=-3), "num_workers must be a whole number of at least -1"),
        (dict(max_audio_length=0), "max_audio_length must be a whole number of at least 22050"),
        (dict(max_audio_length=10**9), "max_audio_length must be at most"),
        (dict(lr_milestones=(0.5, 1.5)), "lr_milestones are fractions of the run between 0 and 1"),
        (dict(lr_milestones="0.5"), "lr_milestones must be a list of numbers"),
        (dict(precision="fp8"), "precision must be one of"),
        (dict(optimizer="lion"), "optimizer must be one of"),
        (dict(language=""), "language is empty"),
        (dict(language="klingon"), "klingon"),
        (dict(use_amharic_g2p=True, language="en"), "use_amharic_g2p needs language 'amh'"),
        (dict(run_name="x" * 300), "is not a name"),
        (dict(run_name="../../escaped"), "is not a name"),
        (dict(run_name="a/b"), "is not a name"),
        (dict(version=""), "version is empty"),
        (dict(version="../etc"), "is not a folder name"),
        (dict(version="/etc"), "is not a folder name"),
        (dict(version="models/../../etc"), "is not a folder name"),
        (dict(version="C:\\Windows"), "is not a folder name"),
        (dict(version="v9.9"), "Unknown base model version"),
        (dict(custom_model="/nonexistent/model.pth"), "custom_model not found"),
        (dict(resume_from="/nonexistent/run"), "resume_from not found"),
        (dict(enable_sdpa="yes"), "enable_sdpa must be True or False"),
        (dict(best_by="cer", quality_eval=0), "best_by='cer' is measured on generated speech"),
        (dict(epochs=3), "Unknown option"),
        # Issue 17, silently wrong: inside the bounds, but cannot mean what they say.
        (dict(learning_rate=0), "learning_rate is 0: the weights would never change"),
        (dict(learning_rate=0.0, num_epochs=1), "learning_rate is 0"),
        (dict(lr_milestones=(0.5, 0.5)), "lr_milestones repeat 0.5"),
        (dict(eval_csv="THE TRAIN CSV"), "eval_csv is the training CSV"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(tmp_path, dataset_csv, change, message):
    before = digests(dataset_csv.parent)
    change = {k: str(dataset_csv) if v == "THE TRAIN CSV" else v for k, v in change.items()}
    with pytest.raises(ValueError, match=message):
        train_gpt(train_csv=str(dataset_csv), output_path=str(tmp_path / "out"), **{**FAST, **change})
    assert not (tmp_path / "out").exists(), "nothing was created"
    assert digests(dataset_csv.parent) == before


def test_the_clip_length_help_says_the_true_limit():
    """The page refuses a clip over 11.61 s (its slider stops at the length XTTS v2 was trained with): the field's
    help and the option's help say so, not the API's 30 s ceiling."""
    from utils.options.arguments import option_of
    from webui import form
    from webui.form_spec import FORM

    spec = option_of("max_audio_length")
    assert "11.61 s" in spec.help and "11.61 s" in FORM["max_audio_length"].info
    slider = form.create_component("max_audio_length")
    assert slider.maximum == 11.61 and "11.61 s" in slider.info


def test_output_path_that_is_a_file_or_not_writable(tmp_path, dataset_csv):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        train_gpt(train_csv=str(dataset_csv), output_path=str(a_file), **FAST)
    assert a_file.read_text() == "mine"
    with pytest.raises(ValueError, match="cannot be written to"):
        train_gpt(train_csv=str(dataset_csv), output_path="/proc/xtts-runs", **FAST)


def test_a_custom_model_that_is_not_a_checkpoint(tmp_path, dataset_csv):
    fake = tmp_path / "model.pth"
    fake.write_text("not a checkpoint at all")
    with pytest.raises(ValueError, match="is not a PyTorch checkpoint"):
        train_gpt(train_csv=str(dataset_csv), output_path=str(tmp_path / "out"), custom_model=str(fake), **FAST)
    assert fake.read_text() == "not a checkpoint at all" and not (tmp_path / "out").exists()


def test_a_longest_clip_beyond_what_the_base_model_can_place(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=4)
    with pytest.raises(ValueError, match="longer than base model 'tiny' can take"):
        train_gpt(train_csv=str(csv_path), output_path=str(tmp_path / "out"), max_audio_length=650_000, **FAST)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["validate", "--train-csv", "/nonexistent.csv"], "train_csv not found"),
        (["validate", "--train-csv", "EMPTY"], "is empty"),
        (["validate", "--train-csv", "CSV", "--max-audio-length", "0"], "max_audio_length"),
        (["train", "--train-csv", "CSV", "--num-epochs", "0", "--version", "tiny"], "num_epochs"),
        (["train", "--train-csv", "CSV", "--batch-size", "many", "--version", "tiny"], "whole number or auto"),
    ],
)
def test_the_cli_prints_one_error_line_not_a_traceback(tmp_path, dataset_csv, argv, message):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    argv = [str(dataset_csv) if a == "CSV" else str(empty) if a == "EMPTY" else a for a in argv]
    result = run_watched([sys.executable, "-m", "utils.cli", *argv], cwd=ROOT, text=True)
    assert result.returncode == 2 and result.stderr.startswith("error:") and message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_declaration_reads_the_forms_text_and_refuses_silent_rounding():
    assert TrainArguments(batch_size="6").batch_size == 6 and TrainArguments(num_epochs=3.0).num_epochs == 3
    with pytest.raises(ValueError, match="whole number"):
        TrainArguments(batch_size="6.5")


def test_a_missing_published_version_leaves_no_empty_model_folder(tmp_path, dataset_csv):
    """Issue 17, silently wrong: an offline machine asked for v2.0.3 was left with an empty models/v2.0.3/."""
    models = tmp_path / "models"
    models.mkdir()
    from utils.model.base_models import MissingBaseModelFiles

    with pytest.raises(MissingBaseModelFiles, match=r"Base model 'v2.0.3' is incomplete: 6 file\(s\) missing"):
        train_gpt(
            train_csv=str(dataset_csv),
            output_path=str(tmp_path / "out"),
            models_dir=str(models),
            **{**FAST, "version": "v2.0.3"},
        )
    assert list(models.iterdir()) == [], "no empty models/v2.0.3/"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", ["tiny", "v2.0.3"])
def test_a_models_dir_holding_other_files_gets_no_model(tmp_path, dataset_csv, version):
    """Issue 30, silent: models_dir='/etc' (any folder holding other files) got a base model written among its files.
    The rule: a folder of base models is new, empty, or laid out as ./models is (version folders, whisper/, README)."""
    foreign = tmp_path / "etc"
    (foreign / "ssh").mkdir(parents=True)
    (foreign / "passwd").write_text("root:x:0:0\n")
    (foreign / "ssh" / "config").write_text("Host *\n")
    before = digests(foreign)
    with pytest.raises(
        ValueError, match=r"models_dir '.*etc' is not a folder of base models: it holds 'passwd', 'ssh'"
    ):
        train_gpt(
            train_csv=str(dataset_csv),
            output_path=str(tmp_path / "out"),
            models_dir=str(foreign),
            **{**FAST, "version": version},
        )
    assert digests(foreign) == before and sorted(p.name for p in foreign.iterdir()) == ["passwd", "ssh"]
    assert not (tmp_path / "out").exists()
    from utils.model.base_models import ensure_base_model

    with pytest.raises(ValueError, match="is not a folder of base models"):
        ensure_base_model(version, foreign)  # the place that writes refuses too (e.g. $XTTS_MODELS_DIR=/etc)
    assert digests(foreign) == before


def test_a_models_folder_laid_out_as_models_gets_the_tiny_model(tmp_path):
    from utils.model.base_models import ensure_base_model

    models = tmp_path / "models"
    (models / "whisper" / "tiny.en").mkdir(parents=True)
    (models / "v2.0.2" / ".cache").mkdir(parents=True)  # an interrupted download
    (models / "README.md").write_text("base models\n")
    assert ensure_base_model("tiny", models).folder == models / "tiny"
    assert (models / "tiny" / "model.pth").is_file()
    # Once there, a folder's other files no longer matter: nothing more is written.
    (models / "notes.txt").write_text("mine\n")
    assert ensure_base_model("tiny", models).folder == models / "tiny"
