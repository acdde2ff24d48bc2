"""Building a run: coqui config, samples, the GPTTrainer model, optimizations, and coqui's Trainer."""

from __future__ import annotations

import gc
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from TTS.config.shared_configs import BaseDatasetConfig
from TTS.tts.configs.xtts_config import XttsAudioConfig
from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTArgs, GPTTrainerConfig
from trainer import TrainerArgs
from trainer.generic_utils import get_experiment_folder_path

from utils.base_models import BaseModel
from utils.checkpoint_files import loadable_checkpoint
from utils.coqui_trainer import DivergenceGuard, FineTuneGPTTrainer, FineTuneTrainer
from utils.dataset import MAX_TEXT_TOKENS, DatasetReport
from utils.metrics_log import MetricsLogger
from utils.runs import METRICS_FILE
from utils.text_frontend import TextFrontEnd
from utils.train_args import TrainArguments
from utils.training_optimizations import OptimizationReport, TrainingOptimizer, detect_gpu
from utils.vocab import VOCAB_FILE, VocabChoice, prepare_vocab

# The conditioning clip the GPT sees per sample: 3-6 s, as in coqui's XTTS v2 recipe.
MIN_CONDITIONING_SAMPLES = 66150
MAX_CONDITIONING_SAMPLES = 132300
# Steps in a row with a NaN/inf loss before the run is declared diverged (FP16 skips a few by design).
NONFINITE_STEPS_LIMIT = 5


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
    train_durations: list[tuple[str, float]] = field(default_factory=list)  # (audio, seconds) per train row
    vocab_info: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        """Free the model's memory so a notebook can run again without restarting."""
        self.trainer.close_log_files()
        self.trainer.model = None  # type: ignore[assignment]
        self.trainer.optimizer = None  # type: ignore[assignment]
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _model_source(args: TrainArguments, base: BaseModel) -> tuple[Path, dict[str, Any], Path]:
    """(checkpoint, base config dict, vocab) to start from: the base model or a custom fine-tune.

    A custom model from one of our `ready/` folders brings its own config and vocab (which may hold
    tokens of a new language); a bare model.pth uses the base model's.
    """
    if args.custom_model:
        custom = Path(args.custom_model).expanduser()
        folder = custom.parent
        config_file = folder / "config.json" if (folder / "config.json").is_file() else base.config
        vocab = folder / "vocab.json" if (folder / "vocab.json").is_file() else base.vocab
        return custom, json.loads(config_file.read_text(encoding="utf-8")), vocab
    return base.model, json.loads(base.config.read_text(encoding="utf-8")), base.vocab


def _unique_run_name(output_path: Path, name: str) -> str:
    """The trainer names run folders by the minute; never reuse an existing folder."""
    candidate, n = name, 1
    while get_experiment_folder_path(str(output_path), candidate).exists():
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def _samples(
    report: DatasetReport, language: str, frontend: TextFrontEnd
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, float]]]:
    """coqui sample dicts for train and eval, and (audio, duration) of the train rows, in one read."""
    samples: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    train_durations = []
    for split, row, duration in report.iter_usable_splits():
        samples[split].append(
            {
                "text": frontend.apply(row.text),
                "audio_file": row.audio_location,
                "speaker_name": row.speaker_name or "speaker",
                "root_path": str(Path(row.csv_file).parent),
                "language": language,
                "audio_unique_name": f"{Path(row.csv_file).stem}#{row.line}",
            }
        )
        if split == "train":
            train_durations.append((row.audio_location, duration))
    return samples["train"], samples["eval"], train_durations


