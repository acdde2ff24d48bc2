"""The Fine-tune form's layout: which TrainArguments options the page shows, with which widget, label and help
line, in which group. What an option is (default, bounds, help) is declared once, in
utils.options.arguments.TrainArguments; this module says only how the page shows it. Each entry is one
component whose id (`UI.name`, else the field name) is also the `/start_training` parameter; the parameters keep
the declaration's order."""

from __future__ import annotations

from dataclasses import dataclass

from utils.constants import MAX_AUDIO_LENGTH, XTTS_SAMPLE_RATE

# Web form groups, in the order the Fine-tune tab shows them.
DATA, MODEL, SCHEDULE, SPEED, QUALITY, ADVANCED = "data", "model", "schedule", "optimizations", "quality", "advanced"
GROUPS = (DATA, MODEL, SCHEDULE, SPEED, QUALITY, ADVANCED)


@dataclass(frozen=True)
class UI:
    """Where and how the web form shows an option. `name` is the component id and the API parameter."""

    label: str
    group: str
    widget: str = ""  # number | slider | checkbox | radio | dropdown | textbox | datasets | gpus | hidden; empty: type
    name: str = ""  # defaults to the field name
    scale: float = 1.0  # the form shows value / scale (samples shown as seconds)
    step: float | None = None
    info: str = ""


FORM: dict[str, UI] = {
    "custom_model": UI("Custom model.pth (optional)", MODEL, info="start from a fine-tuned model"),
    "version": UI("Base model", MODEL, "dropdown"),
    "language": UI("Language", DATA, "dropdown"),
    "num_epochs": UI("Epochs", SCHEDULE),
    "batch_size": UI("Batch size", SCHEDULE, "textbox", info="a number, or auto"),
    "grad_acumm": UI("Gradient accumulation", SCHEDULE),
    "train_csv": UI(
        "Train CSV",
        DATA,
        "datasets",
        info="several datasets: one per line, LANG[:HOW_OFTEN]=PATH (en=a.csv, de:0.5=b.csv, en:20%=replay.csv)",
    ),
    "eval_csv": UI("Eval CSV (optional)", DATA, "datasets", info="several datasets: one line each, - to hold out 15%"),
    "max_audio_length": UI(
        "Longest clip (seconds)",
        SCHEDULE,
        "slider",
        name="max_seconds",
        scale=XTTS_SAMPLE_RATE,
        step=0.1,
        info=f"at most {MAX_AUDIO_LENGTH / XTTS_SAMPLE_RATE:.2f} s, what XTTS v2 was trained with",
    ),
    "enable_grad_checkpoint": UI("Gradient checkpointing", SPEED, info="less GPU memory, ~30% more compute"),
    "enable_sdpa": UI("SDPA attention", SPEED, info="fused attention kernels"),
    # The alias of precision stays a /start_training parameter for older scripts; the page shows precision alone.
    "enable_mixed_precision": UI("Mixed precision (alias of precision)", SPEED, "hidden"),
    "use_amharic_g2p": UI("Amharic G2P", DATA, info="language amh: train (and speak) on IPA phonemes"),
    "learning_rate": UI("Learning rate", SCHEDULE),
    "grad_clip": UI("Gradient clipping", ADVANCED),
    "weight_decay": UI("Weight decay", ADVANCED),
    "save_step": UI("Checkpoint every N steps", ADVANCED),
    "save_n_checkpoints": UI("Checkpoints kept", ADVANCED),
    "precision": UI(
        "Precision", SPEED, "radio", info="auto: BF16 on Ampere+, FP16 on Volta/Turing; fp32: no mixed precision"
    ),
    "enable_tf32": UI("TF32 matmuls", SPEED, info="Ampere+ only; off = exact FP32"),
    "optimizer": UI("Optimizer", SPEED, "radio"),
    "resume_from": UI("Resume run", ADVANCED, "dropdown", info="continue a stopped run: its own settings are restored"),
    "seed": UI("Seed", ADVANCED),
    "run_name": UI("Run name", ADVANCED),
    "quality_eval": UI("Sentences scored per evaluation", QUALITY, info="0 turns measured quality off"),
    "best_by": UI(
        "Best checkpoint by",
        QUALITY,
        "radio",
        info="combined = 0.7·(0.5·(1 − min(CER, 1)) + 0.5·similarity) + 0.15·(naturalness − 1)/4 + 0.15·(1 − babble)",
    ),
    "early_stop_patience": UI("Early stopping patience (evaluations)", QUALITY, info="0 = off"),
    "whisper_model": UI("Whisper model for scoring", QUALITY),
    "quality_eval_share": UI(
        "Scoring time budget (share of the run)", QUALITY, info="0.2 keeps scoring under ~20%; 1 = every eval"
    ),
    "inference_search": UI(
        "Sampling settings tried at the end", QUALITY, info="the best goes into ready/; 0 keeps the base settings"
    ),
    "reference_search": UI(
        "Reference clips tried at the end", QUALITY, info="the best goes into ready/; 0 keeps the run's own clip"
    ),
    "quality_max_audio_tokens": UI(
        "Longest scored clip (audio tokens)",
        QUALITY,
        info="~21.5 a second; 0 = 1.5 x its real clip. A cap keeps CPU scoring short",
    ),
    "retention_languages": UI(
        "Languages kept (retention check)", QUALITY, info="spoken and scored at each evaluation; auto, codes, or empty"
    ),
    "speaker_rule": UI("Several speakers: best checkpoint by", QUALITY, "radio", info="their mean or the worst voice"),
    "devices": UI("GPUs (one training process each)", SPEED, "gpus", info="effective batch x number of GPUs"),
    "length_grouping": UI(
        "Length-grouped batches", SPEED, info="less padding; every clip once per epoch (or as weighted)"
    ),
    "torch_compile": UI("torch.compile the GPT blocks", ADVANCED, info="minutes to compile; unmeasured on a GPU"),
    "lora_rank": UI("LoRA rank (0 = full fine-tune)", MODEL, info="8-64: fits 4-6 GB GPUs"),
    "lora_alpha": UI("LoRA alpha (0 = 2 x rank)", ADVANCED),
    "lora_targets": UI("LoRA targets", ADVANCED),
    "new_language": UI("Add a new language", DATA, info="the code is not one XTTS speaks: learn it"),
}
