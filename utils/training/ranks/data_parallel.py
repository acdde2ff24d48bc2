"""Making coqui's Trainer one rank of a multi-process run: torch's DistributedDataParallel around the GPT.

coqui's Trainer stays in its one-device mode (its own DDP path needs CUDA, and it unwraps the model, so
its forwards never go through DDP and gradients are never averaged). Instead `DataParallelRanks`, the trainer's
`RankSync` (utils.training.loop.contract), built before the trainer and joined when it starts:
- wraps the GPT (the only trained part) in DistributedDataParallel: its constructor copies rank 0's
  weights to every rank, and each training backward averages the gradients across ranks. Gradient
  accumulation micro-steps that do not step the optimizer skip the exchange (what `no_sync()` does);
- adds one all_reduce per step (`StepSync`) that carries whether any rank was asked to stop, so every
  rank stops after the same step, and each rank's loss and memory, which rank 0 writes into metrics.jsonl.

Opt-in diagnostics (`RankTrace`), what each rank trained on and whether the ranks agree:

With $XTTS_DDP_TRACE naming a folder, every rank appends to `rank<N>.jsonl`, after each step: the step,
the epoch, the clips of its batch, its loss and a SHA-256 of its GPT weights. The ranks should train on
different clips and hold identical weights after every step. Hashing the weights costs time on a large
model: a diagnostic (used by the tests), off by default.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from utils.device.memory import GPU_FIELDS, get_memory_stats
from utils.files import append_jsonl
from utils.training.ranks import distributed

# Each rank's share of the per-step all_reduce: its loss terms and its memory.
_LOSS_FIELDS = ("loss_text_ce", "loss_mel_ce")
_MEMORY_FIELDS = (*GPU_FIELDS, "process_rss_mb")


class DataParallelRanks:
    """A multi-process run's side of the trainer (its `RankSync`, utils.training.loop.contract): built before the
    trainer, joined at the start of `fit` once the model is on its device."""

    def __init__(self, ranks: list[dict[str, Any]]) -> None:
        self.devices = [r["device"] for r in ranks]
        self.step: DataParallelStep | None = None
        self.sync: StepSync | None = None
        self.trace: Any = None

    def join(self, model: Any) -> None:
        """Wrap the model's GPT (the only trained part) in DistributedDataParallel: its constructor (a collective:
        every rank calls this once, before its first step) copies rank 0's weights to every rank."""
        gpt = model.xtts.gpt
        device = next(gpt.parameters()).device
        ddp = DistributedDataParallel(
            gpt, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False
        )
        self.step = DataParallelStep(model, ddp)
        # An instance attribute: the model's own forward, state_dict keys and checkpoints stay as they are.
        model.forward = self.step.forward
        self.sync = StepSync(self.step, self.devices)
        self.trace = rank_trace(model, self.step)  # only with $XTTS_DDP_TRACE set

    def on_step_start(self, position: int, steps_in_epoch: int, grad_accum_steps: int) -> None:
        # coqui steps the optimizer after every grad_accum_steps-th batch of the epoch and after its last one.
        assert self.step is not None
        self.step.sync_gradients = position % grad_accum_steps == 0 or position == steps_in_epoch

    def step_end(self, trainer: Any, batch: dict[str, Any], local_stop: bool) -> bool:
        """The step's all_reduce (first, before the metrics record is written), then this rank's trace line; whether
        any rank asked to stop."""
        assert self.sync is not None
        stop = self.sync(local_stop)
        if self.trace is not None:  # right after the sync, so a step after which the run stops is traced too
            self.trace(trainer, batch)
        return stop

    def record_fields(self) -> dict[str, Any]:
        return self.sync.record_fields() if self.sync is not None else {}


class DataParallelStep:
    """The training forward through DDP, exchanging gradients on the steps that end an optimizer step."""

    def __init__(self, model: Any, ddp: DistributedDataParallel) -> None:
        self.model = model
        self.ddp = ddp
        self.plain_forward = model.forward
        self.sync_gradients = True
        self.losses: tuple[float, float] = (math.nan, math.nan)  # this rank's weighted loss terms of the last step

    def forward(self, text_inputs, text_lengths, audio_codes, wav_lengths, cond_mels, cond_idxs, cond_lens):
        """GPTTrainer.forward, through DDP while gradients are computed (evaluation has nothing to average)."""
        if not torch.is_grad_enabled():
            return self.plain_forward(
                text_inputs, text_lengths, audio_codes, wav_lengths, cond_mels, cond_idxs, cond_lens
            )
        # Set for the whole step (forward and backward), as ddp.no_sync() does on the steps that only accumulate.
        self.ddp.require_backward_grad_sync = self.sync_gradients
        loss_text, loss_mel, latent = self.ddp(
            text_inputs,
            text_lengths,
            audio_codes,
            wav_lengths,
            cond_mels=cond_mels,
            cond_idxs=cond_idxs,
            cond_lens=cond_lens,
        )
        weights = self.model.args
        self.losses = (
            loss_text.detach() * weights.gpt_loss_text_ce_weight,
            loss_mel.detach() * weights.gpt_loss_mel_ce_weight,
        )
        return loss_text, loss_mel, latent