def _num_workers(requested: int) -> int:
    if requested >= 0:
        return requested
    return min(4, max(1, (os.cpu_count() or 2) // 2)) if detect_gpu().available else 0


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
    model_args = {k: v for k, v in base_config.get("model_args", {}).items() if k in GPTArgs.__dataclass_fields__}
    gpt_args = GPTArgs(**model_args)
    gpt_args.min_conditioning_length = MIN_CONDITIONING_SAMPLES
    gpt_args.max_conditioning_length = MAX_CONDITIONING_SAMPLES
    gpt_args.max_wav_length = args.max_audio_length
    gpt_args.max_text_length = MAX_TEXT_TOKENS
    gpt_args.debug_loading_failures = False
    gpt_args.mel_norm_file = str(base.mel_stats)
    gpt_args.dvae_checkpoint = str(base.dvae)
    gpt_args.xtts_checkpoint = str(loadable_checkpoint(checkpoint, output_path / ".converted"))
    gpt_args.tokenizer_file = str(vocab_path)
    gpt_args.gpt_checkpoint = ""

    optimizer_steps = args.num_epochs * math.ceil(steps_per_epoch / args.grad_acumm)
    milestones = sorted({max(1, round(f * optimizer_steps)) for f in args.lr_milestones})
    workers = _num_workers(args.num_workers)

    config = GPTTrainerConfig(
        output_path=str(output_path),
        run_name=run_name,
        project_name="xtts-finetune",
        model_args=gpt_args,
        audio=XttsAudioConfig(**base_config.get("audio", {})),
        languages=languages,
        datasets=[
            BaseDatasetConfig(formatter="coqui", dataset_name="finetune", path=str(Path(args.train_csv).parent),
                              meta_file_train=args.train_csv, meta_file_val=args.eval_csv, language=language)
        ],  # fmt: skip
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
        save_checkpoints=True,
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


def build_training_setup(
    args: TrainArguments,
    base: BaseModel,
    report: DatasetReport,
    frontend: TextFrontEnd,
    resume_dir: Path | None,
    *,
    on_event: Any = None,
    should_stop: Any = None,
) -> TrainingSetup:
    output_path = Path(args.output_path).expanduser().resolve()
    output_path.mkdir(parents=True, exist_ok=True)
    checkpoint, base_config, base_vocab = _model_source(args, base)
    language = frontend.language
    train_samples, eval_samples, train_durations = _samples(report, language, frontend)

    texts = [s["text"] for s in train_samples + eval_samples]
    vocab: VocabChoice = prepare_vocab(base_vocab, base_config, language, texts, output_path, args.vocab_new_tokens,
                                       run_vocab=resume_dir / VOCAB_FILE if resume_dir else None)  # fmt: skip
    steps_per_epoch = max(1, math.ceil(len(train_samples) / args.batch_size))
    run_name = args.run_name or f"{language}-{base.version}"
    if resume_dir is None:
        run_name = _unique_run_name(output_path, run_name)
    config, milestones = make_gpt_config(
        args,
        base,
        checkpoint=checkpoint,
        base_config=base_config,
        vocab_path=base_vocab,  # the checkpoint's shapes; adapt_model grows them to the run's vocab
        languages=vocab.languages,
        language=language,
        steps_per_epoch=steps_per_epoch,
        output_path=output_path,
        run_name=run_name,
    )

    model = FineTuneGPTTrainer(config)
    vocab.adapt_model(model)
    report = TrainingOptimizer(
        args.enable_grad_checkpoint, args.enable_sdpa, args.enable_mixed_precision, args.precision
    ).apply(model, config)

    if resume_dir is not None:
        # The trainer reloads config.json from the run folder on resume: make it this call's config.
        (resume_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=4), encoding="utf-8")
    metrics = MetricsLogger(
        (resume_dir or output_path) / METRICS_FILE,  # fixed below once the run folder exists
        batch_size=args.batch_size,
        steps_per_epoch=steps_per_epoch,
        total_steps=args.num_epochs * steps_per_epoch,
        on_event=on_event,
    )

    trainer = FineTuneTrainer(
        TrainerArgs(continue_path=str(resume_dir) if resume_dir else "", grad_accum_steps=args.grad_acumm),
        config,
        output_path=str(output_path),
        model=model,
        train_samples=train_samples,
        eval_samples=eval_samples,
        parse_command_line_args=False,
        should_stop=should_stop,
        dashboard_logger=metrics,
        callbacks={
            "on_train_step_start": metrics.on_train_step_start,
            "on_train_step_end": metrics.on_train_step_end,
            "on_train_epoch_start": metrics.on_train_epoch_start,
        },
    )
    trainer.callbacks.callbacks_on_train_step_end.append(DivergenceGuard(metrics, NONFINITE_STEPS_LIMIT))
    run_dir = Path(trainer.output_path)
    metrics.path = run_dir / METRICS_FILE
    metrics.trainer = trainer
    metrics.total_steps = trainer.total_steps_done + (args.num_epochs - trainer.epochs_done) * steps_per_epoch
    vocab.copy_into(run_dir)

    inference_config = dict(base_config)
    inference_config["languages"] = vocab.languages
    inference_config["model_args"] = {**base_config.get("model_args", {}), "tokenizer_file": "",
                                      "gpt_number_text_tokens": vocab.size}  # fmt: skip
    return TrainingSetup(
        trainer=trainer,
        metrics=metrics,
        report=report,
        steps_per_epoch=steps_per_epoch,
        total_steps=metrics.total_steps,
        lr_milestones=milestones,
        inference_config=inference_config,
        vocab_path=vocab.path,
        train_durations=train_durations,
        vocab_info=vocab.info,
    )
