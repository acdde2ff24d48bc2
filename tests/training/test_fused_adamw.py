"""Fused AdamW wherever torch has it (a CPU included), and "What will be applied" built from every option that
decides it (the form's values go through TrainArguments and TrainingOptimizer.from_arguments)."""

from __future__ import annotations

import torch

from tests.training.model_helpers import build_model, synthetic_batch
from utils.device.gpu import GPUInfo
from utils.options.arguments import TrainArguments
from utils.options.optimizations import ADAMW_8BIT, FUSED_ADAMW, TF32, TrainingOptimizer
from webui.plan_view import PLAN_OPTIONS, plan_markdown

CPU = GPUInfo(available=False)


def test_a_cpu_run_steps_the_fused_adamw_kernel(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    report = TrainingOptimizer(True, True, False, gpu=CPU).apply(model, config)
    assert report.is_applied(FUSED_ADAMW)
    detail = {item["name"]: item["detail"] for item in report.applied}[FUSED_ADAMW]
    assert "CPU" in detail and "for-loop" in detail, detail
    optimizer = model.get_optimizer()  # coqui's own AdamW construction from the config
    assert optimizer.defaults["fused"] is True
    before = model.xtts.gpt.gpt.h[0].mlp.c_fc.weight.detach().clone()
    loss_text, loss_mel, _ = model.forward(**synthetic_batch())
    (loss_text + loss_mel).backward()
    optimizer.step()
    assert not torch.equal(before, model.xtts.gpt.gpt.h[0].mlp.c_fc.weight), "the fused step moved the weights"


def test_coqui_step_as_shipped_names_the_kernel_torch_really_picks():
    plan = TrainingOptimizer(gpu=CPU, leaner_steps=False).plan()
    reason = {item["name"]: item["reason"] for item in plan.skipped}[FUSED_ADAMW]
    assert "for-loop" in reason and "foreach" not in reason, "a CPU's default AdamW is the for-loop one"


def test_the_optimizer_is_built_from_every_option_of_the_arguments():
    args = TrainArguments(enable_tf32=False, optimizer="adamw_8bit", enable_sdpa=False, precision="fp16")
    built = TrainingOptimizer.from_arguments(args, gpu=CPU)
    assert (built.enable_tf32, built.optimizer, built.enable_sdpa, built.precision) == (
        False,
        "adamw_8bit",
        False,
        "fp16",
    )


def test_what_will_be_applied_follows_tf32_and_the_optimizer_chosen_in_the_form():
    defaults = TrainArguments()
    values = {name: getattr(defaults, name) for name in PLAN_OPTIONS}
    plain = plan_markdown(*values.values())
    eight_bit = plan_markdown(*{**values, "optimizer": "adamw_8bit"}.values())
    assert "not requested" in plain and "not requested" not in eight_bit, "choosing adamw_8bit changes the plan"
    assert f"**{ADAMW_8BIT}**" in eight_bit
    exact = plan_markdown(*{**values, "enable_tf32": False}.values())
    assert f"**{TF32}**: off. turned off by the user" in exact
    assert "must be one of" in plan_markdown(*{**values, "optimizer": "lion"}.values()), "a bad value is said"
