"""Measuring the real memory of a run's phases on the CPU, to check the planner's per-phase plan against.

As utils.memory_check.step_measure measures a training step, this measures, on the same kind of real model
(train_gpt's setup, coqui's Trainer), what the other phases allocate on top of what is resident (weights, buffers, AdamW
state): one batch of the eval-loss pass (`Trainer.eval_step`, as `eval_epoch` runs it) and a scored evaluation's
parts (`conditioning_latents` of the reference clip, `generate_latents` of n texts as one batch, with the
run's model made ready to speak by `quality_eval.speaking`). The figures are the CPU allocator's own accounting.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from utils.memory_check.step_measure import (
    batch_shapes,
    measure_cpu_step,
    measuring_setup,
    model_and_optimizer_tensors,
    resident_bytes,
)

SENTENCE = "she sells sea shells by the sea shore and the shells are small"


@dataclass(frozen=True)
class MeasuredPhases:
    """Bytes each phase allocated beyond what was resident (the CPU allocator's peak of the running sum)."""

    resident_bytes: int
    eval_loss_bytes: int
    conditioning_bytes: int
    generation_bytes: dict[int, int]  # texts generated as one batch -> bytes
    shapes: dict[str, int]  # the eval batch: batch_size, text_tokens, audio_samples, conditioning_samples
    text_tokens: int  # tokens of each generated text
    cap: int  # audio tokens each text may generate
    reference_seconds: float


def measure_phases(
    version: str,
    work_dir: str | os.PathLike,
    batch_size: int,
    *,
    models_dir: str | os.PathLike | None = None,
    clip_seconds: float = 3.0,
    rows: tuple[int, ...] = (3, 10),
    cap: int = 200,
    **options: Any,
) -> MeasuredPhases:
    """A real CPU run's setup (FP32, no workers), one training step to allocate AdamW's state, then each phase
    measured once: the eval-loss pass on a batch of `batch_size`, the reference's conditioning latents, and
    the generation of each of `rows` copies of one sentence capped at `cap` audio tokens (seed fixed)."""
    from utils.model.inference import conditioning_latents, generate_latents
    from utils.training.evaluation.quality_eval import speaking

    options = {**options, "quality_eval": 0}
    with measuring_setup(version, work_dir, batch_size, models_dir, clip_seconds, options) as (setup, csv_path):
        trainer, model = setup.trainer, setup.trainer.model
        loader = model.get_data_loader(trainer.config, is_eval=False, samples=trainer.train_samples, verbose=False)
        model.on_train_epoch_start(trainer)
        trainer.train_step(next(iter(loader)), 1, 0, time.time())  # allocates AdamW's state
        resident = resident_bytes(model_and_optimizer_tensors(model, trainer.optimizer[0]))
        batch = next(iter(loader))
        shapes = batch_shapes(batch)
        trainer.model.eval()  # as coqui's eval_epoch
        eval_loss = measure_cpu_step(lambda: trainer.eval_step(trainer.format_batch(batch), 0), resident)
        reference = csv_path.parent / "wavs" / "clip_000.wav"
        generated: dict[int, int] = {}
        with speaking(model.xtts, decoder_to_gpt=False) as xtts:
            latent, _ = conditioning_latents(xtts, reference)
            conditioning = measure_cpu_step(lambda: conditioning_latents(xtts, reference), 0)
            tokens = len(xtts.tokenizer.encode(SENTENCE, "en"))
            for count in rows:

                def run(count: int = count) -> Any:
                    texts, caps = [SENTENCE] * count, [cap] * count
                    return generate_latents(xtts, texts, "en", latent, max_audio_tokens=caps, seed=1)

                generated[count] = measure_cpu_step(run, 0).step_peak_bytes
        measured = (eval_loss.step_peak_bytes, conditioning.step_peak_bytes)
        return MeasuredPhases(resident, *measured, generated, shapes, tokens, cap, clip_seconds)
