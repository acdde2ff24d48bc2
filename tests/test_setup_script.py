"""scripts/setup.sh (run by ./run_app.sh and ./run_tests.sh) installs the Python packages once: after the test set
was installed, the app's start does not run pip again."""

from __future__ import annotations

import ctypes.util
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import run_watched

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not ctypes.util.find_library("avcodec"), reason="FFmpeg is missing: setup.sh would install it")
def test_the_app_starts_without_pip_after_the_test_set_was_installed(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    for name in ("requirements.txt", "requirements-test.txt", "requirements-nodeps.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    calls = tmp_path / "pip-calls.log"
    fake = tmp_path / ".venv" / "bin" / "python"  # records what setup.sh asks of the environment's Python
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    tools = tmp_path / "tools"  # no system package is installed from a test (chromium, espeak-ng may be absent)
    tools.mkdir()
    (tools / "apt-get").write_text("#!/bin/sh\nexit 1\n")
    (tools / "apt-get").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}

    def setup(*flags: str) -> str:
        done = run_watched(["bash", "scripts/setup.sh", *flags], cwd=tmp_path, env=env, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return calls.read_text() if calls.exists() else ""

    after_tests = setup("--test")
    assert "-r requirements-test.txt" in after_tests, "the first run installs the test set"
    assert setup() == after_tests, "./run_app.sh after ./run_tests.sh: no pip"
    assert setup("--test") == after_tests, "nor a second ./run_tests.sh"
    (tmp_path / "requirements.txt").write_text((ROOT / "requirements.txt").read_text() + "\n# a new pin\n")
    assert "-r requirements.txt" in setup().removeprefix(after_tests), "a changed pin is installed"
