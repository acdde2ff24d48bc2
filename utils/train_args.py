"""Every argument of a fine-tuning run, with its default, help text and checks.

One dataclass serves the notebook (`train_gpt` builds it from its keywords), the CLI (options and
`--help` are generated from the fields) and the web UI (defaults and help), so they cannot drift.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from utils.training_optimizations import PRECISIONS


def _help(text: str, **extra: Any) -> Any:
    return {"help": text, **extra}


@dataclass
class TrainArguments:
    # The first fourteen, in this order, are train_gpt's positional parameters.
    custom_model: str = field(default="", metadata=_help(
        "Path of a fine-tuned model.pth to start from; empty starts from the base model."))
    version: str = field(default="v2.0.2", metadata=_help(
        "Base model version under models/ (downloaded when missing); 'tiny' builds a small random XTTS "
        "locally for tests, demos and CPU."))
    language: str = field(default="en", metadata=_help(
        "Language code of the dataset (ISO 639: en, es, amh, ...). A language XTTS does not know gets "
        "its own token and vocabulary."))
    num_epochs: int = field(default=10, metadata=_help("Passes over the training rows."))
    batch_size: int = field(default=8, metadata=_help("Clips per training step."))
    grad_acumm: int = field(default=2, metadata=_help(
        "Gradient accumulation: steps per optimizer update (effective batch = batch_size x grad_acumm)."))
    train_csv: str = field(default="", metadata=_help(
        "Training metadata CSV: audio_file|text|speaker_name (also comma/tab separated, or LJSpeech)."))
    eval_csv: str = field(default="", metadata=_help(
        "Evaluation CSV; empty holds out 15% of the usable training rows."))
    output_path: str = field(default="./output", metadata=_help("Folder where run folders are created."))
    max_audio_length: int = field(default=255995, metadata=_help(
        "Longest clip in samples at 22050 Hz (255995 = 11.6 s, what XTTS was trained with)."))
    enable_grad_checkpoint: bool = field(default=True, metadata=_help(
        "Gradient checkpointing: recompute GPT activations in backward to save GPU memory."))
    enable_sdpa: bool = field(default=True, metadata=_help(
        "Fused scaled-dot-product attention in the GPT (eager attention when off)."))
    enable_mixed_precision: bool = field(default=True, metadata=_help(
        "Mixed precision: BF16 on Ampere and newer, FP16 with a GradScaler on Volta/Turing, FP32 otherwise."))
    use_amharic_g2p: bool = field(default=False, metadata=_help(
        "Amharic: convert text to IPA phonemes (rule-based G2P) in training and, automatically, inference."))
    # Keyword-only extras.
    learning_rate: float = field(default=5e-6, metadata=_help("AdamW learning rate."))
    lr_milestones: tuple[float, ...] = field(default=(0.5, 0.75), metadata=_help(
        "Fractions of the run's optimizer steps at which the learning rate halves."))
    grad_clip: float = field(default=1.0, metadata=_help("Gradient norm clipping threshold (0 turns it off)."))
    weight_decay: float = field(default=1e-2, metadata=_help("AdamW weight decay (weights only, not norms/biases)."))
    save_step: int = field(default=1000, metadata=_help("Save a checkpoint every this many steps."))
    save_n_checkpoints: int = field(default=2, metadata=_help("Periodic checkpoints kept (the best model is kept apart)."))
    precision: str = field(default="auto", metadata=_help(
        "auto | bf16 | fp16 | fp32. auto picks by GPU; a request the GPU cannot honour falls back, with a reason.",
        choices=PRECISIONS))
    resume_from: str = field(default="", metadata=_help(
        "A run folder (or a checkpoint in it) to continue: step, optimizer and scheduler are restored."))
    num_workers: int = field(default=-1, metadata=_help(
        "Data loader worker processes; -1 picks 0 on CPU and up to 4 with a GPU."))
    seed: int = field(default=1, metadata=_help("Seed for shuffling, the eval split and the trainer."))
    run_name: str = field(default="", metadata=_help("Name prefix of the run folder; empty uses language and version."))
    models_dir: str = field(default="", metadata=_help("Folder of base models; empty uses ./models (or $XTTS_MODELS_DIR)."))
    min_usable_rows: int = field(default=2, metadata=_help("Refuse a dataset with fewer usable rows than this."))
    vocab_new_tokens: int = field(default=2000, metadata=_help(
        "New language only: BPE tokens to learn from the dataset's text (capped by what the text supports)."))
    print_step: int = field(default=10, metadata=_help("Print the trainer's progress every this many steps."))

    @classmethod
    def positional_names(cls) -> list[str]:
        return [f.name for f in fields(cls)][:14]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lr_milestones"] = list(self.lr_milestones)
        return data

    def validate(self) -> None:
        """Raise ValueError with what is wrong and how to fix it. Cheap: nothing is loaded."""

        def positive_int(name: str, value: Any, minimum: int = 1) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be a whole number of at least {minimum}; got {value!r}.")

        positive_int("num_epochs", self.num_epochs)
        positive_int("batch_size", self.batch_size)
        positive_int("grad_acumm", self.grad_acumm)
        positive_int("save_step", self.save_step)
        positive_int("save_n_checkpoints", self.save_n_checkpoints)
        positive_int("print_step", self.print_step)
        positive_int("min_usable_rows", self.min_usable_rows, 2)
        positive_int("max_audio_length", self.max_audio_length, 22050)
        if self.batch_size > 512:
            raise ValueError(f"batch_size {self.batch_size} is far beyond what any GPU fits for XTTS; "
                             "use at most 512 (typically 2-16, with grad_acumm for a larger effective batch).")  # fmt: skip
        if not isinstance(self.num_workers, int) or self.num_workers < -1:
            raise ValueError(f"num_workers must be -1 (auto) or a whole number >= 0; got {self.num_workers!r}.")
        for name in ("learning_rate", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a number >= 0; got {value!r}.")
        if self.learning_rate <= 0 or self.learning_rate > 1e-2:
            raise ValueError(f"learning_rate {self.learning_rate} is outside (0, 0.01]; XTTS fine-tuning uses ~5e-6.")
        if any(not 0 < m < 1 for m in self.lr_milestones):
            raise ValueError(f"lr_milestones are fractions of the run between 0 and 1; got {list(self.lr_milestones)}.")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {self.precision!r}.")
        if self.custom_model and not Path(self.custom_model).expanduser().is_file():
            raise ValueError(f"custom_model not found: {self.custom_model}. Give the path of a model.pth, or '' "
                             "to start from the base model.")  # fmt: skip
        if self.resume_from and not Path(self.resume_from).expanduser().exists():
            raise ValueError(f"resume_from not found: {self.resume_from}. Give a run folder from {self.output_path}.")
        if not isinstance(self.language, str) or not self.language.strip():
            raise ValueError("language is empty: give the dataset's language code, e.g. 'en'.")
        if self.vocab_new_tokens < 0:
            raise ValueError("vocab_new_tokens must be >= 0.")


def argument_defaults() -> dict[str, Any]:
    return {f.name: (f.default if f.default is not MISSING else None) for f in fields(TrainArguments)}
