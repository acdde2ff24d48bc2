"""GPU memory planning for XTTS GPT fine-tuning: the predicted peak of a training step with its
breakdown, the largest batch that fits, and a probe hook that confirms a batch with a real step.

    from utils.gpt_train import estimate_gpt_memory
    peak_gib, breakdown = estimate_gpt_memory(version="v2.0.2", batch_size=8, grad_acumm=2)

Modules: `architecture` (which model), `fake_model` (built without weights), `cuda_emulation` (GPU
autocast and attention kernels), `tracker` (bytes per category), `trace` (the product's step, its eval pass and
the batch fit), `memory_model` (the shipped fits, memory_model.json; `regenerate` remakes them), `run_phases`
(every phase of the run: eval loss, scored evaluation, checkpoint save), `estimate` (the answer),
`planner` (public functions), `fit_gpu` (the fastest configuration that fits a card),
`eight_bit` (bitsandbytes' 8-bit AdamW state), `probe` (confirming on a GPU), `child` (planning in a separate
process, as the web app does). The CPU allocator's peak of a real step, to check the planner against, is measured
by utils.memory_check.step_measure (it runs the training layer's step; the planner stays below training).
"""

from utils.memory_plan.fit_gpu import GpuFit, fit_my_gpu
from utils.memory_plan.planner import (
    MemoryEstimate,
    detected_free_bytes,
    estimate_gpt_memory,
    fit_advice,
    largest_batch_that_fits,
    largest_generation_batch,
    ways_to_fit,
)
from utils.memory_plan.probe import confirm_batch_size

__all__ = [
    "GpuFit",
    "MemoryEstimate",
    "confirm_batch_size",
    "detected_free_bytes",
    "estimate_gpt_memory",
    "fit_advice",
    "fit_my_gpu",
    "largest_batch_that_fits",
    "largest_generation_batch",
    "ways_to_fit",
]
