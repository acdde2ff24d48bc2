"""The trainer's side of out-of-memory recovery (utils.training.loop.oom says what and why): a step that runs out of
memory is trained again in micro-batches, and the run goes on.

`OutOfMemoryRecovery` sits between `FineTuneTrainer` and coqui's `Trainer`: its `train_step` and `eval_step`
catch torch.OutOfMemoryError around coqui's, free what the failed attempt held and try the same batch again with
half as many clips per forward/backward; `format_batch` hands a training batch larger than the micro-batch on as
its pieces, and `optimize` trains them one after another, the optimizer stepping after the last.

An eval-loss batch is formatted inside `eval_step`, piece by piece: coqui's `eval_epoch` formats the loader's whole
batch before its step, where formatting (mel spectrograms and DVAE codes on the device) of a batch the training
steps had to split ran out of memory outside any retry.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from utils.training.loop.oom import MicroBatching, Pieces, attempt, merge_losses, rows_of

if TYPE_CHECKING:
    from utils.training.loop.contract import OutOfMemoryHandler

log = logging.getLogger(__name__)


class OutOfMemoryStop(Exception):
    """A step ran out of memory with one clip per micro-batch: the run stops with a checkpoint (FineTuneTrainer.fit);
    the message says what fits instead."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or ["out of memory"])[0][:200]


class OutOfMemoryRecovery:
    """A mixin of coqui's Trainer (see the module docstring); `init_recovery` once the Trainer is built."""

    def init_recovery(self, distributed: bool, handler: OutOfMemoryHandler | None) -> None:
        """`handler` records each event and says what would fit instead (None: logged only); it brings a resume's
        micro-batch."""
        # Clips per forward/backward of a step, halved after an out-of-memory error (not in a multi-process run).
        self.micro_batching = MicroBatching(
            self.config.batch_size,
            self.grad_accum_steps,
            micro=(handler.micro_batch or 0) if handler is not None else 0,
            recovers=not distributed,
        )
        self.out_of_memory_handler = handler
        self._in_train_step = False
        self._in_eval_epoch = False

    def eval_precision(self) -> contextlib.AbstractContextManager:
        """The precision an eval-loss forward runs in (FineTuneTrainer: as training does)."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def eval_pass(self) -> Iterator[None]:
        """Around coqui's `eval_epoch`: its batches reach `eval_step` unformatted, to be formatted piece by piece."""
        self._in_eval_epoch = True
        try:
            yield
        finally:
            self._in_eval_epoch = False

    def train_step(self, batch: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """coqui's step; after an out-of-memory error, the same batch again in smaller micro-batches."""
        first = True
        while True:
            self._in_train_step = True
            try:
                return super().train_step(attempt(batch, first), *args, **kwargs)
            except torch.OutOfMemoryError as exc:
                if not self.micro_batching.recovers:
                    raise
                error = _first_line(exc)
            finally:
                self._in_train_step = False
            first = False
            # Outside the handler: the failed attempt's tensors went with its traceback.
            self._recover_from_out_of_memory(error, self.total_steps_done + 1)

    def eval_step(self, batch: dict[str, Any], step: int) -> tuple[Any, Any]:
        """coqui's eval step, in the run's micro-batches (each piece's losses enter the averages); a batch from
        `eval_epoch` comes unformatted and each piece is formatted here; after an out-of-memory error, the same
        batch again in smaller pieces."""
        unformatted, first = isinstance(batch, _Unformatted), True
        while True:
            try:
                split = self.micro_batching.split(attempt(batch, first))
                result: tuple[Any, Any] = (None, None)
                for piece in split if isinstance(split, Pieces) else [split]:
                    formatted = super().format_batch(piece) if unformatted else piece
                    with self.eval_precision():
                        result = super().eval_step(formatted, step)
                return result
            except torch.OutOfMemoryError as exc:
                if not self.micro_batching.recovers:
                    raise
                error = _first_line(exc)
            first = False
            self._recover_from_out_of_memory(f"eval loss: {error}", self.total_steps_done)

    def _recover_from_out_of_memory(self, error: str, step: int) -> None:
        """The failed attempt's partial gradients dropped and the allocator's cache released; the micro-batch
        halved and recorded, or, at one clip, the run stopped (a checkpoint is saved on the way out)."""
        gc.collect()
        self.model.zero_grad(set_to_none=True)
        refresh = getattr(torch.amp.grad_scaler, "_refresh_per_optimizer_state", None)
        if self.scaler is not None and refresh is not None:
            self.scaler._per_optimizer_states = collections.defaultdict(refresh)  # forget the attempt's unscale_
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        event = self.micro_batching.halve(step)
        if event is None:
            trained = bool(self.total_steps_done)
            handler = self.out_of_memory_handler
            fits = handler.what_would_fit(trained=trained) if handler is not None else ""
            # Before any step there is nothing trained to save: the message must not promise a checkpoint.
            kept = "the run stopped with a checkpoint" if trained else "the run stopped, nothing trained"
            message = f"Out of memory at step {step} with one clip per micro-batch ({error}): {kept}. {fits}".strip()
            event = {"step": step, "batch_before": 1, "stopped": True, "message": message}
        event["error"] = error
        log.warning(event["message"])
        if self.out_of_memory_handler is not None:
            self.out_of_memory_handler(event)
        if event.get("stopped"):
            raise OutOfMemoryStop(event["message"])

    def format_batch(self, batch: dict[str, Any]) -> Any:
        """coqui's; a training batch larger than the micro-batch is split, each piece formatted in `optimize`; an
        eval-loss batch is formatted in `eval_step`."""
        if self._in_eval_epoch:
            return _Unformatted(batch)
        if self._in_train_step:
            split = self.micro_batching.split(batch)
            if isinstance(split, Pieces):
                return split
        return super().format_batch(batch)

    def optimize(self, batch: Any, optimizer: Any, *args: Any, step_optimizer: bool = True, **kwargs: Any) -> Any:
        """coqui's forward, backward and optimizer step; for micro-batches, each piece's gradients are added (its
        loss weighed by its share of the clips) and the optimizer steps after the last one."""
        if not isinstance(batch, Pieces):
            return super().optimize(batch, optimizer, *args, step_optimizer=step_optimizer, **kwargs)
        accumulation, parts, outputs, seconds = self.grad_accum_steps, [], None, 0.0
        try:
            for index, piece in enumerate(batch):
                share = rows_of(piece) / batch.rows
                self.grad_accum_steps = accumulation / share  # coqui divides the loss by it
                last = index == len(batch) - 1
                outputs, losses, took = super().optimize(
                    super().format_batch(piece), optimizer, *args, step_optimizer=step_optimizer and last, **kwargs
                )
                parts.append((losses, share))
                seconds += took
        finally:
            self.grad_accum_steps = accumulation
        return outputs, merge_losses(parts), seconds


class _Unformatted(dict):
    """A loader batch as collated, handed by `format_batch` to `eval_step`, which formats it in pieces."""
