"""The memory planner: against the CPU allocator on real steps, against torch's MemTracker, and its rules."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from itertools import pairwise

import pytest
import torch

from utils.memory_plan import tracker as t
from utils.memory_plan.architecture import PUBLISHED_XTTS_V2_ARGS, resolve_architecture
from utils.memory_plan.cuda_emulation import (
    CPU_LOWER_PRECISION,
    CUDA_FP32_SET_OPT_DTYPE,
    CUDA_LOWER_PRECISION,
    CUDA_PROMOTE,
    cuda_autocast_policy,
    efficient_sdpa,
    native_dropout,
    registered_autocast_ops,
)
from utils.memory_plan.planner import (
    MemoryEstimate,
    batch_model,
    estimate_gpt_memory,
    largest_batch_that_fits,
    step_settings,
    ways_to_fit,
)
from utils.memory_plan.probe import BACK_OFF, confirm_batch_size
from utils.memory_plan.trace import BatchModel, StepSettings, StepTrace, _aligned, trace_step
from utils.options.arguments import TrainArguments

TINY_PLAN = {"version": "tiny", "grad_acumm": 1}


def _within(predicted: float, measured: float, tolerance: float) -> bool:
    return abs(predicted - measured) <= tolerance * measured


# --- against the real allocator ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mid_models(tmp_path_factory, tiny_base):
    """A mid-size XTTS (6 layers x 384 channels, 6 heads) built locally from the tiny one."""
    from utils.memory_check.step_measure import build_model_folder

    folder = tmp_path_factory.mktemp("models")
    build_model_folder(folder / "mid", layers=6, width=384, heads=6)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(
    "version, batch, checkpoint, sdpa",
    [("tiny", 4, False, False), ("mid", 4, False, True), ("mid", 4, True, True)],
)
def test_planner_matches_the_cpu_allocator_on_a_real_training_step(
    version, batch, checkpoint, sdpa, mid_models, tmp_path
):
    """The product's real CPU step (train_gpt's setup, coqui's Trainer.train_step) measured by the CPU
    allocator's own accounting, against the planner's trace of the same step with fake tensors."""
    from utils.memory_check.step_measure import cpu_step_settings, real_cpu_step

    models_dir = mid_models if version == "mid" else None
    measured, shapes = real_cpu_step(
        version, tmp_path, batch, enable_grad_checkpoint=checkpoint, enable_sdpa=sdpa, models_dir=models_dir
    )
    settings = cpu_step_settings(version, shapes, checkpoint, sdpa, models_dir)
    planned = trace_step(settings)
    _, peak = planned.peak()
    predicted = sum(peak.values())
    assert _within(predicted, measured.peak_bytes, 0.15), (predicted, measured)
    # The part the step itself allocates (activations, gradients, temporaries) is held to the same bound.
    assert _within(predicted - measured.resident_bytes, measured.step_peak_bytes, 0.15), (predicted, measured)
    assert planned.assumed_true == 2, "coqui's stop-token assert (step, eval pass): the only branches on a fake value"


@pytest.mark.slow
@pytest.mark.slow
@pytest.mark.parametrize("optimizer, lora_rank", [("adamw_8bit", 0), ("adamw", 8)])
def test_planner_matches_the_cpu_allocator_with_8bit_adamw_and_lora(optimizer, lora_rank, mid_models, tmp_path):
    """bitsandbytes' AdamW8bit and PEFT's LoRA on a real CPU step of the mid-size model, within 10%."""
    from utils.memory_check.step_measure import cpu_step_settings, real_cpu_step

    measured, shapes = real_cpu_step(
        "mid",
        tmp_path,
        4,
        enable_grad_checkpoint=True,
        enable_sdpa=True,
        models_dir=mid_models,
        optimizer=optimizer,
        lora_rank=lora_rank,
    )
    settings = cpu_step_settings("mid", shapes, True, True, mid_models, optimizer=optimizer, lora_rank=lora_rank)
    _, peak = trace_step(settings).peak()
    predicted = sum(peak.values())
    assert _within(predicted, measured.peak_bytes, 0.10), (predicted, measured)
    if optimizer == "adamw_8bit":  # a quarter of AdamW's two FP32 moments, plus the block scales
        assert peak[t.OPTIMIZER_STATE] < 0.3 * 2 * peak[t.WEIGHTS], peak
    else:  # the adapters: a few percent of the weights train, the rest is frozen
        assert peak[t.WEIGHTS] < 0.1 * peak[t.FROZEN], peak


def test_tracker_agrees_with_torch_memtracker_on_the_same_trace(tiny_base):
    """An independent accounting of the same fake trace: torch.distributed._tools.mem_tracker.MemTracker."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from utils.memory_plan import trace as tr

    # leaner_steps=False: the whole model resident on the GPU, as MemTracker counts it (the product keeps the
    # HiFi-GAN decoder on the CPU, which only our tracker knows).
    settings = StepSettings(
        resolve_architecture("tiny"), 3, 44100, 40, 132300, False, True, "bf16", target="cuda", leaner_steps=False
    )
    ours = trace_step(replace(settings))
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    model, _ = tr.build_fake_model(
        settings.architecture, settings.audio_samples, tr._optimizer_params(settings), fake_mode
    )
    theirs = MemTracker()
    with fake_mode, t.RealMetadata(), tr._emulation(settings):
        optimizer = model.get_optimizer()
        for p in [p for g in optimizer.param_groups for p in g["params"]]:
            p.grad = torch.zeros_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        theirs.track_external(model, optimizer)
        with theirs:
            batch = tr.worst_case_batch(settings, True)
            tr._step(model, optimizer, batch, settings, t.MemoryTracker())
    their_peak = max(snapshot["Total"] for snapshot in theirs.get_tracker_snapshot("peak").values())
    _, peak = ours.peak()
    # MemTracker rounds CPU tensors to the byte, ours to CUDA's 512-byte blocks: a few KiB apart.
    assert _within(sum(peak.values()), their_peak, 0.02), (sum(peak.values()), their_peak)


