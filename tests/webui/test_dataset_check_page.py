"""The page's *Check transcripts and audio* ("Trust after the run"): it validates with the Fine-tune tab's version
and front end, as Validate, Prepare and Start do (one verdict, one cache entry), and a script's string for one of
its numbers is refused by name, with the range it takes, instead of Gradio's generic "Error"."""

from __future__ import annotations

import gradio as gr
import pytest

from tests.helpers import write_dataset
from tests.webui.test_handlers import make_context
from webui.dataset_handlers import check_handler


def test_check_takes_the_run_s_version_and_front_end_and_passes_a_non_number_to_the_handler(tmp_path):
    from webui.ui import build_ui

    demo, ctx = build_ui(tmp_path / "output")
    check = next(fn for fn in demo.fns.values() if fn.api_name == "check_dataset")
    inputs = list(check.inputs)
    assert ctx["form.version"] in inputs and ctx["form.use_amharic_g2p"] in inputs
    assert inputs.index(ctx["form.version"]) == 7 and inputs.index(ctx["form.use_amharic_g2p"]) == 8, (
        "after the inputs a script sent before: its calls keep their meaning"
    )
    sliders = {component.label: component for component in inputs if isinstance(component, gr.Slider)}
    for label in ("Flag a transcript over this CER", "Exclude clips under this naturalness"):
        assert sliders[label].preprocess("abc") == "abc", "reaches the handler, which names the setting"
        assert sliders[label].preprocess(1.0) == 1.0


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (dict(threshold="0.3"), "threshold must be a number of 0 or more"),
        (dict(min_naturalness="3"), "min_naturalness must be a number from 1 to 5"),
        (dict(max_seconds="long"), "max_seconds must be a number (Longest clip (seconds)); got 'long'"),
    ],
)
def test_a_string_for_a_number_is_refused_by_name(tmp_path, values, message):
    csv = write_dataset(tmp_path / "data" / "voice", n=4)
    ctx = make_context(tmp_path)
    arguments = {"max_seconds": 11.6, "threshold": 0.3, "min_naturalness": 1.0, **values}
    with pytest.raises(gr.Error) as refused:
        check_handler(
            ctx,
            str(csv),
            "",
            "en",
            arguments["max_seconds"],
            "small",
            arguments["threshold"],
            arguments["min_naturalness"],
            "tiny",
            False,
            progress=lambda *a, **k: None,
        )
    assert message in refused.value.message, refused.value.message
    assert not (tmp_path / "output" / ".dataset-checks").exists(), "nothing was read"
