"""The planner's batch fit is the same in fresh processes and agrees with a direct trace (grad_acumm >= 2)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import run_watched

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# In a fresh process: the fit of the mid-size model with gradients held, as a digest and the peaks it reports.
SCRIPT = """
import hashlib, sys
from utils.memory_plan.planner import _arguments, batch_model, step_settings
a, o, _ = _arguments((), dict(version="mid", models_dir=sys.argv[1], batch_size=2, grad_acumm=2))
fit, _ = batch_model(step_settings(a, o))
digest = hashlib.sha256(fit.fixed.tobytes() + fit.per_sample.tobytes()).hexdigest()
print("FIT", type(fit).__name__, digest, *[sum(fit.at(b)[1].values()) for b in (1, 2, 8, 64)])
"""


@pytest.fixture(scope="module")
def mid_dir(tmp_path_factory, tiny_base):
    from utils.memory_check.step_measure import build_model_folder

    folder = tmp_path_factory.mktemp("models")
    build_model_folder(folder / "mid", layers=6, width=384, heads=6)
    return folder


def fresh_fit(models_dir: Path) -> list[str]:
    done = run_watched([sys.executable, "-c", SCRIPT, str(models_dir)], cwd=ROOT, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return next(line for line in done.stdout.splitlines() if line.startswith("FIT ")).split()[1:]


def test_fit_is_identical_in_two_fresh_processes_and_matches_a_direct_trace(mid_dir):
    first, second = fresh_fit(mid_dir), fresh_fit(mid_dir)
    assert first[0] == "BatchModel", "the traces did not line up: no fit to compare"
    assert first == second, "the same settings gave another fit in a fresh process"

    from utils.memory_plan.planner import _arguments, step_settings
    from utils.memory_plan.trace import trace_step

    arguments, options, _ = _arguments((), dict(version="mid", models_dir=str(mid_dir), batch_size=8, grad_acumm=2))
    direct = sum(trace_step(replace(step_settings(arguments, options), batch_size=8)).peak()[1].values())
    fitted = int(float(first[4]))
    assert abs(fitted - direct) <= 0.05 * direct, (fitted, direct)