# --- the batch fit ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_fit(tiny_base):
    arguments = TrainArguments(version="tiny", grad_acumm=1, batch_size=2)
    settings = step_settings(arguments, {})
    fit, _ = batch_model(settings)
    return settings, fit


@pytest.mark.slow
def test_batch_fit_matches_a_direct_trace_and_grows_with_the_batch(tiny_fit):
    settings, fit = tiny_fit
    assert isinstance(fit, BatchModel), "the traces at batch 2 and 3 line up event by event"
    direct = trace_step(replace(settings, batch_size=5))
    _, peak = direct.peak()
    _, fitted = fit.at(5)
    assert _within(sum(fitted.values()), sum(peak.values()), 0.001)
    totals = [sum(fit.at(b)[1].values()) for b in range(1, 17)]
    assert all(a <= b for a, b in pairwise(totals)), "never shrinks as the batch grows"
    assert totals[-1] > totals[0] * 1.5, "activations grow with the batch"


@pytest.mark.slow
def test_checkpointing_lowers_the_activations(mid_models):
    common = {"version": "mid", "models_dir": str(mid_models), "batch_size": 8, "grad_acumm": 1, "enable_sdpa": True}
    without = estimate_gpt_memory(**common, enable_grad_checkpoint=False)
    with_ckpt = estimate_gpt_memory(**common, enable_grad_checkpoint=True)
    assert with_ckpt.breakdown_gib["activations"] < 0.6 * without.breakdown_gib["activations"]
    assert with_ckpt.breakdown_gib["weights"] == pytest.approx(without.breakdown_gib["weights"])


@pytest.mark.slow
def test_largest_batch_that_fits_is_the_largest_under_the_budget(tiny_fit):
    def required(batch: int) -> int:
        return estimate_gpt_memory(**TINY_PLAN, batch_size=batch).required_bytes

    budget = required(6) + 1024
    assert largest_batch_that_fits(budget, **TINY_PLAN) == 6
    assert required(7) > budget
    assert largest_batch_that_fits(required(1) - 1, **TINY_PLAN) == 0
    assert largest_batch_that_fits(10**15, **TINY_PLAN) == 512, "capped at TrainArguments' limit"
    auto = estimate_gpt_memory(**TINY_PLAN, batch_size="auto", free_bytes=budget)
    assert auto.batch_size == 6 and auto.fits(budget)


