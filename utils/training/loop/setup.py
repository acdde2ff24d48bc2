"""Building a run in its folder: samples, vocab, coqui's config, the GPTTrainer model with its optimizations,
and coqui's Trainer with our metrics logger and guards."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from trainer import TrainerArgs
from TTS.config.shared_configs import BaseDatasetConfig
from TTS.tts.configs.xtts_config import XttsAudioConfig
from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTArgs, GPTTrainerConfig

from utils.constants import MAX_CONDITIONING_SAMPLES, MAX_TEXT_TOKENS, MIN_CONDITIONING_SAMPLES
from utils.data.mix import dataset_entries
from utils.data.validation import MAX_EVAL_ROWS, DatasetReport
from utils.device.gpu import detect_gpu
from utils.files import read_json, write_json_atomic
from utils.model.base_models import BaseModel
from utils.model.checkpoints import loadable_checkpoint
from utils.model.vocab import VOCAB_FILE, VocabChoice, prepare_vocab
from utils.options.arguments import TrainArguments
from utils.options.optimizations import OptimizationReport, TrainingOptimizer
from utils.text.frontend import TextFrontEnd
from utils.training.checkpointing.checkpoints import CheckpointWriter
from utils.training.inputs import batching
from utils.training.inputs.batching import optimizer_steps_per_epoch
from utils.training.inputs.dataset import DATASET_KEY, DRAWS_KEY, DURATION_KEY
from utils.training.loop.contract import TrainerParts, never_stop
from utils.training.loop.gpt_model import FineTuneGPTTrainer
from utils.training.loop.lora import LORA, LoraSettings, apply_lora, frozen_dtype
from utils.training.loop.trainer import FineTuneTrainer
from utils.training.ranks import distributed
from utils.training.recording.metrics import MetricsLogger
from utils.training.recording.run_record import TRAINER_CONFIG_FILE

# Steps in a row with a NaN/inf loss before the run is declared diverged (FP16 skips a few by design).
NONFINITE_STEPS_LIMIT = 5


@dataclass
class Samples:
    """coqui sample dicts of both splits, and (audio, seconds) of each training row for the reference clip."""

    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    train_durations: list[tuple[str, float]]


@dataclass
class ModelSource:
    """What a run starts from: the base model, or a fine-tune from one of our `ready/` folders."""

    checkpoint: Path
    config: dict[str, Any]
    vocab: Path


@dataclass
class TrainingSetup:
    trainer: FineTuneTrainer
    metrics: MetricsLogger
    report: OptimizationReport
    steps_per_epoch: int
    total_steps: int
    lr_milestones: list[int]
    inference_config: dict[str, Any]
    vocab_path: Path
    train_durations: list[tuple[str, float]] = field(default_factory=list)
    vocab_info: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        """Free the model's memory so a notebook can run again without restarting."""
        self.trainer.release()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def model_source(args: TrainArguments, base: BaseModel) -> ModelSource:
    """A custom model from one of our `ready/` folders brings its own config and vocab (which may hold
    tokens of a new language); a bare model.pth uses the base model's."""
    if not args.custom_model:
        return ModelSource(base.model, read_json(base.config, {}), base.vocab)
    custom = Path(args.custom_model).expanduser()
    config_file = custom.parent / "config.json" if (custom.parent / "config.json").is_file() else base.config
    vocab = custom.parent / "vocab.json" if (custom.parent / "vocab.json").is_file() else base.vocab
    return ModelSource(custom, read_json(config_file, {}), vocab)


def training_samples(report: DatasetReport, frontend: TextFrontEnd) -> Samples:
    """coqui sample dicts for train and eval, and (audio, duration) of the train rows, in one read."""
    samples = Samples([], [], [])
    frontends = {frontend.language: frontend}
    for split, row, duration in report.iter_usable_splits():
        language = report.language_of(row.csv_file)  # several datasets: each row its dataset's language
        row_frontend = frontends.setdefault(language, frontend.for_language(language))
        dataset = report.dataset_of(row.csv_file)
        (samples.train if split == "train" else samples.eval).append(
            {
                "text": row_frontend.apply(row.text),
                "audio_file": row.audio_location,
                "speaker_name": row.speaker_name or "speaker",
                "root_path": str(Path(row.csv_file).parent),
                "language": language,
                "audio_unique_name": f"{Path(row.csv_file).stem}#{row.line}",
                DURATION_KEY: duration,  # for length-grouped batches
                DATASET_KEY: dataset,
                DRAWS_KEY: report.epoch_draws[dataset] if report.epoch_draws else None,  # rows of it an epoch draws
            }
        )
        if split == "train":
            samples.train_durations.append((row.audio_location, duration))
    samples.eval[:] = bounded_eval(samples.eval)
    return samples


