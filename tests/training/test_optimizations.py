"""TrainingOptimizer really switches gradient checkpointing, SDPA and mixed precision on (CPU, tiny model)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import simulated_gpu, tiny_training_setup
from tests.training.model_helpers import build_model, count_mlp_calls, synthetic_batch, without_dropout
from utils.training_optimizations import (
    GPUInfo,
    TrainingOptimizer,
    architecture_for,
    choose_precision,
    detect_gpu,
    get_memory_stats,
    gpt_transformer,
)


def loss_and_grads(model, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss_text, loss_mel, _ = model.xtts.gpt(**batch)
    loss = loss_text * 0.01 + loss_mel
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.xtts.gpt.gpt.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("enabled", [True, False])
def test_checkpointing_recomputes_every_block_once_more_with_the_same_gradients(tiny_base, tmp_path, enabled):
    model, config = build_model(tiny_base, tmp_path)
    without_dropout(model)
    model.xtts.gpt.train()
    reference_state = {k: v.clone() for k, v in model.state_dict().items()}

    TrainingOptimizer(enable_grad_checkpoint=False, enable_sdpa=True, enable_mixed_precision=False).apply(model, config)
    gpt2 = gpt_transformer(model)
    counts_off = count_mlp_calls(gpt2)
    loss_off, grads_off = loss_and_grads(model, synthetic_batch())
    assert counts_off == [1] * len(gpt2.h)

    model.load_state_dict(reference_state)
    report = TrainingOptimizer(enable_grad_checkpoint=enabled, enable_sdpa=True, enable_mixed_precision=False).apply(
        model, config
    )
    assert report.is_applied("gradient checkpointing") is enabled
    assert [b.gradient_checkpointing for b in gpt2.h] == [enabled] * len(gpt2.h)
    assert gpt2.config.use_cache is False
    counts_on = count_mlp_calls(gpt2)
    loss_on, grads_on = loss_and_grads(model, synthetic_batch())
    expected = 2 if enabled else 1  # forward, plus the recompute in backward
    assert counts_on == [expected] * len(gpt2.h)
    assert torch.allclose(loss_on, loss_off, atol=1e-6)
    assert grads_on.keys() == grads_off.keys() and len(grads_on) > 10
    for name, grad in grads_on.items():
        assert torch.allclose(grad, grads_off[name], atol=1e-6, rtol=1e-4), name


def test_sdpa_switches_the_attention_implementation_and_keeps_the_loss(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    model.eval()
    batch = synthetic_batch()
    implementations, losses = {}, {}
    for enabled in (True, False):
        report = TrainingOptimizer(
            enable_grad_checkpoint=False, enable_sdpa=enabled, enable_mixed_precision=False
        ).apply(model, config)
        gpt2 = gpt_transformer(model)
        implementations[enabled] = gpt2.config._attn_implementation
        assert report.is_applied("SDPA attention") is enabled
        with torch.no_grad():
            text, mel, _ = model.xtts.gpt(**{k: (v.clone() if v is not None else None) for k, v in batch.items()})
        losses[enabled] = (text.item(), mel.item())
    assert implementations == {True: "sdpa", False: "eager"}
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


@pytest.mark.parametrize(
    "capability, architecture, precision, scaler",
    [
        ((6, 1), "Pascal", "fp32", False),
        ((7, 0), "Volta", "fp16", True),
        ((7, 5), "Turing", "fp16", True),
        ((8, 0), "Ampere", "bf16", False),
        ((8, 6), "Ampere", "bf16", False),
        ((8, 9), "Ada", "bf16", False),
        ((9, 0), "Hopper", "bf16", False),
        (None, "CPU", "fp32", False),
    ],
)
def test_auto_precision_by_architecture(capability, architecture, precision, scaler):
    assert architecture_for(capability) == architecture
    choice = choose_precision(capability, "auto")
    assert (choice.precision, choice.grad_scaler, choice.mixed_precision) == (precision, scaler, precision != "fp32")
    assert choice.reason


@pytest.mark.parametrize(
    "capability, requested, precision, reason_part",
    [
        ((7, 5), "bf16", "fp16", "no native BF16"),
        ((6, 1), "bf16", "fp32", "no tensor cores"),
        ((6, 1), "fp16", "fp32", "no tensor cores"),
        (None, "fp16", "fp32", "needs a CUDA GPU"),
        (None, "bf16", "bf16", "CPU"),
        ((8, 0), "fp16", "fp16", "GradScaler"),
        ((9, 0), "fp32", "fp32", "FP32 requested"),
    ],
)
def test_explicit_precision_falls_back_with_a_reason(capability, requested, precision, reason_part):
    choice = choose_precision(capability, requested)
    assert choice.precision == precision
    assert reason_part in choice.reason


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of"):
        choose_precision((8, 0), "fp8")


@pytest.mark.parametrize(
    "capability, mixed, precision, tf32",
    [((7, 5), True, "fp16", False), ((8, 6), True, "bf16", True), ((6, 1), False, "fp32", False)],
)
def test_apply_sets_the_trainer_config_for_the_detected_gpu(tiny_base, tmp_path, capability, mixed, precision, tf32):
    model, config = build_model(tiny_base, tmp_path)
    gpu = simulated_gpu(capability, total_memory_gb=16.0)
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    try:
        report = TrainingOptimizer(True, True, True, gpu=gpu).apply(model, config)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = flags
    assert (config.mixed_precision, config.precision) == (mixed, precision)
    assert (config.allow_tf32, config.cudnn_benchmark) == (tf32, False)  # batches vary in length: see below
    assert report.is_applied("TF32 matmuls") is tf32
    skipped = {item["name"]: item["reason"] for item in report.skipped}
    if tf32:
        assert "vary in length" in skipped["cuDNN benchmark"] and "measured" in skipped["cuDNN benchmark"]
    assert report.is_applied("mixed precision") is mixed
    names = {item["name"] for item in report.applied} | {item["name"] for item in report.skipped}
    assert names == {
        "gradient checkpointing",
        "SDPA attention",
        "mixed precision",
        "TF32 matmuls",
        "cuDNN benchmark",
        "fused GELU",
        "fused AdamW",
        "8-bit AdamW",
        "torch.compile",
    }
    assert config.optimizer_params.get("fused") is True, "a CUDA GPU steps AdamW with the fused kernel"
    assert all(item["reason"] for item in report.skipped)


def test_report_is_saved_and_explains_skips(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    report = TrainingOptimizer(False, False, True, precision="auto", gpu=GPUInfo(available=False)).apply(model, config)
    saved = json.loads(report.save(tmp_path / "optimizations.json").read_text())
    skipped = {item["name"]: item["reason"] for item in saved["skipped"]}
    assert "turned off by the user" in skipped["gradient checkpointing"]
    assert "eager" in skipped["SDPA attention"]
    assert "No CUDA GPU" in skipped["mixed precision"]
    assert saved["precision"]["precision"] == "fp32"
    markdown = report.to_markdown()
    user_choices = ("gradient checkpointing", "SDPA attention", "mixed precision", "TF32 matmuls", "cuDNN benchmark")
    assert not any(f"**{name}**: on." in markdown for name in user_choices) and "**SDPA attention**: off." in markdown
    assert "**fused GELU**: on." in markdown, "the fused GELU computes the same values: always on"


@pytest.mark.slow
@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp32", torch.float32)])
def test_real_trainer_run_uses_the_chosen_precision_and_recomputes(tiny_base, tmp_path, precision, dtype):
    setup, _ = tiny_training_setup(tiny_base, tmp_path, "precision", grad_acumm=1, precision=precision, print_step=50)
    gpt2 = gpt_transformer(setup.trainer.model)
    dtypes: list[torch.dtype] = []
    gpt2.h[0].mlp.register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
    calls = count_mlp_calls(gpt2)
    setup.trainer.fit()

    assert setup.trainer.outcome == "finished"  # a RunStatus, a str enum
    assert setup.trainer.config.mixed_precision is (precision == "bf16")
    train_steps = setup.trainer.total_steps_done
    assert train_steps == 3
    assert dtypes and set(dtypes[:train_steps]) == {dtype}, "the GPT forward ran in the chosen precision"
    # Each train step runs every block twice (forward + recompute); eval adds single forwards.
    eval_batches = len(setup.trainer.eval_loader)
    assert calls == [2 * train_steps + eval_batches] * len(gpt2.h)


def test_detect_gpu_and_memory_stats_are_safe_without_a_gpu():
    gpu = detect_gpu()
    assert detect_gpu() is gpu, "computed once"
    stats = get_memory_stats()
    assert stats["process_rss_mb"] > 0 and stats["ram_total_mb"] > stats["ram_used_mb"] > 0
    if not torch.cuda.is_available():
        assert not gpu.available and gpu.name == "no CUDA GPU"
        assert stats["gpu_allocated_mb"] is None and stats["gpu_total_mb"] is None