@pytest.mark.slow
def test_estimate_is_the_same_function_from_gpt_train_and_unpacks(tiny_fit):
    from utils.gpt_train import estimate_gpt_memory as from_gpt_train

    estimate = from_gpt_train("", "tiny", "en", 1, 3, 1)  # train_gpt's positional order
    assert isinstance(estimate, MemoryEstimate) and estimate.batch_size == 3
    peak, breakdown = estimate
    assert set(breakdown) == {
        "weights",
        "gradients",
        "optimizer_state",
        "activations",
        "optimizer_temporaries",
        "frozen_models",
        "cuda_overhead",
    }
    assert peak == pytest.approx(sum(breakdown.values()))
    assert breakdown["cuda_overhead"] * 1024 == pytest.approx(450), "context + kernels, MiB"
    assert estimate.trace_seconds == 0.0, "the fit was cached by the fixture"
    without_frozen = from_gpt_train(version="tiny", batch_size=3, grad_acumm=1, frozen_models_on_gpu=False)
    assert without_frozen.peak_gib < peak and without_frozen.breakdown_gib["frozen_models"] == 0


@pytest.mark.slow
def test_ways_to_fit_name_changes_with_their_planned_peaks(tiny_fit):
    plain = {**TINY_PLAN, "batch_size": 12, "enable_grad_checkpoint": False}
    too_big = estimate_gpt_memory(**plain)
    budget = estimate_gpt_memory(**{**plain, "batch_size": 4}).required_bytes
    assert not too_big.fits(budget)
    ways = {way["change"]: way for way in ways_to_fit(budget, **plain)}
    assert (
        "turn on gradient checkpointing" in ways
        and ways["turn on gradient checkpointing"]["peak_gib"] < too_big.peak_gib
    )
    smaller = next(way for change, way in ways.items() if change.startswith("batch_size="))
    batch, accumulation = smaller["keywords"]["batch_size"], smaller["keywords"]["grad_acumm"]
    assert smaller["fits"] and batch < 4, "accumulating holds the gradients: a smaller batch than without"
    assert (accumulation - 1) * batch < 12 <= accumulation * batch, "the same effective batch, rounded up"
    for way in ways.values():
        assert way["fits"] == (way["required_gib"] * 1024**3 <= budget)
    lora = next(way for change, way in ways.items() if change.startswith("LoRA"))
    assert lora["peak_gib"] < too_big.peak_gib


@pytest.mark.slow
def test_ways_to_fit_offer_checkpointing_off_only_where_it_fits_and_no_useless_shorter_clip(tiny_fit):
    on = {**TINY_PLAN, "batch_size": 2, "enable_grad_checkpoint": True, "max_audio_length": 255995}
    roomy = estimate_gpt_memory(**{**on, "enable_grad_checkpoint": False}).required_bytes
    ways = {way["change"]: way for way in ways_to_fit(roomy, **on)}
    assert ways["turn off gradient checkpointing (~1.37x faster)"]["fits"]
    accumulating = {way["change"]: way for way in ways_to_fit(roomy, **{**on, "grad_acumm": 2})}
    assert accumulating["grad_acumm=1 (no gradients held between micro-steps)"]["keywords"] == {"grad_acumm": 1}
    tight = estimate_gpt_memory(**on).required_bytes
    if tight < roomy:
        assert not any("checkpointing" in change for change in (w["change"] for w in ways_to_fit(tight, **on)))
    current = estimate_gpt_memory(**on).peak_gib
    for way in ways.values():
        if "max_audio_length" in way["keywords"]:
            assert way["peak_gib"] <= 0.98 * current, "a shorter clip is offered only where it lowers the peak"


def test_traces_whose_events_do_not_line_up_are_not_fitted():
    import numpy as np

    events = np.array([[0, 10], [0, 30], [0, 20]])
    first = StepTrace(2, events, ["activations"] * 3, 0.0)
    assert _aligned(first, StepTrace(3, events * 2, first.phases, 0.0))
    swapped = np.array([[0, 10], [0, 5], [0, 20]])  # a free before an allocation instead of after
    assert not _aligned(first, StepTrace(3, swapped, first.phases, 0.0))


