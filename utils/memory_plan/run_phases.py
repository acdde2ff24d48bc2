"""The whole run planned: the memory of each phase of a `train_gpt` run, not only of its training step.

What runs, and where (utils/training/loop/trainer.py, quality_eval.py, best_checkpoint.py, checkpoints.py):
- "training step": the traced step (`trace`), plus whatever a background scoring keeps on the GPU meanwhile.
- "eval loss": one batch of coqui's eval pass (traced after the step: inference mode, the model in eval mode),
  with the weights and AdamW state resident. It runs at every epoch's end.
- "scored evaluation" (quality_eval > 0): at an epoch's end, the training model speaks `generated_rows` texts
  with its weights: the GPT's conditioning latents of the reference clip (on the GPT's device, in 4 s chunks; the
  speaker embedding where the HiFi-GAN decoder is), then the texts generated in batches of `generation_batch`
  (`utils.model.inference.generate_latents`): transformers keeps a KV cache per layer, 2 x batch x (prefix +
  tokens) x width in FP32, grown by one token per step (torch.cat: one layer's new key beside the old one), to
  the length cap (1.5 x the clip's length + 20 tokens, or quality_max_audio_tokens). Then the HiFi-GAN decoder
  turns each row into speech (one row at a time) and Whisper and the speaker encoder score it, where they run:
  today the decoder is kept on the CPU and Whisper is loaded on the CPU (`DECODER_ON_GPU`, `WHISPER_ON_GPU`).
- "checkpoint save": the saved state is copied to the CPU (`async_save.cpu_copy`), no GPU memory beyond what is
  resident; the copy is host RAM (the planner's host line). The best model is saved the same way at an epoch's
  end, and the export at the run's end reads the checkpoint on the CPU: no phase reloads weights onto the GPU.

The scored evaluation's generation batch is the largest that keeps its peak at or below the training step's
(`generation_batch`); at least 1, and when even 1 raises the run's peak the plan says so.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from utils.constants import XTTS_SAMPLE_RATE
from utils.memory_plan import tracker as t
from utils.memory_plan.architecture import Architecture

TRAINING_STEP = "training step"
EVAL_LOSS = "eval loss"
SCORED_EVALUATION = "scored evaluation"
CHECKPOINT_SAVE = "checkpoint save"
PHASES = (TRAINING_STEP, EVAL_LOSS, SCORED_EVALUATION, CHECKPOINT_SAVE)

# Probe texts each scored evaluation speaks besides the quality_eval sentences: short, question, exclamation, long.
PROBES_PER_EVALUATION = 4
# Where the scoring models run today: trainer.py keeps the HiFi-GAN decoder (which holds the speaker encoder) on the
# CPU; quality_eval.py loads faster-whisper with device="cpu". A change there is planned by passing the options.
DECODER_ON_GPU = False
WHISPER_ON_GPU = False
# quality_eval.py's length cap (GPT audio tokens per second, 1.5x the real clip, 20 more), restated here because
# the planner stays below the training layer; tests/memory_plan/test_run_phases.py checks they agree.
TOKENS_PER_SECOND = 21.5
AUTO_CAP_FACTOR = 1.5
AUTO_CAP_EXTRA_TOKENS = 20
# conditioning_latents: chunks of 4 s for the GPT's style embedding, at most 30 s of reference for the speaker's.
CONDITIONING_CHUNK_SECONDS = 4
MAX_REFERENCE_SECONDS = 30
KV_BYTES = 4  # the GPT generates in FP32 (no autocast; LoRA's half-precision base layers cast back)
# Whisper on a GPU (CTranslate2, FP16): parameters x 2 bytes, and a quarter more for its buffers (an estimate).
WHISPER_PARAMETERS = {"tiny": 39e6, "base": 74e6, "small": 244e6, "medium": 769e6, "large": 1550e6, "turbo": 809e6}


def generated_rows(quality_eval: int, probes: int = PROBES_PER_EVALUATION) -> int:
    """Texts one scored evaluation generates: the quality_eval sentences and the probe texts (none when off)."""
    return quality_eval + probes if quality_eval > 0 else 0


def token_cap(arch: Architecture, longest_seconds: float, max_audio_tokens: int = 0) -> int:
    """The length cap of the longest generated row, in GPT audio tokens (as QualityEvaluator.token_cap, bounded by
    the GPT's own generation limit)."""
    limit = int(arch.args()["gpt_max_audio_tokens"]) - 3  # coqui GPT.max_gen_mel_tokens
    cap = max_audio_tokens or math.ceil(longest_seconds * TOKENS_PER_SECOND * AUTO_CAP_FACTOR) + AUTO_CAP_EXTRA_TOKENS
    return max(2, min(limit, int(cap)))


def prefix_tokens(arch: Architecture, text_tokens: int) -> int:
    """A row's prefix: the conditioning latents (32 with the perceiver resampler), then the text and its start and
    stop tokens; one start-audio token follows."""
    args = arch.args()
    conditioning = 32 if args.get("gpt_use_perceiver_resampler") else 1
    return conditioning + text_tokens + 2 + 1


def generation_bytes(arch: Architecture, rows: int, text_tokens: int, cap: int) -> int:
    """The generation's peak beyond what is resident: the KV cache at the cap for `rows` texts, and the torch.cat
    that grows one layer's keys (old and new side by side). Measured on the CPU allocator, 8 x 512 model: 1.06-1.09x
    the cache alone (this formula: 1.0625x), see tests/memory_plan/test_run_phases.py."""
    layers, width = arch.layers, arch.width
    cache = 2 * layers * rows * (prefix_tokens(arch, text_tokens) + cap) * width * KV_BYTES
    return cache + cache // (2 * layers)


@functools.lru_cache(maxsize=8)
def inference_parts(arch: Architecture) -> dict[str, int]:
    """The scored evaluation's other models, traced once per architecture on fake tensors (about a second):
    the HiFi-GAN decoder's weights (with its speaker encoder) and its peak for one row (fixed + per code), the
    speaker encoder's peak on a reference (fixed + per second of 16 kHz audio), the GPT's style embedding of one
    conditioning chunk."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from utils.memory_plan.fake_model import build_fake_model

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    model, _ = build_fake_model(arch, XTTS_SAMPLE_RATE, {}, fake_mode)
    xtts = model.xtts
    decoder = xtts.hifigan_decoder
    width = int(arch.args()["decoder_input_dim"])
    frames = CONDITIONING_CHUNK_SECONDS * XTTS_SAMPLE_RATE // 256 + 1

    def peak(run: Any) -> int:
        tracker = t.MemoryTracker(t.CUDA_BLOCK_BYTES)
        with fake_mode, t.RealMetadata(), torch.no_grad(), tracker:
            run()
        return max((sum(event) for event in tracker.events), default=0)

    speaker = xtts.args.d_vector_dim
    decode = [peak(lambda n=n: decoder(torch.empty(1, n, width), g=torch.empty(1, speaker, 1))) for n in (100, 400)]
    encoder = decoder.speaker_encoder
    voice = [peak(lambda s=s: encoder.forward(torch.empty(1, 16000 * s), l2_norm=True)) for s in (10, 30)]
    tensors = [*decoder.parameters(), *decoder.buffers()]
    return {
        "decoder_weight_bytes": sum(x.numel() * x.element_size() for x in tensors),
        "decode_fixed_bytes": decode[0] - 100 * (decode[1] - decode[0]) // 300,
        "decode_bytes_per_code": (decode[1] - decode[0]) // 300,
        "speaker_fixed_bytes": voice[0] - 10 * (voice[1] - voice[0]) // 20,
        "speaker_bytes_per_second": (voice[1] - voice[0]) // 20,
        "style_bytes": peak(lambda: xtts.gpt.get_style_emb(torch.empty(1, 80, frames), None)),
    }


@dataclass(frozen=True)
class EvalSetting:
    """What shapes the scored evaluation: the rows, their length cap and text, where the models run."""

    rows: int
    cap: int
    text_tokens: int
    reference_seconds: float
    decoder_on_gpu: bool = DECODER_ON_GPU
    whisper_on_gpu: bool = WHISPER_ON_GPU
    whisper_model: str = "small"
    whisper_bytes_per_parameter: int = 2  # FP16 on a GPU; int8 (1) on a CPU
    decoder_resident: bool = False  # the traced step counts the HiFi-GAN decoder's weights already (a CPU run)
    background_scoring: bool = True  # best_by eval_loss: decoding and scoring overlap the next training steps


@dataclass
class PhasePlan:
    """Bytes per phase (the CUDA overhead not included) with labelled parts, and the generation batch chosen."""

    peaks: dict[str, int]
    parts: dict[str, dict[str, int]]
    generation_batch: int = 0
    notes: list[str] = field(default_factory=list)
    rows: int = 0


def _whisper_bytes(scored: EvalSetting) -> int:
    name = scored.whisper_model.lower()
    size = next((k for k in sorted(WHISPER_PARAMETERS, key=len, reverse=True) if k in name), "small")
    return int(WHISPER_PARAMETERS[size] * scored.whisper_bytes_per_parameter * 1.25)


def plan_phases(
    arch: Architecture,
    train: dict[str, int],
    evaluation: dict[str, int] | None,
    scored: EvalSetting,
    parts: dict[str, int],
    accumulating: bool,
) -> PhasePlan:
    """Every phase's peak from the traced step (`train`, `evaluation`: tracker categories at their peaks) and the
    scored evaluation's setting; the generation batch is the largest that keeps that phase at or below the step."""
    resident = {k: train[k] for k in (t.WEIGHTS, t.FROZEN, t.OPTIMIZER_STATE)}
    resident_bytes = sum(resident.values())
    notes: list[str] = []
    kept = {}  # what stays on the GPU for the rest of the run once the first evaluation has run
    if scored.rows and scored.whisper_on_gpu and scored.whisper_model.strip():
        kept["whisper (loaded at the first evaluation, kept)"] = _whisper_bytes(scored)
    decoding = {}
    if scored.rows and scored.decoder_on_gpu:
        decoding = {"decoding one row": parts["decode_fixed_bytes"] + parts["decode_bytes_per_code"] * scored.cap}
        if not scored.decoder_resident:  # brought to the GPU for the evaluation (the trace left it out)
            decoding = {"hifigan_decoder": parts["decoder_weight_bytes"], **decoding}
    step = {**train, **kept}
    if decoding and scored.background_scoring:
        step.update(decoding)  # decoded on a background thread while the next steps train
        notes.append(
            "Background scoring (best_by eval_loss) decodes on the GPU while training goes on: counted in "
            "the training step."
        )
    phase_parts = {TRAINING_STEP: step}
    if evaluation is not None:
        phase_parts[EVAL_LOSS] = {**evaluation, **kept}
    saving = {**resident, **kept}
    if accumulating:
        saving[t.GRADIENTS] = train[t.GRADIENTS]  # a periodic save between micro-steps finds them held
    phase_parts[CHECKPOINT_SAVE] = saving
    batch = 0
    if scored.rows:
        limit = sum(step.values())
        batch = _generation_batch(arch, scored, parts, resident_bytes + sum(kept.values()), decoding, limit)
        phase_parts[SCORED_EVALUATION] = _scored_parts(arch, scored, parts, batch, {**resident, **kept}, decoding)
        if sum(phase_parts[SCORED_EVALUATION].values()) > limit:
            notes.append(
                "The scored evaluation raises the run's peak above the training step even at generation batch 1: "
                "lower quality_max_audio_tokens, or quality_eval, or turn it off (quality_eval=0)."
            )
    phase_parts = {name: phase_parts[name] for name in PHASES if name in phase_parts}  # in the run's order
    peaks = {name: sum(values.values()) for name, values in phase_parts.items()}
    return PhasePlan(peaks, phase_parts, batch, notes, scored.rows)


def _scored_parts(
    arch: Architecture, scored: EvalSetting, parts: dict[str, int], batch: int, resident: dict, decoding: dict
) -> dict[str, int]:
    """The scored evaluation's labelled parts at generation batch `batch`: what is resident, then its largest
    moment (conditioning, generation or decoding: they run one after another)."""
    conditioning = parts["style_bytes"]
    if scored.decoder_on_gpu:
        conditioning = max(
            conditioning,
            parts["speaker_fixed_bytes"]
            + int(parts["speaker_bytes_per_second"] * min(scored.reference_seconds, MAX_REFERENCE_SECONDS)),
        )
    tokens = prefix_tokens(arch, scored.text_tokens) + scored.cap
    moments = {
        f"KV cache and generation ({batch} rows of {tokens} tokens)": generation_bytes(
            arch, batch, scored.text_tokens, scored.cap
        ),
        "conditioning latents": conditioning,
    }
    if "decoding one row" in decoding:
        moments["decoding one row"] = decoding["decoding one row"]
    largest = max(moments, key=moments.__getitem__)
    weights = {k: v for k, v in decoding.items() if k == "hifigan_decoder"}
    return {**resident, **weights, largest: moments[largest]}


def _generation_batch(
    arch: Architecture, scored: EvalSetting, parts: dict[str, int], resident: int, decoding: dict, limit: int
) -> int:
    """The largest generation batch (1 to rows) whose scored evaluation stays at or below `limit` bytes; 1 if none."""
    for batch in range(scored.rows, 0, -1):
        total = sum(_scored_parts(arch, scored, parts, batch, {"resident": resident}, decoding).values())
        if total <= limit:
            return batch
    return 1


def plan_of_phases(
    arguments: Any, settings: Any, options: dict[str, Any], train: dict[str, int], evaluation: dict[str, int] | None
) -> PhasePlan:
    """Every phase of the run planned by `estimate_gpt_memory` (TrainArguments, the traced step's StepSettings,
    planner options) from the step's and the eval pass's peaks (tracker categories)."""
    from utils.memory_plan.memory_model import shipped_inference_parts

    arch = settings.architecture
    given = options.get("generated_rows")
    rows = generated_rows(int(arguments.quality_eval)) if given is None else max(0, int(given))
    cpu = settings.target == "cpu"  # one memory: the scoring models share it with training
    longest = settings.audio_samples / XTTS_SAMPLE_RATE
    scored = EvalSetting(
        rows=rows,
        cap=token_cap(arch, longest, int(arguments.quality_max_audio_tokens)),
        text_tokens=settings.text_tokens,
        reference_seconds=longest,
        decoder_on_gpu=cpu or bool(options.get("decoder_on_gpu", DECODER_ON_GPU)),
        whisper_on_gpu=cpu or bool(options.get("whisper_on_gpu", WHISPER_ON_GPU)),
        whisper_model=str(arguments.whisper_model),
        whisper_bytes_per_parameter=1 if cpu else 2,
        decoder_resident=cpu or not settings.leaner_steps,  # the trace keeps it resident then (trace.py)
        background_scoring=arguments.best_by == "eval_loss",
    )
    parts = (shipped_inference_parts(settings) or inference_parts(arch)) if rows else {}
    plan = plan_phases(arch, train, evaluation, scored, parts, settings.accumulating)
    plan.notes.insert(0, _placement_note(scored, cpu))
    return plan


def _placement_note(scored: EvalSetting, cpu: bool) -> str:
    if not scored.rows:
        return "No scored evaluation (quality_eval=0)."
    if cpu:
        return "A CPU run: generation, decoding, the speaker encoder and Whisper all use the same RAM."
    off = [
        name
        for name, on in (
            ("the HiFi-GAN decoder and speaker encoder", scored.decoder_on_gpu),
            ("Whisper", scored.whisper_on_gpu),
        )
        if not on
    ]
    listed = " and ".join(off)
    where = f" {listed[0].upper()}{listed[1:]} run on the CPU (host RAM, not in these figures)." if off else ""
    return f"The GPT generates on the GPU with a KV cache up to {scored.cap} audio tokens a text.{where}"
