"""Shared fixtures: the tiny base model (built once) and a small synthetic dataset."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.helpers import write_dataset


@pytest.fixture(scope="session", autouse=True)
def hermetic_environment(tmp_path_factory):
    """Nothing of the suite outside its temporary folders and nothing from a network, whatever the machine:
    no model hub, Gradio's and the temporary files of this process and of every process it starts (the app
    servers, training children and ranks inherit the environment) under the session's folder."""
    folder = tmp_path_factory.mktemp("environment")
    (folder / "tmp").mkdir()
    saved = tempfile.tempdir
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("HF_HOME", str(folder / "hf"))
        patch.setenv("GRADIO_TEMP_DIR", str(folder / "gradio"))
        patch.setenv("TMPDIR", str(folder / "tmp"))
        tempfile.tempdir = str(folder / "tmp")
        try:
            yield folder
        finally:
            tempfile.tempdir = saved


@pytest.fixture(scope="session")
def tiny_base():
    """The tiny base model, built into models/tiny once (as the app and CLI use it)."""
    from utils.model.base_models import ensure_base_model

    return ensure_base_model("tiny")


@pytest.fixture
def dataset_csv(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "data")


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, tiny_base) -> Path:
    """A finished tiny run (English, one epoch, no scored evaluation) with its ready/ folder, trained once per session
    for the tests that only use a voice. Read it; copy it (shutil.copytree) before changing anything in it."""
    from utils.gpt_train import train_gpt

    root = tmp_path_factory.mktemp("finished-run")
    result = train_gpt(
        version="tiny",
        language="en",
        train_csv=str(write_dataset(root / "data", n=8)),
        output_path=str(root / "out"),
        num_epochs=1,
        batch_size=4,
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=0,
        inference_search=0,
    )
    return Path(result.run_dir)