# --- the rules -------------------------------------------------------------------------------------


def test_bad_arguments_are_refused_before_any_trace():
    with pytest.raises(ValueError, match="Unknown option"):
        estimate_gpt_memory(version="tiny", batch_sise=2)
    with pytest.raises(ValueError, match="batch_size"):
        estimate_gpt_memory(version="tiny", batch_size=0)
    with pytest.raises(ValueError, match="device"):
        estimate_gpt_memory(version="tiny", device="tpu")
    with pytest.raises(ValueError, match="Unknown base model version"):
        estimate_gpt_memory(version="v9")
    with pytest.raises(ValueError, match="free_bytes"):
        largest_batch_that_fits(-1, version="tiny")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="free_bytes"):
            estimate_gpt_memory(version="tiny", batch_size="auto")


def test_published_architecture_is_used_until_the_files_are_there(tmp_path):
    arch = resolve_architecture("v2.0.2", str(tmp_path))
    args = arch.args()
    assert "not downloaded" in arch.source and arch.vocab_file is None
    assert (arch.layers, arch.width, args["gpt_n_heads"]) == (30, 1024, 16)
    assert args["gpt_num_audio_tokens"] == 1026 and args["gpt_number_text_tokens"] == 6681
    assert args["gpt_use_perceiver_resampler"] and args["gpt_start_text_token"] == 261
    # Once a config.json is on disk, it is read instead.
    folder = tmp_path / "v2.0.2"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_args": {**PUBLISHED_XTTS_V2_ARGS, "gpt_layers": 12}, "languages": ["en"]})
    )
    on_disk = resolve_architecture("v2.0.2", str(tmp_path))
    assert on_disk.layers == 12 and str(folder) in on_disk.source
    # A language the model does not know grows the text vocabulary, as the run would.
    new = resolve_architecture("v2.0.2", str(tmp_path), language="amh", vocab_new_tokens=1000)
    assert new.args()["gpt_number_text_tokens"] > 6681 + 1000


def test_tiny_architecture_comes_from_its_config(tiny_base):
    arch = resolve_architecture("tiny")
    config = json.loads(tiny_base.config.read_text())
    assert arch.layers == config["model_args"]["gpt_layers"] and arch.vocab_file == str(tiny_base.vocab)


def test_cuda_policy_lists_match_the_dispatcher():
    """Fails when a torch upgrade changes CUDA autocast's op lists: the emulation must follow."""
    cuda_ops = registered_autocast_ops("AutocastCUDA")
    assert cuda_ops, "this torch build has CUDA autocast kernels"
    known = {name for name in CUDA_LOWER_PRECISION | CUDA_FP32_SET_OPT_DTYPE | CUDA_PROMOTE if name in cuda_ops}
    assert known >= (CUDA_FP32_SET_OPT_DTYPE | CUDA_PROMOTE) - {"vdot"} and "softmax.int" in known
    assert {"layer_norm", "pow.Tensor_Scalar", "exp", "nll_loss"} <= cuda_ops - known, "FP32 ops"
    assert registered_autocast_ops("AutocastCPU") >= CPU_LOWER_PRECISION


def test_cuda_autocast_policy_casts_like_a_gpu_and_is_undone():
    x = torch.randn(4, 8)
    weight = torch.randn(8, 8, requires_grad=True)

    def dtypes() -> dict[str, torch.dtype]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.nn.functional.linear(x, weight)
            return {
                "linear": h.dtype,
                "softmax": torch.softmax(h, -1).dtype,
                "pow": torch.pow(h, 3.0).dtype,
                "layer_norm": torch.nn.functional.layer_norm(h, (8,)).dtype,
            }

    cpu = dtypes()
    with cuda_autocast_policy():
        cuda = dtypes()
    assert cuda == {
        "linear": torch.bfloat16,
        "softmax": torch.float32,
        "pow": torch.float32,
        "layer_norm": torch.float32,
    }
    assert cpu["softmax"] == torch.bfloat16 and dtypes() == cpu, "CPU autocast is back as it was"