class StepSync:
    """First at every step's end on every rank (DataParallelRanks.step_end): one all_reduce (a sum where each rank
    fills its own slots) of [stop requested anywhere, each rank's loss terms and memory]."""

    def __init__(self, step: DataParallelStep, devices: list[str]) -> None:
        self.step = step
        self.devices = devices
        self.ranks: list[dict[str, Any]] = []

    def __call__(self, local_stop: bool) -> bool:
        """This rank's stop request, loss terms and memory summed with every rank's; whether any rank asked to stop."""
        fields = (*_LOSS_FIELDS, *_MEMORY_FIELDS)
        world, me = distributed.world_size(), distributed.rank()
        memory = get_memory_stats()
        own = [float(v) for v in self.step.losses]
        own += [math.nan if memory[f] is None else memory[f] for f in _MEMORY_FIELDS]
        values = torch.zeros(1 + world * len(fields), dtype=torch.float64)
        values[0] = 1.0 if local_stop else 0.0
        values[1 + me * len(fields) : 1 + (me + 1) * len(fields)] = torch.tensor(own, dtype=torch.float64)
        on_gpu = dist.get_backend() == "nccl"
        reduced = values.cuda() if on_gpu else values
        dist.all_reduce(reduced)
        values = reduced.cpu() if on_gpu else reduced
        stop = bool(values[0] > 0)
        rows = values[1:].view(world, len(fields)).tolist()
        self.ranks = [
            {"rank": r, "device": self.devices[r], **{f: _value(f, v) for f, v in zip(fields, row, strict=True)}}
            for r, row in enumerate(rows)
        ]
        if me != 0 and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()  # peaks per step, as rank 0's metrics logger keeps them
        return stop

    def record_fields(self) -> dict[str, Any]:
        """What rank 0 adds to a step's metrics record: the loss averaged over the ranks, and each rank's
        loss terms and memory (the page shows memory per GPU)."""
        fields: dict[str, Any] = {"world_size": len(self.ranks), "ranks": self.ranks}
        means = {f: _mean([r[f] for r in self.ranks]) for f in _LOSS_FIELDS}
        if None not in means.values():
            fields.update(means, loss=means["loss_text_ce"] + means["loss_mel_ce"])
        else:
            fields.update(loss=None, loss_text_ce=means["loss_text_ce"], loss_mel_ce=means["loss_mel_ce"])
        return fields


def _value(field: str, value: float) -> float | None:
    if math.isnan(value):
        return None
    return round(value, 1) if field in _MEMORY_FIELDS else value


def _mean(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]


TRACE_ENV = "XTTS_DDP_TRACE"


def rank_trace(model: Any, step: Any) -> RankTrace | None:
    """This rank's trace when $XTTS_DDP_TRACE is set (`step` is the run's DataParallelStep), else None."""
    folder = os.environ.get(TRACE_ENV)
    return RankTrace(Path(folder), model, step) if folder else None


class RankTrace:
    """Writes this rank's line of the trace after each step (called by DataParallelRanks.step_end)."""

    def __init__(self, folder: Path, model: Any, step: Any) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rank{distributed.rank()}.jsonl"
        self.model = model
        self.step = step

    def __call__(self, trainer: Any, batch: dict[str, Any]) -> None:
        digest = hashlib.sha256()
        for _, parameter in sorted(self.model.xtts.gpt.named_parameters()):
            digest.update(parameter.detach().float().cpu().numpy().tobytes())
        append_jsonl(
            self.path,
            {
                "rank": distributed.rank(),
                "step": trainer.total_steps_done,
                "epoch": trainer.epochs_done,
                "clips": [Path(name).name for name in batch.get("filenames", [])],
                "loss": [float(v) for v in self.step.losses],
                "gpt_sha256": digest.hexdigest(),
            },
        )
