"""torch.compile as an option: off by default and said so, on when asked (each GPT block compiled in place), and the
compiled blocks really run through TorchDynamo with the same loss and gradients as eager."""

from __future__ import annotations

import torch
from torch._dynamo.utils import counters

from tests.training.model_helpers import build_model, synthetic_batch, without_dropout
from utils.device.gpu import GPUInfo
from utils.options.arguments import TrainArguments
from utils.options.optimizations import TORCH_COMPILE, TrainingOptimizer, configure_compile, gpt_transformer

CPU = GPUInfo(available=False)


def _loss_and_grads(model):
    loss_text, loss_mel, _ = model.forward(**synthetic_batch())
    loss = loss_text + loss_mel
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in gpt_transformer(model).named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


def test_off_by_default_and_the_plan_says_why():
    plan = TrainingOptimizer.from_arguments(TrainArguments(), gpu=CPU).plan()
    reason = {item["name"]: item["reason"] for item in plan.skipped}[TORCH_COMPILE]
    assert "not yet measured on a GPU" in reason


def test_the_option_compiles_every_gpt_block_in_place(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    names = list(model.state_dict())
    args = TrainArguments(torch_compile=True)
    report = TrainingOptimizer.from_arguments(args, gpu=CPU).apply(model, config)
    assert report.is_applied(TORCH_COMPILE), report.skipped
    gpt2 = gpt_transformer(model)
    assert all(block._compiled_call_impl is not None for block in gpt2.h)
    assert list(model.state_dict()) == names, "checkpoints keep their names (no _orig_mod. prefix)"
    configure_compile(gpt2, False)
    assert all(block._compiled_call_impl is None for block in gpt2.h)


def test_compiled_blocks_run_through_dynamo_with_eager_gradients(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    TrainingOptimizer(True, True, False, gpu=CPU).apply(model, config)  # checkpointing on: recompute compiled too
    model.train()
    without_dropout(model)
    eager_loss, eager_grads = _loss_and_grads(model)
    # aot_eager traces forward and backward like Inductor without generating C++ (seconds, not a minute).
    configure_compile(gpt_transformer(model), True, backend="aot_eager")
    counters.clear()
    compiled_loss, compiled_grads = _loss_and_grads(model)
    assert counters["stats"]["unique_graphs"] >= 1, dict(counters["stats"])
    assert counters["aot_autograd"]["total"] >= 1, "the blocks' backward was traced too"
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-6)
    assert compiled_grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