def test_efficient_attention_keeps_no_attention_matrix():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def saved_bytes(emulate: bool) -> int:
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        tracker = t.MemoryTracker()
        with fake_mode, efficient_sdpa() if emulate else torch.autograd.graph.saved_tensors_hooks(id, id):
            q, k, v = (torch.empty(2, 4, 512, 64, requires_grad=True) for _ in range(3))
            mask = torch.ones(2, 1, 512, 512, dtype=torch.bool)
            with tracker:
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1)
            del out
            return max(sum(e) for e in tracker.events)

    # The math kernel keeps (batch, heads, 512, 512) scores; the efficient one keeps its output and
    # the mask as an additive bias.
    matrix = 2 * 4 * 512 * 512 * 4
    assert saved_bytes(False) > matrix
    assert saved_bytes(True) < matrix


def test_gpu_dropout_keeps_a_boolean_mask():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def kept_bytes(emulate: bool) -> int:
        tracker = t.MemoryTracker()
        with FakeTensorMode(), native_dropout() if emulate else contextlib.nullcontext():
            x = torch.empty(1000, 1000, requires_grad=True)
            with tracker:
                y = torch.nn.functional.dropout(x, 0.1, True)
            assert y.shape == x.shape
            return sum(tracker.current)

    output = 1000 * 1000 * 4
    assert kept_bytes(False) == 2 * output, "CPU: the output and an FP32 noise tensor kept for backward"
    assert kept_bytes(True) == output + output // 4, "GPU: the output and a boolean mask"


def test_probe_backs_off_until_a_step_runs():
    tried = []

    def step(batch: int) -> None:
        tried.append(batch)
        if batch > 6:
            raise torch.OutOfMemoryError("CUDA out of memory")

    confirmed = confirm_batch_size(12, step)
    assert tried[0] == 12 and tried == sorted(tried, reverse=True) and tried[-1] == confirmed
    assert BACK_OFF * 6 <= confirmed <= 6, "backs off by at most a fifth below the largest that runs"
    tried.clear()
    assert confirm_batch_size(4, step) == 4 and tried == [4], "one probe step when the plan fits"
    with pytest.raises(torch.OutOfMemoryError):
        confirm_batch_size(3, lambda batch: (_ for _ in ()).throw(torch.OutOfMemoryError("oom")))
    with pytest.raises(ValueError):
        confirm_batch_size(0, step)


def test_real_metadata_refuses_values_a_shape_trace_cannot_know():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True), t.RealMetadata() as metadata:
        lengths = torch.tensor([3, 5])
        mask = torch.ones(2, 6, dtype=torch.bool)
        mask[0, int(lengths[0]) :] = False  # real metadata: slicing by a real value works
        assert not isinstance(mask, torch._subclasses.fake_tensor.FakeTensor) and int(mask.sum()) == 9
        big = torch.empty(1000, 1000)
        with pytest.raises(t.PlanningError):
            int(big.sum())
        assert bool(big.sum() > 0) and metadata.assumed_true == 1


@pytest.mark.slow
def test_full_size_plan_without_the_files_counts_the_published_model(tmp_path):
    """A single trace of the full-size model (no weights, no download): the fixed parts by count."""
    pytest.importorskip("TTS")
    arguments = TrainArguments(version="v2.0.2", models_dir=str(tmp_path), batch_size=1, grad_acumm=1)
    settings = step_settings(arguments, {"leaner_steps": False})  # coqui's step: every frozen model on the GPU
    _, peak = trace_step(settings).peak()
    gib = 1024**3
    assert peak[t.WEIGHTS] / gib == pytest.approx(441.0e6 * 4 / gib, rel=0.01)  # 441 M trainable parameters
    assert peak[t.OPTIMIZER_STATE] == pytest.approx(2 * peak[t.WEIGHTS], rel=0.001)  # AdamW's two moments
    assert peak[t.FROZEN] / gib == pytest.approx(77.4e6 * 4 / gib, rel=0.03)  # DVAE + HiFi-GAN
    _, leaner = trace_step(step_settings(arguments, {})).peak()
    assert leaner[t.FROZEN] < 0.75 * peak[t.FROZEN], "train_gpt keeps the HiFi-GAN decoder off the GPU"
