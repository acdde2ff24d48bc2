"""Shared fixtures: the tiny base model (built once) and a small synthetic dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import write_dataset


@pytest.fixture(scope="session")
def tiny_base():
    """The tiny base model, built into models/tiny once (as the app and CLI use it)."""
    from utils.model.base_models import ensure_base_model

    return ensure_base_model("tiny")


@pytest.fixture
def dataset_csv(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "data")
