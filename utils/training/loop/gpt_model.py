"""The model side of a run: the GPT model and step (utils.model.gpt_trainer, which the memory planner traces too)
with a data loader that reports clips it cannot load."""

from __future__ import annotations

import logging
from typing import Any

import torch
from trainer.utils.distributed import is_dist_avail_and_initialized

from utils.model.gpt_trainer import FROZEN_PREFIXES, XttsGPTTrainer
from utils.training.inputs.batching import train_loader
from utils.training.inputs.dataset import FAILURES_KEY, FineTuneXTTSDataset

log = logging.getLogger(__name__)

__all__ = ["FROZEN_PREFIXES", "FineTuneGPTTrainer"]


class FineTuneGPTTrainer(XttsGPTTrainer):
    """XttsGPTTrainer whose data loader reports the clips it cannot load (`clip_failures`: "path: reason", in the
    order they failed)."""

    def get_data_loader(
        self, config: Any, *, is_eval: bool = False, samples: list[Any] | None = None, verbose: bool = True
    ) -> torch.utils.data.DataLoader:
        """coqui's loader, with the dataset that reports clips it cannot load, and the loader options wired:
        workers, pinned memory when a GPU takes the batches, workers kept alive across epochs. Training visits
        every row once per epoch, in length-grouped batches unless `group_by_length` is off (batching)."""
        if not is_eval:
            return train_loader(self, config, samples, self.group_by_length)
        dataset = FineTuneXTTSDataset(self.config, samples, self.xtts.tokenizer, config.audio.sample_rate, is_eval)
        if is_dist_avail_and_initialized():
            torch.distributed.barrier()
        workers = config.num_eval_loader_workers
        return torch.utils.data.DataLoader(
            dataset,
            shuffle=False,
            drop_last=False,
            collate_fn=dataset.collate_fn,
            batch_size=config.eval_batch_size,
            num_workers=workers,
            pin_memory=torch.cuda.is_available(),
            persistent_workers=workers > 0,
        )

    def format_batch(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Take the load failures the batch carries (from any worker process) into `clip_failures`."""
        failures = batch.pop(FAILURES_KEY, [])
        for failure in failures:
            log.warning("A clip could not be loaded and was skipped: %s", failure)
        self.clip_failures.extend(failures)
        return super().format_batch(batch)
