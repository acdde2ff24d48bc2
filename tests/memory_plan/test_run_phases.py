"""The whole run planned: each phase against what a real model allocates on this CPU, and the generation batch."""

from __future__ import annotations

import pytest

from utils.memory_plan import run_phases as rp
from utils.memory_plan import tracker as t
from utils.memory_plan.estimate import GIB
from utils.memory_plan.planner import estimate_gpt_memory, largest_generation_batch


def _within(predicted: float, measured: float, tolerance: float) -> bool:
    return abs(predicted - measured) <= tolerance * measured


@pytest.fixture(scope="module")
def measured(tmp_path_factory, tiny_base):
    """A mid-size model (6 layers x 384) in train_gpt's real setup: one eval-loss batch of 4, the reference's
    conditioning latents, and 3 then 10 texts generated as one batch, each measured by the CPU allocator."""
    from utils.memory_check.phase_measure import measure_phases
    from utils.memory_check.step_measure import build_model_folder

    models = tmp_path_factory.mktemp("models")
    build_model_folder(models / "mid", layers=6, width=384, heads=6)
    phases = measure_phases(
        "mid", tmp_path_factory.mktemp("work"), 4, models_dir=models, enable_grad_checkpoint=True, enable_sdpa=True
    )
    return models, phases


@pytest.mark.slow
def test_each_phase_matches_the_cpu_allocator(measured):
    """The eval-loss pass (traced after the step) and the scored evaluation's generation and conditioning, planned
    for the same shapes, against the real run's allocations beyond what is resident."""
    from utils.memory_check.step_measure import cpu_step_settings
    from utils.memory_plan.trace import trace_step

    models, phases = measured
    settings = cpu_step_settings("mid", phases.shapes, True, True, models)
    _, evaluation = trace_step(settings).eval_peak()
    resident = evaluation[t.WEIGHTS] + evaluation[t.FROZEN] + evaluation[t.OPTIMIZER_STATE]
    assert _within(resident, phases.resident_bytes, 0.02), (resident, phases.resident_bytes)
    assert _within(sum(evaluation.values()) - resident, phases.eval_loss_bytes, 0.10), (evaluation, phases)
    arch = settings.architecture
    for rows, real in phases.generation_bytes.items():  # the KV cache grows with the rows generated together
        planned = rp.generation_bytes(arch, rows, phases.text_tokens, phases.cap)
        assert _within(planned, real, 0.08), (rows, planned, real)
    parts = rp.inference_parts(arch)
    speaker = parts["speaker_fixed_bytes"] + parts["speaker_bytes_per_second"] * phases.reference_seconds
    conditioning = max(parts["style_bytes"], speaker)
    # Planned for a full 4 s chunk; the measured reference is 3 s: never below, not far above.
    assert phases.conditioning_bytes <= conditioning <= 1.5 * phases.conditioning_bytes, (conditioning, phases)


@pytest.mark.slow
def test_every_phase_is_planned_and_the_peak_is_the_largest(tiny_base):
    plan = estimate_gpt_memory(version="tiny", batch_size=4, grad_acumm=2, quality_eval=3)
    assert list(plan.phase_peaks_gib) == list(rp.PHASES)
    assert plan.peak_gib == max(plan.phase_peaks_gib.values())
    assert plan.phase_peaks_gib[plan.peak_phase] == plan.peak_gib
    assert plan.peak_gib == pytest.approx(sum(plan.breakdown_gib.values()))
    assert plan.generated_rows == 3 + rp.PROBES_PER_EVALUATION
    off = estimate_gpt_memory(version="tiny", batch_size=4, grad_acumm=2, quality_eval=0)
    assert rp.SCORED_EVALUATION not in off.phase_peaks_gib and off.generation_batch == 0
    assert "No scored evaluation" in off.to_markdown()


@pytest.mark.slow
def test_the_generation_batch_is_the_largest_within_the_training_step(tiny_base):
    """Many texts: the chosen batch keeps the scored evaluation at or below the step, one more would not."""
    keywords = {"version": "tiny", "batch_size": 4, "grad_acumm": 1, "generated_rows": 400}
    plan = estimate_gpt_memory(**keywords)
    batch = plan.generation_batch
    assert 1 < batch < 400 and largest_generation_batch(**keywords) == batch
    step = plan.phase_peaks_gib[rp.TRAINING_STEP]
    assert plan.phase_peaks_gib[rp.SCORED_EVALUATION] <= step
    arch = _arch("tiny")
    cap = rp.token_cap(arch, plan.settings["longest_clip_seconds"])
    one_more = rp.generation_bytes(arch, batch + 1, 200, cap) - rp.generation_bytes(arch, batch, 200, cap)
    assert plan.phase_peaks_gib[rp.SCORED_EVALUATION] + one_more / GIB > step, "a larger batch would also fit"
    assert plan.peak_phase == rp.TRAINING_STEP


@pytest.mark.slow
def test_a_scored_evaluation_over_the_step_even_at_batch_1_is_said(tiny_base):
    """Decoding a 28 s row on the GPU (best_by cer: scored in the loop) outgrows the tiny model's step."""
    plan = estimate_gpt_memory(
        version="tiny", batch_size=1, grad_acumm=1, best_by="cer", decoder_on_gpu=True, quality_max_audio_tokens=600
    )
    assert plan.generation_batch == 1 and plan.peak_phase == rp.SCORED_EVALUATION
    assert plan.peak_gib > plan.phase_peaks_gib[rp.TRAINING_STEP]
    assert any("even at generation batch 1" in note for note in plan.phase_notes)
    assert "scored evaluation **(peak)**" in plan.to_markdown()


def test_the_length_cap_and_rows_follow_the_quality_evaluation():
    """The planner restates quality_eval.py's cap (it stays below the training layer): the two must agree."""
    from utils.training.evaluation import quality_eval as qe

    assert (rp.TOKENS_PER_SECOND, rp.AUTO_CAP_FACTOR, rp.AUTO_CAP_EXTRA_TOKENS) == (
        qe.TOKENS_PER_SECOND,
        qe.AUTO_CAP_FACTOR,
        qe.AUTO_CAP_EXTRA_TOKENS,
    )
    arch = _arch("v2.0.2")
    sentence = qe.EvalSentence("a", "a", "a.wav", 7.3)
    evaluator = qe.QualityEvaluator([sentence], ".", "a.wav", "en", seed=1, whisper_model="")
    assert rp.token_cap(arch, 7.3) == evaluator.token_cap(sentence)
    assert rp.token_cap(arch, 60.0) == 602, "bounded by the GPT's own generation limit"
    assert rp.generated_rows(3) == 7 and rp.generated_rows(0) == 0


def _arch(version: str):  # type: ignore[no-untyped-def]
    from utils.memory_plan.architecture import resolve_architecture

    return resolve_architecture(version)
