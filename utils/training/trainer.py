"""Small adaptations of coqui's `GPTTrainer` (the model) and `Trainer` (the loop) for fine-tuning runs.

The training loop is coqui's; these subclasses change only what a notebook or web app cannot live with:
- `Trainer.fit` ends the process (`os._exit` on Ctrl-C, `sys.exit(1)` on any error) and deletes a run
  folder that holds no checkpoint. `FineTuneTrainer.fit` saves a checkpoint on Ctrl-C or a stop request,
  returns, and lets errors propagate unchanged.
- Checkpoints are written by `CheckpointWriter` (atomic, named by the steps done, never NaN, only the
  newest kept; see utils.training.checkpoints), and leave out the frozen DVAE and HiFi-GAN, which are
  loaded from the base model at start. A resume continues the step count exactly, from the newest
  checkpoint or the one the caller names, and finishes the interrupted epoch's remaining steps only.
- A new run trains in the folder the caller created (`run_dir`), not in one the trainer names by the
  minute, so two runs started together never share a folder; its config.json is written atomically.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import torchaudio
import trainer.trainer as coqui_trainer_module
from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTTrainer
from TTS.tts.models.xtts import Xtts
from trainer import Trainer
from trainer.utils.distributed import is_dist_avail_and_initialized

from utils.files import write_json_atomic
from utils.training import distributed
from utils.training.dataset import FAILURES_KEY, FineTuneXTTSDataset
from utils.training.ddp_data import sharded_train_loader
from utils.training.checkpoints import (
    BEST_MODEL_FILE,
    CheckpointWriter,
    DiskFull,
    checkpoint_path,
    newest_checkpoint,
)
from utils.training.run_record import RunStatus

log = logging.getLogger(__name__)

# Trained: the GPT only (coqui's GPTTrainer optimizes xtts.gpt); these come from the base model files.
_FROZEN_PREFIXES = ("dvae.", "xtts.hifigan_decoder.")


class StopTraining(Exception):
    """Raised from a step callback to end the run at a step boundary (the UI's Stop button)."""


class TrainingDiverged(RuntimeError):
    """The loss stayed NaN or infinite: the weights are no longer worth saving."""


class FineTuneGPTTrainer(GPTTrainer):
    """coqui's GPTTrainer whose checkpoints leave out the frozen DVAE and HiFi-GAN decoder, and whose data
    loader reports the clips it cannot load (`clip_failures`: "path: reason", in the order they failed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with _built_once():
            super().__init__(*args, **kwargs)
        self.clip_failures: list[str] = []
        # DVAE codes per clip (CPU, int16): a clip's codes are the same every epoch, so the frozen DVAE
        # encodes each clip once.
        self.code_cache: dict[str, torch.Tensor] = {}

    def load_checkpoint(self, config: Any, checkpoint_path: str, *, eval: bool = False, strict: bool = True,
                        **kwargs: Any) -> None:  # fmt: skip
        """coqui's loading of the XTTS weights, reporting what the file lacked: the model was built without
        random initialisation, so any weights the file does not hold are initialised here, or refused."""
        state = self.xtts.get_compatible_checkpoint_state_dict(checkpoint_path)
        parameters = {name for name, _ in self.xtts.named_parameters() if not name.startswith("gpt.gpt_inference")}
        missing = sorted(parameters & set(self.xtts.load_state_dict(state, strict=False).missing_keys))
        if missing:
            # An incomplete checkpoint: build the networks again with coqui's random initialisation, so what
            # the file lacks is initialised rather than left as uninitialised memory.
            log.warning("%s lacks %d weight tensors (e.g. %s): they start from a random initialisation.",
                        checkpoint_path, len(missing), missing[0])  # fmt: skip
            _XTTS_INIT_MODELS(self.xtts)
            self.xtts.load_state_dict(state, strict=False)
        if eval:
            self.xtts.gpt.init_gpt_for_inference(kv_cache=self.args.kv_cache, use_deepspeed=False)
            self.eval()

    @torch.no_grad()
    def format_batch_on_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        """coqui's: conditioning mels and DVAE codes; the codes of a clip already encoded come from the cache."""
        conditioning = batch.pop("conditioning")
        b, n, c, t = conditioning.size()
        mels = self.torch_mel_spectrogram_style_encoder(conditioning.view(b * n, c, t))
        batch["cond_mels"] = mels.view(b, n, self.torch_mel_spectrogram_style_encoder.n_mel_channels, mels.size(2))
        batch["text_inputs"] = batch.pop("padded_text")
        batch["audio_codes"] = self.audio_codes(batch.pop("wav"), batch["wav_lengths"], batch.get("filenames"))
        return batch

    def audio_codes(self, wav: torch.Tensor, lengths: torch.Tensor, files: list[str] | None) -> torch.Tensor:
        """DVAE codes of a padded batch (b, 1, samples): the clips not yet encoded go through the DVAE together
        (as coqui does), each clip's codes up to its own length are kept, and the batch is assembled from them."""
        stride = self.args.gpt_code_stride_len
        valid = [int(-(-int(n) // stride)) for n in lengths]
        files = files or [None] * len(valid)
        todo = [i for i, f in enumerate(files) if f is None or f not in self.code_cache]
        if len(todo) == len(files):  # nothing cached yet: one pass, as coqui did
            codes = self._dvae_codes(wav)
            self.code_cache.update({f: codes[i, : valid[i]].to("cpu", torch.int16) for i, f in enumerate(files) if f})
            return codes
        fresh = {}
        if todo:
            codes = self._dvae_codes(wav[todo])
            fresh = {i: codes[k, : valid[i]] for k, i in enumerate(todo)}
            self.code_cache.update({files[i]: fresh[i].to("cpu", torch.int16) for i in todo if files[i] is not None})
        rows = [fresh[i] if i in fresh else self.code_cache[f].to(wav.device, torch.long) for i, f in enumerate(files)]
        # Padding past a clip's length is never read: the GPT puts stop tokens there (set_mel_padding).
        return torch.stack([F.pad(row, (0, max(valid) - row.shape[0])) for row in rows])

    def _dvae_codes(self, wav: torch.Tensor) -> torch.Tensor:
        if self.config.audio.sample_rate != self.config.audio.dvae_sample_rate:
            wav = torchaudio.functional.resample(
                wav, orig_freq=self.config.audio.sample_rate, new_freq=self.config.audio.dvae_sample_rate,
                lowpass_filter_width=64, rolloff=0.9475937167399596, resampling_method="sinc_interp_kaiser",
                beta=14.769656459379492,
            )  # fmt: skip
        return self.dvae.get_codebook_indices(self.torch_mel_spectrogram_dvae(wav))

    def get_optimizer(self) -> torch.optim.Optimizer:
        """coqui's AdamW parameter groups; as bitsandbytes' 8-bit AdamW when the config asks for it."""
        if self.config.optimizer != "AdamW8bit":
            return super().get_optimizer()
        import bitsandbytes as bnb

        self.config.optimizer = "AdamW"
        try:
            groups = super().get_optimizer().param_groups
        finally:
            self.config.optimizer = "AdamW8bit"
        params = self.config.optimizer_params
        return bnb.optim.AdamW8bit([{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups],
                                   lr=self.config.lr, betas=tuple(params["betas"]), eps=params["eps"])  # fmt: skip

    def state_dict(self, *args, **kwargs):  # type: ignore[override]
        state = super().state_dict(*args, **kwargs)
        for key in [k for k in state if k.startswith(_FROZEN_PREFIXES)]:
            del state[key]
        return state

    def get_data_loader(self, config: Any, *, is_eval: bool = False, samples: list[Any] | None = None,
                        verbose: bool = True) -> torch.utils.data.DataLoader:  # fmt: skip
        """coqui's loader, with the dataset that reports clips it cannot load, and the loader options wired:
        workers, pinned memory when a GPU takes the batches, workers kept alive across epochs."""
        if not is_eval and distributed.is_distributed():
            return sharded_train_loader(self, config, samples)  # each rank its own rows
        dataset = FineTuneXTTSDataset(self.config, samples, self.xtts.tokenizer, config.audio.sample_rate, is_eval)
        if is_dist_avail_and_initialized():
            torch.distributed.barrier()
        sampler = None if is_eval else self.get_sampler(config, dataset)
        workers = config.num_eval_loader_workers if is_eval else config.num_loader_workers
        return torch.utils.data.DataLoader(
            dataset, sampler=sampler, shuffle=False, drop_last=False, collate_fn=dataset.collate_fn,
            batch_size=config.eval_batch_size if is_eval else config.batch_size, num_workers=workers,
            pin_memory=torch.cuda.is_available(), persistent_workers=workers > 0,
        )  # fmt: skip

    def format_batch(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Take the load failures the batch carries (from any worker process) into `clip_failures`."""
        failures = batch.pop(FAILURES_KEY, [])
        for failure in failures:
            log.warning("A clip could not be loaded and was skipped: %s", failure)
        self.clip_failures.extend(failures)
        return super().format_batch(batch)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # type: ignore[override]
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        if strict:
            missing = [k for k in result.missing_keys if not k.startswith(_FROZEN_PREFIXES)]
            if missing or result.unexpected_keys:
                raise RuntimeError(
                    f"Checkpoint does not match the model: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}"
                )
        return result


_construction_lock = threading.Lock()
_XTTS_INIT_MODELS = Xtts.init_models  # coqui's own, kept before any construction swaps it


@contextlib.contextmanager
def _built_once() -> Iterator[None]:
    """coqui builds the XTTS networks twice (Xtts() and again once the tokenizer is set) and initialises both
    randomly, only to load the weights over them. Here the first build is skipped and the second allocates
    without random initialisation (transformers' no_init_weights); load_checkpoint fills every weight."""
    from transformers.initialization import no_init_weights

    def init_models(xtts: Any) -> None:
        if not xtts.__dict__.get("_first_build_skipped"):  # the call from Xtts.__init__; GPTTrainer calls again
            xtts.__dict__["_first_build_skipped"] = True
            return
        with no_init_weights():
            _XTTS_INIT_MODELS(xtts)

    with _construction_lock:
        Xtts.init_models = init_models
        try:
            yield
        finally:
            Xtts.init_models = _XTTS_INIT_MODELS


def _copy_config_atomically(config: Any, out_path: Any, new_fields: dict[str, Any]) -> None:
    if distributed.is_main_process():  # in a multi-process run, only rank 0 writes the run folder
        write_json_atomic(Path(out_path) / "config.json", {**config.to_dict(), **new_fields}, indent=4)


@contextlib.contextmanager
def _construction_hooks(run_dir: Path | None) -> Iterator[None]:
    """While coqui's Trainer is built: it trains in `run_dir` (its folder naming is its only hook for that)
    and writes config.json atomically. Module functions are swapped back at once, under a lock."""
    with _construction_lock:
        saved = coqui_trainer_module.get_experiment_folder_path, coqui_trainer_module.copy_model_files
        if run_dir is not None:
            coqui_trainer_module.get_experiment_folder_path = lambda root, name: Path(run_dir)
        coqui_trainer_module.copy_model_files = _copy_config_atomically
        try:
            yield
        finally:
            coqui_trainer_module.get_experiment_folder_path, coqui_trainer_module.copy_model_files = saved


class FineTuneTrainer(Trainer):
    """coqui's Trainer that returns from `fit` instead of exiting, and can be asked to stop.

    After `fit`, `outcome` is FINISHED, STOPPED (stop requested) or INTERRUPTED (Ctrl-C); a diverged
    loss raises TrainingDiverged. `stop_checkpoint` is the checkpoint saved on stop or interrupt.
    """

    def __init__(self, *args, should_stop: Callable[[], bool] | None = None, run_dir: Path | None = None,
                 restore_from: Path | None = None, checkpoints: CheckpointWriter | None = None,
                 **kwargs) -> None:  # fmt: skip
        self._restore_from = restore_from
        handlers_before = set(logging.getLogger("trainer").handlers)
        with _construction_hooks(run_dir):
            super().__init__(*args, **kwargs)
        # The trainer adds a log-file handler per instance and never removes it; remember ours.
        self._own_handlers = [h for h in logging.getLogger("trainer").handlers if h not in handlers_before]
        self.should_stop = should_stop
        self.outcome: RunStatus | None = None
        self._resuming = self.continue_run
        self.stop_checkpoint: str | None = None
        self.choose_best: Callable[[FineTuneTrainer], None] | None = None  # set by the run; None: lowest loss
        self.checkpoints = checkpoints or CheckpointWriter(self.output_path, self.config.save_n_checkpoints)
        if self.use_cuda and hasattr(self._get_model(), "xtts"):
            # coqui moved the whole model to the GPU; no training step uses the HiFi-GAN decoder.
            self._get_model().xtts.hifigan_decoder.to("cpu")
        self.callbacks.callbacks_on_train_step_end.extend([self._periodic_checkpoint, self._check_stop])

    def init_training(self, args: Any, coqpit_overrides: list[str], config: Any = None) -> tuple[Any, dict[str, Any]]:
        """A resume reads the run's config.json and restores the checkpoint the caller chose, else the newest
        full one (coqui's own pick loads every best model to compare steps, and prefers a weights-only one)."""
        if not args.continue_path:
            return config, {}
        config.load_json(str(Path(args.continue_path) / "config.json"))
        chosen = self._restore_from or newest_checkpoint(Path(args.continue_path))
        if chosen is None:
            raise ValueError(f"{args.continue_path} holds no checkpoint to continue from.")
        args.restore_path = str(chosen)
        return config, {"restore_path": args.restore_path}

    def _setup_logger_config(self, log_file: str) -> None:
        if distributed.is_main_process():
            super()._setup_logger_config(log_file)
            return
        # Another rank: no trainer_<rank>_log.txt in the run folder, and no console copy of rank 0's progress.
        trainer_log = logging.getLogger("trainer")
        trainer_log.handlers = [h for h in trainer_log.handlers if not isinstance(h, logging.StreamHandler)]

    def save_training_script(self) -> None:
        # The trainer copies sys.argv[0] into the run; in a notebook or the web UI that is the host's
        # launcher, not a training script. run.json records the call instead.
        return

    def _check_stop(self, trainer: Trainer) -> None:
        if self.should_stop is not None and self.should_stop():
            raise StopTraining

    def save_checkpoint(self) -> None:  # type: ignore[override]
        """coqui's own periodic save (counted before the step ends) is off; `_periodic_checkpoint` saves."""

    def _save_full(self) -> Path | None:
        if self.args.rank not in (None, 0) or self.total_steps_done == 0:
            return None
        existing = checkpoint_path(self.output_path, self.total_steps_done)
        return existing if existing.is_file() else self.checkpoints.save(self, self.total_steps_done)

    def _periodic_checkpoint(self, trainer: Trainer) -> None:
        if self.total_steps_done % self.config.save_step == 0:
            self._save_full()

    def train_epoch(self) -> None:
        """coqui's epoch; the first epoch after a resume trains only the steps the stopped run had left."""
        if self.train_loader is None:
            self.train_loader = self.prepare_accelerate_loader(self.get_train_dataloader(self.train_samples))
        full = self.train_loader
        done_in_epoch = self.total_steps_done - self.epochs_done * len(full) if self._resuming else 0
        self._resuming = False  # only the first epoch after a resume is a partial one
        if not 0 < done_in_epoch <= len(full):
            super().train_epoch()
            return
        self.train_loader = _FirstSteps(full, len(full) - done_in_epoch)
        try:
            super().train_epoch()
        finally:
            self.train_loader = full

    def save_best_model(self) -> None:  # type: ignore[override]
        """At an epoch's end: the weights only, when the eval loss (else the train loss) is the lowest so far;
        or as `choose_best` decides (utils.training.best_checkpoint: measured quality, early stopping)."""
        if self.args.rank not in (None, 0):
            return
        if self.choose_best is not None:
            self.choose_best(self)
            return
        loss = {"train_loss": self._pick_target_avg_loss(self.keep_avg_train) or float("inf"),
                "eval_loss": self._pick_target_avg_loss(self.keep_avg_eval)}  # fmt: skip
        key = "eval_loss" if loss["eval_loss"] is not None and self.best_loss.get("eval_loss") is not None else "train_loss"
        if loss[key] is not None and loss[key] < self.best_loss[key]:
            if self.checkpoints.save_best(self, self.total_steps_done, loss) is not None:
                self.best_loss = loss

    def eval_step(self, batch: dict[str, Any], step: int) -> tuple[Any, Any]:
        """coqui's evaluation ran in full precision even when training used autocast; it runs as training does."""
        device, dtype = self._get_autocast_args(mixed_precision=self.config.mixed_precision,
                                                precision=self.config.precision)  # fmt: skip
        with torch.autocast(device_type=device, dtype=dtype, enabled=self.config.mixed_precision):
            return super().eval_step(batch, step)

    def _restore_best_loss(self) -> None:
        """On resume, the loss to beat is the best model's (read without loading its tensors)."""
        best = self.output_path / BEST_MODEL_FILE
        if self.continue_run and best.is_file():
            loss = torch.load(str(best), map_location="cpu", weights_only=True, mmap=True).get("model_loss")
            if isinstance(loss, dict):
                self.best_loss = loss

    def _save_after_stop(self) -> None:
        saved = self._save_full()
        self.stop_checkpoint = str(saved) if saved else None

    def fit(self) -> None:  # type: ignore[override]
        try:
            self._fit()
            self.outcome = RunStatus.FINISHED
            self._save_full()  # the finished run can be continued with more epochs
        except StopTraining:
            self.outcome = RunStatus.STOPPED
            self._save_after_stop()
        except KeyboardInterrupt:
            self.outcome = RunStatus.INTERRUPTED
            self._save_after_stop()
        except (TrainingDiverged, DiskFull):
            self.outcome = RunStatus.FAILED  # nothing more worth writing, or no room to write it
            raise
        except Exception:
            self.outcome = RunStatus.FAILED
            self._save_after_failure()  # the steps since the last checkpoint are not lost
            raise
        finally:
            try:
                self.dashboard_logger.finish()
            finally:
                self.close_log_files()

    def _save_after_failure(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # after an out-of-memory error the save needs the cached blocks back
        try:
            self._save_after_stop()
        except Exception as exc:  # noqa: BLE001 - the original error is the one to report
            log.warning("Could not save a checkpoint after the failure: %s", exc)

    def close_log_files(self) -> None:
        trainer_log = logging.getLogger("trainer")
        for handler in self._own_handlers:
            trainer_log.removeHandler(handler)
            handler.close()
        self._own_handlers = []


class _FirstSteps:
    """The first `steps` batches of a data loader, with that length (the trainer reads both)."""

    def __init__(self, loader: Any, steps: int) -> None:
        self.loader = loader
        self.steps = steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self.loader), self.steps)


class DivergenceGuard:
    """A step callback that ends the run once the loss has been NaN or infinite `limit` steps in a row.

    A few non-finite steps are normal with FP16 (the GradScaler skips them); a streak means the weights
    are broken, so nothing more is saved and the message says what to change."""

    def __init__(self, metrics: Any, limit: int) -> None:
        self.metrics = metrics
        self.limit = limit

    def __call__(self, trainer: Trainer) -> None:
        if self.metrics.nonfinite_streak >= self.limit:
            raise TrainingDiverged(
                f"The loss was NaN or infinite for {self.metrics.nonfinite_streak} steps in a row: training diverged. "
                "Lower the learning rate, or use precision='bf16' or 'fp32'. Earlier checkpoints are kept."
            )
