"""One precision knob: `precision` (auto | bf16 | fp16 | fp32) decides mixed precision; `enable_mixed_precision`, kept
for older calls (train_gpt's positional parameter, the CLI flag, the /start_training parameter), is an alias that
TrainArguments folds into it (False is fp32). The page shows one control; the page, the planner and the run read
the same decisions (TrainingOptimizer.from_arguments)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tests.helpers import simulated_gpu
from utils.cli import build_parser
from utils.options.arguments import TrainArguments
from utils.options.optimizations import MIXED_PRECISION, SDPA, TrainingOptimizer
from webui import form
from webui.plan_view import PLAN_OPTIONS, plan_markdown

AMPERE = simulated_gpu((8, 6))


@pytest.mark.parametrize(
    "given, precision",
    [
        ({}, "auto"),
        ({"enable_mixed_precision": False}, "fp32"),
        ({"enable_mixed_precision": False, "precision": "bf16"}, "fp32"),  # the alias turned it off, as it always did
        ({"enable_mixed_precision": True, "precision": "fp16"}, "fp16"),
        ({"precision": "fp32"}, "fp32"),
    ],
)
def test_the_alias_is_folded_into_precision(given, precision):
    args = TrainArguments(**given)
    assert (args.precision, args.enable_mixed_precision) == (precision, True)
    assert args.replace(precision="bf16").precision == "bf16", "a later change of precision is not undone"
    assert TrainArguments(**args.to_dict()) == args


def test_the_alias_and_precision_make_the_same_decision():
    by_alias = TrainingOptimizer.from_arguments(TrainArguments(enable_mixed_precision=False), gpu=AMPERE).plan()
    by_name = TrainingOptimizer.from_arguments(TrainArguments(precision="fp32"), gpu=AMPERE).plan()
    auto = TrainingOptimizer.from_arguments(TrainArguments(), gpu=AMPERE).plan()
    assert by_alias.to_dict() == by_name.to_dict()
    assert not by_alias.is_applied(MIXED_PRECISION) and by_alias.precision["precision"] == "fp32"
    assert "turned off by the user (precision='fp32')" in by_alias.to_markdown()
    assert auto.is_applied(MIXED_PRECISION) and auto.precision["precision"] == "bf16"


def test_the_cli_flag_is_the_alias():
    parsed = build_parser().parse_args(["train", "--train-csv", "x.csv", "--no-enable-mixed-precision"])
    options = {f.name: getattr(parsed, f.name) for f in fields(TrainArguments)}
    assert TrainArguments(**options).precision == "fp32"
    parsed = build_parser().parse_args(["train", "--train-csv", "x.csv", "--precision", "fp16"])
    assert TrainArguments(**{f.name: getattr(parsed, f.name) for f in fields(TrainArguments)}).precision == "fp16"


def test_the_page_shows_one_precision_control_and_keeps_the_api_parameter():
    components = form.create_components()
    assert "enable_mixed_precision" in form.form_ids(), "/start_training still takes it"
    assert components["enable_mixed_precision"].visible is False and components["precision"].visible is not False
    assert list(components["precision"].choices) == [(c, c) for c in ("auto", "bf16", "fp16", "fp32")]
    # A submission through the API with the alias False trains in FP32.
    values = {**form.form_values(TrainArguments(train_csv="data/metadata.csv")), "enable_mixed_precision": False}
    assert form.arguments_from_form(values, "output").precision == "fp32"
    # A run recorded before the knob was one (alias False, precision auto) shows FP32 on the form.
    shown = form.form_values({"enable_mixed_precision": False, "precision": "auto"})
    assert (shown["precision"], shown["enable_mixed_precision"]) == ("fp32", True)


def test_what_will_be_applied_follows_the_precision_control():
    defaults = TrainArguments()
    values = {name: getattr(defaults, name) for name in PLAN_OPTIONS}
    fp32 = plan_markdown(*{**values, "precision": "fp32"}.values())
    assert f"**{MIXED_PRECISION}**: off. turned off by the user (precision='fp32')" in fp32
    assert f"**{SDPA}**: on." in fp32
