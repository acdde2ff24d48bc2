"""Each optimization is decided once, from the arguments (TrainingOptimizer.from_arguments(...).plan()), and those
decisions are what the page shows, what the memory planner traces and what the run applies to the model."""

from __future__ import annotations

import pytest

from tests.training.model_helpers import build_model
from utils.device.gpu import GPUInfo
from utils.memory_plan.planner import step_settings
from utils.options.arguments import TrainArguments
from utils.options.optimizations import (
    ADAMW_8BIT,
    FUSED_ADAMW,
    GRAD_CHECKPOINTING,
    SDPA,
    TrainingOptimizer,
    gpt_transformer,
)
from webui.plan_view import PLAN_OPTIONS, plan_markdown

CPU = GPUInfo(available=False)
CASES = [
    {},
    {"enable_grad_checkpoint": False, "enable_sdpa": False},
    {"precision": "bf16", "optimizer": "adamw_8bit"},
    {"enable_mixed_precision": False, "enable_tf32": False},
]


@pytest.mark.parametrize("given", CASES)
def test_the_page_and_the_planner_read_the_same_decisions(given):
    args = TrainArguments(version="tiny", **given)
    decided = TrainingOptimizer.from_arguments(args, gpu=CPU).plan()  # this machine has no GPU, as the page sees
    page = plan_markdown(*(getattr(args, name) for name in PLAN_OPTIONS))
    assert decided.to_markdown() in page
    planned = step_settings(args, {"device": "cpu"})
    assert planned.grad_checkpoint is decided.is_applied(GRAD_CHECKPOINTING)
    assert planned.sdpa is decided.is_applied(SDPA)
    assert planned.precision == decided.precision["precision"]
    assert planned.fused_adamw is decided.is_applied(FUSED_ADAMW)
    assert (planned.optimizer == "adamw_8bit") is decided.is_applied(ADAMW_8BIT)


def test_apply_does_what_was_decided(tiny_base, tmp_path):
    """The run applies the decisions it is given, not the flags again: a decision to skip SDPA and checkpointing
    leaves the model eager and unchecked even though the arguments asked for both."""
    model, config = build_model(tiny_base, tmp_path)
    wanted = TrainingOptimizer.from_arguments(TrainArguments(version="tiny"), gpu=CPU)
    decisions = wanted.plan()
    decisions.applied = [item for item in decisions.applied if item["name"] not in (SDPA, GRAD_CHECKPOINTING)]
    decisions.skip(SDPA, "test")
    decisions.skip(GRAD_CHECKPOINTING, "test")
    applied = wanted.apply(model, config, decisions)
    gpt2 = gpt_transformer(model)
    assert applied is decisions
    assert gpt2.config._attn_implementation == "eager"
    assert not any(getattr(block, "gradient_checkpointing", False) for block in gpt2.h)
    wanted.apply(model, config)  # its own decisions: both on
    assert gpt2.config._attn_implementation == "sdpa"
    assert all(block.gradient_checkpointing for block in gpt2.h)