def bounded_eval(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_EVAL_ROWS eval rows, evenly spread over a longer eval CSV: every eval-loss pass runs over
    all of them (the held-out split is capped alike when it is drawn: utils.data.validation)."""
    if len(rows) <= MAX_EVAL_ROWS:
        return rows
    picks = np.unique(np.linspace(0, len(rows) - 1, MAX_EVAL_ROWS).round().astype(int))
    return [rows[i] for i in picks]


def _num_workers(requested: int) -> int:
    if requested >= 0:
        return requested
    cores = (os.cpu_count() or 2) // distributed.local_world_size()  # the ranks on this machine share its cores
    return min(4, max(1, cores // 2)) if detect_gpu().available else 0


def _gpt_args(
    args: TrainArguments,
    base: BaseModel,
    checkpoint: Path,
    base_config: dict[str, Any],
    vocab_path: Path,
    cache_dir: Path,
) -> GPTArgs:
    model_args = {k: v for k, v in base_config.get("model_args", {}).items() if k in GPTArgs.__dataclass_fields__}
    gpt_args = GPTArgs(**model_args)
    gpt_args.min_conditioning_length = MIN_CONDITIONING_SAMPLES
    gpt_args.max_conditioning_length = MAX_CONDITIONING_SAMPLES
    gpt_args.max_wav_length = args.max_audio_length
    gpt_args.max_text_length = MAX_TEXT_TOKENS
    gpt_args.debug_loading_failures = False
    gpt_args.mel_norm_file = str(base.mel_stats)
    gpt_args.dvae_checkpoint = str(base.dvae)
    gpt_args.xtts_checkpoint = str(loadable_checkpoint(checkpoint, cache_dir))
    gpt_args.tokenizer_file = str(vocab_path)
    gpt_args.gpt_checkpoint = ""
    return gpt_args


def lr_milestones(args: TrainArguments, steps_per_epoch: int) -> list[int]:
    """The learning-rate milestones in optimizer steps (the fractions of the run's optimizer steps)."""
    optimizer_steps = args.num_epochs * optimizer_steps_per_epoch(steps_per_epoch, args.grad_acumm)
    return sorted({max(1, round(f * optimizer_steps)) for f in args.lr_milestones})


def _dataset_configs(args: TrainArguments, language: str) -> list[BaseDatasetConfig]:
    """coqui's record of the datasets (the samples themselves come from validate_datasets)."""
    return [
        BaseDatasetConfig(
            formatter="coqui",
            dataset_name="finetune",
            path=str(Path(entry.csv).parent),
            meta_file_train=entry.csv,
            meta_file_val=entry.eval_csv,
            language=entry.language,
        )
        for entry in dataset_entries(args.train_csv, args.eval_csv, language)
    ]


def make_gpt_config(
    args: TrainArguments,
    base: BaseModel,
    *,
    checkpoint: Path,
    base_config: dict[str, Any],
    vocab_path: Path,
    languages: list[str],
    language: str,
    steps_per_epoch: int,
    output_path: Path,
    run_name: str,
) -> tuple[GPTTrainerConfig, list[int]]:
    """coqui's GPTTrainerConfig for a run, and its learning-rate milestones in optimizer steps."""
    milestones = lr_milestones(args, steps_per_epoch)
    workers = _num_workers(args.num_workers)
    config = GPTTrainerConfig(
        output_path=str(output_path),
        run_name=run_name,
        project_name="xtts-finetune",
        model_args=_gpt_args(args, base, checkpoint, base_config, vocab_path, output_path / ".converted"),
        audio=XttsAudioConfig(**base_config.get("audio", {})),
        languages=languages,
        datasets=_dataset_configs(args, language),
        epochs=args.num_epochs,
        batch_size=args.batch_size,
        eval_batch_size=args.batch_size,
        num_loader_workers=workers,
        num_eval_loader_workers=workers,
        print_step=args.print_step,
        plot_step=1,  # every step reaches metrics.jsonl
        log_model_step=10**9,
        save_step=args.save_step,
        save_n_checkpoints=args.save_n_checkpoints,
        save_checkpoints=False,  # coqui's own periodic save is off: FineTuneTrainer saves (atomic, background)
        save_all_best=False,
        save_best_after=0,
        print_eval=False,
        run_eval=True,
        optimizer="AdamW",
        optimizer_wd_only_on_weights=True,
        optimizer_params={"betas": [0.9, 0.96], "eps": 1e-8, "weight_decay": args.weight_decay},
        lr=args.learning_rate,
        lr_scheduler="MultiStepLR",
        lr_scheduler_params={"milestones": milestones, "gamma": 0.5, "last_epoch": -1},
        # Milestones count optimizer steps: the trainer steps the scheduler after each optimizer
        # step only when this is False (coqui's recipe left it True, so its milestones counted epochs).
        scheduler_after_epoch=False,
        grad_clip=args.grad_clip,
        training_seed=args.seed,
        test_sentences=[],
    )
    return config, milestones


def build_model(args: TrainArguments, config: GPTTrainerConfig, vocab: VocabChoice) -> tuple[Any, OptimizationReport]:
    """coqui's GPTTrainer with the run's vocab and the optimizations applied."""
    model = FineTuneGPTTrainer(config)
    vocab.adapt_model(model)
    model.group_by_length = args.length_grouping
    optimizer = TrainingOptimizer.from_arguments(args)
    report = optimizer.apply(model, config)
    lora = LoraSettings.from_args(args)
    if lora is not None:
        dtype = frozen_dtype(report.precision, optimizer.gpu.available)
        done = apply_lora(model, lora, new_language=vocab.extended, dtype=dtype)
        extra = ", ".join(done["new_language_trainable"])
        report.add(
            LORA,
            f"rank {done['rank']}, alpha {done['alpha']:g} on {', '.join(done['targets'])}: "
            f"{done['trainable_parameters']:,} trained, {done['frozen_parameters']:,} frozen in {done['frozen_dtype']}"
            + (f"; the new language's {extra} trained too" if extra else ""),
        )
    return model, report


def inference_config(base_config: dict[str, Any], vocab: VocabChoice) -> dict[str, Any]:
    """The config.json of `ready/`: the base model's, with the run's languages and vocab size."""
    config = dict(base_config)
    config["languages"] = vocab.languages
    config["model_args"] = {
        **base_config.get("model_args", {}),
        "tokenizer_file": "",
        "gpt_number_text_tokens": vocab.size,
    }
    return config


def trainer_parts(
    args: TrainArguments,
    run_dir: Path,
    metrics: MetricsLogger,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_checkpoint: Any = None,
    **collaborators: Any,
) -> TrainerParts:
    """The trainer's collaborators (utils.training.loop.contract): the checkpoint writer of `run_dir`, the stop
    check, and the run's scoring, timings, out-of-memory record and ranks (`collaborators`, by their field names)."""
    return TrainerParts(
        metrics=metrics,
        checkpoints=CheckpointWriter(run_dir, args.save_n_checkpoints, on_checkpoint),
        should_stop=should_stop or never_stop,
        nonfinite_limit=NONFINITE_STEPS_LIMIT,
        **collaborators,
    )


def build_trainer(
    args: TrainArguments,
    config: GPTTrainerConfig,
    model: Any,
    samples: Samples,
    run_dir: Path,
    resume: Path | None,
    parts: TrainerParts,
) -> FineTuneTrainer:
    """coqui's Trainer in `run_dir`, with its collaborators (`parts`: metrics, stop checks, scoring...).
    `resume` is the run folder or the checkpoint in it to continue from (None for a new run)."""
    if resume and distributed.is_main_process():
        # The trainer reloads config.json from the run folder on resume: make it this call's config.
        write_json_atomic(run_dir / TRAINER_CONFIG_FILE, config.to_dict(), indent=4)
    return FineTuneTrainer(
        TrainerArgs(
            continue_path=str(run_dir) if resume else "", grad_accum_steps=args.grad_acumm, rank=distributed.rank()
        ),  # coqui saves and logs where rank == 0 only
        config,
        output_path=str(run_dir.parent),
        model=model,
        train_samples=samples.train,
        eval_samples=samples.eval,
        parse_command_line_args=False,
        parts=parts,
        run_dir=None if resume else run_dir,
        restore_from=resume if resume and resume.is_file() else None,
    )


def build_training_setup(
    args: TrainArguments,
    base: BaseModel,
    report: DatasetReport,
    frontend: TextFrontEnd,
    run_dir: Path,
    parts: TrainerParts,
    *,
    resume: Path | None = None,
) -> TrainingSetup:
    """Everything a run needs to train in `run_dir` (a new folder, or the run being resumed from `resume`), the
    trainer working with `parts` (`trainer_parts`)."""
    source = model_source(args, base)
    samples = training_samples(report, frontend)
    # A new language's vocabulary is learnt from its own rows (other datasets' languages are the model's already).
    texts = [s["text"] for s in samples.train + samples.eval if s["language"] == frontend.language]
    vocab = prepare_vocab(
        source.vocab,
        source.config,
        frontend.language,
        texts,
        run_dir.parent,
        args.vocab_new_tokens,
        run_vocab=run_dir / VOCAB_FILE if resume else None,
    )
    steps_per_epoch = batching.rank_steps_per_epoch(report.epoch_rows, args.batch_size)
    config, milestones = make_gpt_config(
        args,
        base,
        checkpoint=source.checkpoint,
        base_config=source.config,
        vocab_path=source.vocab,  # the checkpoint's shapes; adapt_model grows them to the run's vocab
        languages=vocab.languages,
        language=frontend.language,
        steps_per_epoch=steps_per_epoch,
        output_path=run_dir.parent,
        run_name=run_dir.name,
    )
    model, optimizations = build_model(args, config, vocab)
    trainer = build_trainer(args, config, model, samples, run_dir, resume, parts)
    if distributed.is_main_process():  # the only writer of the run folder
        vocab.copy_into(run_dir)
    return TrainingSetup(
        trainer=trainer,
        metrics=parts.metrics,
        report=optimizations,
        steps_per_epoch=steps_per_epoch,
        total_steps=args.num_epochs * steps_per_epoch,
        lr_milestones=milestones,
        inference_config=inference_config(source.config, vocab),
        vocab_path=vocab.path,
        train_durations=samples.train_durations,
        vocab_info=vocab.info,
    )
