"""An out-of-memory error in a training step never loses a run: the step is trained again in smaller pieces.

When a step raises torch.OutOfMemoryError, `FineTuneTrainer` (utils.training.loop.micro_steps) frees what the failed
attempt held (its tensors, the step's partial gradients, the allocator's cached blocks) and trains the same batch
again as micro-batches of half as many clips whose gradients add up before the optimizer step: batch 4 -> 2 with
twice the gradient accumulation, the same effective batch. The run goes on at that size; after another error it
halves again; an error at one clip per micro-batch stops the run with a checkpoint and what the memory planner fits
instead (Fit my GPU for this device's memory). An eval-loss batch is retried the same way.

Why the loader's batch is split rather than replaced by a smaller one: a step stays the loader's batch of
`batch_size` clips, so nothing that counts steps changes mid-run. The batch sampler's epoch (every row once,
length-grouped: a half batch holds clips of similar lengths), the steps per epoch and the run's total, the
learning-rate milestones (in optimizer steps), the checkpoint names and the resume's position in an epoch are the
same as before the error. Only the work per forward/backward shrinks. Each piece is padded to its own longest clip
and text (what collating its rows alone gives), and its loss weighs by its share of the batch's clips.

What is lost: the gradients accumulated so far in the optimizer step of the error (with grad_acumm > 1, the earlier
batches of that update; the failed backward's partial sums cannot be told apart from them), said in the event.
run.json (`micro_batch_size`, `out_of_memory`), spec.json and a status record in metrics.jsonl (the page shows its
message) say what changed; a resume of the run continues at the micro-batch it reached.

Several devices (DistributedDataParallel): an error on one rank strikes in the middle of a step whose gradient
exchange the other ranks already wait in; a retry on one rank alone would pair its exchanges with the wrong step
on the others. So a multi-process run does not recover: the error ends the run as before, with a checkpoint and
the advice (`out_of_memory_advice` below), and it is resumed with a smaller batch_size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from utils.options.arguments import TrainArguments
from utils.training.inputs.dataset import FAILURES_KEY

# Per-clip fields of a collated batch padded to the batch's longest clip and text: trimmed to a piece's own.
_PADDED = (("wav", "wav_lengths"), ("padded_text", "text_lengths"))


class Pieces(list):
    """A loader batch split into micro-batches (raw, as collated): `FineTuneTrainer.optimize` formats and trains
    them one after another, accumulating their gradients."""

    def __init__(self, pieces: list[dict[str, Any]], rows: int) -> None:
        super().__init__(pieces)
        self.rows = rows


@dataclass
class MicroBatching:
    """How many clips of each loader batch go through one forward/backward (`micro`), and what changed it."""

    batch_size: int  # clips per loader batch: the run's batch_size
    grad_acumm: int  # the run's gradient accumulation (loader batches per optimizer step)
    micro: int = 0  # clips per forward/backward; 0 or >= batch_size: the whole batch
    recovers: bool = True  # False in a multi-process run (see the module docstring)
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.micro < self.batch_size:
            self.micro = self.batch_size

    @property
    def pieces(self) -> int:
        return math.ceil(self.batch_size / self.micro)

    def split(self, batch: dict[str, Any]) -> dict[str, Any] | Pieces:
        """`batch` as the loader made it, or its micro-batches when it holds more clips than `micro`."""
        rows = rows_of(batch)
        if rows <= self.micro:
            return batch
        starts = range(0, rows, self.micro)
        return Pieces([_piece(batch, start, min(rows, start + self.micro)) for start in starts], rows)

    def halve(self, step: int) -> dict[str, Any] | None:
        """After an out-of-memory error at `step` (steps done counting it): the event that halves the micro-batch,
        recorded; None when it is one clip already."""
        if self.micro <= 1:
            return None
        before, before_acumm = self.micro, self.grad_acumm * self.pieces
        self.micro = math.ceil(before / 2)
        after_acumm = self.grad_acumm * self.pieces
        lost = " (the gradients of this update so far are dropped)" if self.grad_acumm > 1 else ""
        event = {
            "step": step,
            "batch_before": before,
            "batch_after": self.micro,
            "grad_acumm_before": before_acumm,
            "grad_acumm_after": after_acumm,
            "message": (
                f"Out of memory at step {step}: batch {before} -> {self.micro} (grad_acumm {before_acumm} -> "
                f"{after_acumm}, same effective batch {self.batch_size * self.grad_acumm}); the step is trained "
                f"again and the run goes on{lost}."
            ),
        }
        self.events.append(event)
        return event


def attempt(batch: dict[str, Any], first: bool) -> dict[str, Any]:
    """A fresh shallow copy of a loader batch for one try of its step: coqui's step pops keys from it and its GPT
    divides `cond_idxs` in place; the clips that failed to load are reported by the first try only."""
    copy = dict(batch)
    if isinstance(copy.get("cond_idxs"), torch.Tensor):
        copy["cond_idxs"] = copy["cond_idxs"].clone()
    if not first and FAILURES_KEY in copy:
        copy[FAILURES_KEY] = []
    return copy


def rows_of(batch: dict[str, Any]) -> int:
    return int(batch["wav_lengths"].shape[0])


def _per_row(value: Any, rows: int) -> bool:
    if isinstance(value, torch.Tensor):
        return value.dim() > 0 and value.shape[0] == rows
    return isinstance(value, list | tuple) and len(value) == rows


def _piece(batch: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    """Rows [start, end) of a collated batch, padded to their own longest clip and text."""
    rows = rows_of(batch)
    piece: dict[str, Any] = {}
    for key, value in batch.items():
        if key == FAILURES_KEY:  # not per row: reported once, with the first piece
            piece[key] = value if start == 0 else []
        elif _per_row(value, rows):
            piece[key] = value[start:end]
        else:
            piece[key] = value  # None (no conditioning lengths), or a batch-wide value
    for padded, lengths in _PADDED:
        if isinstance(piece.get(padded), torch.Tensor) and isinstance(piece.get(lengths), torch.Tensor):
            piece[padded] = piece[padded][..., : int(piece[lengths].max())]
    return piece


def merge_losses(parts: list[tuple[dict[str, Any], float]]) -> dict[str, Any]:
    """One step's loss dict from its pieces' (loss dict, share of the batch's clips): each loss term averaged by
    share ("loss" was already divided by its share's accumulation, so it adds up); the last piece's other values
    (the gradient norm and loss scale of the optimizer step it ended with)."""
    merged = dict(parts[-1][0])
    for key in merged:
        values = [(d.get(key), share) for d, share in parts]
        if key == "loss":
            merged[key] = sum(v for v, _ in values)
        elif key.startswith("loss_") and all(v is not None for v, _ in values):
            merged[key] = sum(v * share for v, share in values)
    return merged


def resumed_micro_batch(resume_dir: Path | None, batch_size: Any) -> int | None:
    """A resume continues at the micro-batch its run reached after out-of-memory errors (the same batch_size, one
    process: the ranks of a multi-process run all train whole batches)."""
    from utils.training.ranks import distributed
    from utils.training.recording.run_record import load_run

    if resume_dir is None or distributed.is_distributed():
        return None
    record = load_run(resume_dir)
    same_batch = (record.arguments or {}).get("batch_size") == batch_size
    return record.micro_batch_size if same_batch and record.micro_batch_size else None


class OutOfMemoryLog:
    """A run's records of the errors its trainer recovers from (or stops at): run.json, spec.json, and a status
    record in metrics.jsonl whose message the page shows while the run goes on. The trainer's
    `OutOfMemoryHandler` (utils.training.loop.contract); `micro_batch` is a resume's micro-batch."""

    def __init__(self, run_dir: Path, metrics: Any, arguments: Any, micro_batch: int | None = None) -> None:
        self.run_dir, self.metrics, self.arguments = Path(run_dir), metrics, arguments
        self.micro_batch = micro_batch

    def what_would_fit(self, trained: bool = True) -> str:
        """The memory planner's answer for this run's arguments on this machine (see `what_would_fit`)."""
        return what_would_fit(self.arguments.to_dict(), trained)

    def __call__(self, event: dict[str, Any]) -> None:
        from utils.training.recording.run_record import RunStatus, load_run, update_run
        from utils.training.recording.spec import read_spec

        events = [*(load_run(self.run_dir).out_of_memory or []), event]
        if event.get("stopped"):  # the run's end records its message
            update_run(self.run_dir, out_of_memory=events)
            return
        micro = event["batch_after"]
        update_run(self.run_dir, micro_batch_size=micro, out_of_memory=events)
        read_spec(self.run_dir).with_changes(micro_batch_size=micro).write()
        fields = {"message": event["message"], "micro_batch_size": micro}
        self.metrics.status(RunStatus.RUNNING.value, run_dir=str(self.run_dir), **fields)


def device_memory_for_plans() -> tuple[int, str]:
    """What the memory planner should fit a run into on this machine, in bytes, and where the figure comes from: on
    a GPU its free memory plus what this process holds (the run's own weights and cache would be freed), else the
    RAM available plus this process's resident memory."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        free, _ = torch.cuda.mem_get_info()
        return int(free + torch.cuda.memory_reserved()), "the GPU's free memory with this run's own memory freed"
    import psutil

    ram = psutil.virtual_memory().available + psutil.Process().memory_info().rss
    return int(ram), "the RAM available to a CPU run"


def what_would_fit(arguments: dict[str, Any], trained: bool = True) -> str:
    """The memory planner's Fit my GPU answer for a run's arguments on this machine's memory, in one sentence
    (`trained`: the stopped run trained some steps, whose weights a new run can start from)."""
    from utils.memory_plan.fit_gpu import fit_my_gpu

    free, source = device_memory_for_plans()
    keywords = {k: v for k, v in arguments.items() if k not in ("train_csv", "eval_csv", "resume_from", "devices")}
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    try:
        fit = fit_my_gpu(free_bytes=free, **keywords, **({} if cuda else {"device": "cpu"}))
    except Exception as exc:  # noqa: BLE001 - the stop's message must never hide the error it explains
        return f"The memory planner finds nothing that fits in {free / 1024**3:.2f} GiB ({source}): {exc}"
    shown = ", ".join(f"{k}={v!r}" for k, v in fit.keywords.items())
    return (
        f"Fit my GPU for {fit.free_gib:.2f} GiB ({source}): {fit.name}, {shown} (planned peak "
        f"{fit.peak_gib:.2f} GiB). Start a new run with these settings"
        + ("; custom_model= the stopped run's ready/model.pth keeps what it learnt." if trained else ".")
    )


def out_of_memory_advice(args: TrainArguments) -> str:
    """Turn a CUDA OOM into what to change, most effective first."""
    steps = []
    if not args.enable_grad_checkpoint:
        steps.append("turn on gradient checkpointing (enable_grad_checkpoint=True)")
    if args.precision == "fp32":
        steps.append("turn on mixed precision (precision='auto')")
    if args.batch_size > 1:
        smaller = max(1, args.batch_size // 2)
        steps.append(
            f"use batch_size={smaller} with grad_acumm={args.grad_acumm * args.batch_size // smaller} "
            "(same effective batch)"
        )
    if args.max_audio_length > 220500:
        steps.append("lower max_audio_length (e.g. 220500 = 10 s): memory grows with the longest clip")
    steps.append("close other programs using the GPU (nvidia-smi lists them)")
    return "Out of GPU memory. Try, in this order: " + "; ".join(steps) + "."


def planner_suggestion(args: TrainArguments) -> str:
    """The memory planner's answer to an out-of-memory error: the largest batch that fits the GPU's free memory."""
    try:
        from utils.memory_plan.planner import GIB, detected_free_bytes, largest_batch_that_fits

        free = detected_free_bytes()
        if free is None:
            return ""
        keywords = {k: v for k, v in args.to_dict().items() if k != "batch_size"}
        batch = largest_batch_that_fits(free, **keywords)
    except Exception as exc:  # noqa: BLE001 - advice must never hide the error it explains
        return f" (The memory planner could not be asked: {exc}.)"
    if batch == 0:
        return f" The memory planner finds no batch that fits in {free / GIB:.2f} GiB free with these settings."
    return (
        f" The memory planner fits batch_size={batch} in the {free / GIB:.2f} GiB free now (or use batch_size='auto')."
    )
