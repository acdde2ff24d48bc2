"""The Runs tab's sweep handler refuses bad input on the page, before any thread or trial starts
(webui/sweep_view.py over utils.sweep); its progress panel shows text from files escaped."""

from __future__ import annotations

import gradio as gr
import pytest

from tests.helpers import write_dataset
from tests.webui.test_handlers import FORM, make_context
from utils.sweep.sweep import SweepProgress
from webui import form
from webui.sweep_view import progress_markdown, start_sweep


@pytest.mark.parametrize(
    ("space", "trials", "minutes", "name", "said"),
    [
        ("seed=1:4", 4, 0, "sweep", "seed is the same for every trial"),
        ("learning_rate=1e-3:1e-6", 4, 0, "sweep", "is empty"),
        ("learning_rate=1e-6:1e-4", 4, 0, "my sweep", "study_name takes letters"),
        ("learning_rate=1e-6:1e-4", 0, 0, "sweep", "needs a budget"),
        ("learning_rate=1e-6:1e-4", -2, 0, "sweep", "trials must be above 0"),
    ],
)
def test_a_bad_sweep_is_refused_on_the_page_and_nothing_starts(tmp_path, space, trials, minutes, name, said):
    ctx = make_context(tmp_path)
    csv = write_dataset(tmp_path / "data" / "set", n=4)
    values = {**FORM, "train_csv": str(csv)}
    with pytest.raises(gr.Error, match=said):
        start_sweep(ctx, space, trials, minutes, "eval_loss", name, *[values[cid] for cid in form.form_ids()])
    assert not ctx.sweep.active and not (ctx.output_dir / "sweeps").exists()


def test_the_panel_shows_a_trials_text_escaped():
    state = SweepProgress(study_name="s<b>x</b>", storage="sqlite:///o/sweeps/s.db", budget="trials 2")
    state.add({"event": "started", "trial": 0, "params": {"learning_rate": 1e-5}, "run_dir": "r"})
    state.add({"event": "ended", "trial": 0, "state": "failed", "reason": "bad | *thing* <img src=x>"})
    shown = progress_markdown(state)
    assert "<b>" not in shown and "<img" not in shown and "\\*thing\\*" in shown and "\\|" in shown
    assert "learning\\_rate=1e-05" in shown
