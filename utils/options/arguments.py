"""Every option of a fine-tuning run, declared once: type, default, bounds and help.

`TrainArguments` checks its values when it is built (types, bounds, combinations), so an invalid one cannot
exist; it reads no file (the files it names are checked where a run starts:
utils.options.input_files.check_input_files). The notebook (`train_gpt`'s signature reads these defaults), the
CLI (flags and `--help` come from the fields), the web form and its `/start_training` endpoint (components from
these fields and the layout in webui/form_spec.py), and the "copy as code" snippet all derive from these
fields: adding an option is one field here plus the code that uses it (and a form_spec entry to show it).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from utils.constants import MAX_AUDIO_LENGTH, XTTS_SAMPLE_RATE
from utils.data.mix import dataset_entries, normalized_csvs
from utils.device.precision import PRECISIONS, Precision
from utils.device.selection import parse_devices
from utils.model.lora import parse_targets
from utils.options.option import Option, checked_value, option
from utils.quality.retention_languages import check_retention_setting
from utils.text.frontend import check_g2p_language
from utils.text.languages import LANGUAGE_CHOICES, canonical_language

# The longest clip a run may ask for before the base model's own limit is known: 30 s.
MAX_AUDIO_LENGTH_CEILING = 30 * XTTS_SAMPLE_RATE
RUN_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")

BEST_RULES = ("eval_loss", "cer", "similarity", "combined", "naturalness")  # utils.quality.selection.BestRule
OPTIMIZERS = ("adamw", "adamw_8bit")  # utils.options.optimizations builds them


@dataclass(frozen=True)
class TrainArguments:
    """Every option of a run, declared once (default, help, group, bounds), read alike by the API, the CLI, the
    page's form, the planner and the run. Long on purpose: one field per option, each with its help."""

    # The first fourteen, in this order, are train_gpt's positional parameters.
    custom_model: str = option(
        "",
        "Path of a fine-tuned model.pth to start from; empty starts from the base model.",
    )
    version: str = option(
        "v2.0.2",
        "Base model version under models/ (downloaded when missing); 'tiny' builds a small "
        "random XTTS locally for tests, demos and CPU.",
    )
    language: str = option(
        "en",
        "Language code of the dataset (ISO 639: en, es, amh, ...). A language XTTS does not "
        "know gets its own token and vocabulary.",
    )
    num_epochs: int = option(10, "Passes over the training rows.", minimum=1, maximum=10_000)
    batch_size: int | str = option(
        8,
        "Clips per training step, or 'auto': the largest that fits the GPU's free memory "
        "(the memory planner's choice, confirmed by one real step), or the free RAM on a "
        "CPU.",
        minimum=1,
        maximum=512,
        special=("auto",),
    )
    grad_acumm: int = option(
        2,
        "Gradient accumulation: steps per optimizer update (effective batch = batch_size x grad_acumm).",
        minimum=1,
        maximum=1024,
    )
    train_csv: str | tuple[str, ...] = option(
        "",
        "Training metadata CSV: audio_file|text|speaker_name (also comma/tab separated, or LJSpeech). Or a list of "
        "datasets trained together, each 'LANG[:HOW_OFTEN]=PATH' (or a dict: csv, language, weight, share): "
        "'en=a.csv', 'amh:2=b.csv' (each row twice an epoch), 'en:20%=c.csv' (a replay share: 20% of every epoch); "
        "a bare path takes `language` (utils.data.mix).",
    )
    eval_csv: str | tuple[str, ...] = option(
        "",
        "Evaluation CSV; empty holds out 15% of the usable training rows. With a list of datasets, a list: one per "
        "dataset ('' holds out 15% of that one's rows).",
    )
    output_path: str = option("./output", "Folder where run folders are created.")
    max_audio_length: int = option(
        MAX_AUDIO_LENGTH,
        f"Longest clip in samples at {XTTS_SAMPLE_RATE} Hz: {MAX_AUDIO_LENGTH} = "
        f"{MAX_AUDIO_LENGTH / XTTS_SAMPLE_RATE:.2f} s, "
        "what XTTS v2 was trained with and the most the web page takes. train_gpt and the CLI take longer clips, "
        "up to what the base model's GPT can place (28 s for XTTS v2; the run says so before it starts), at the "
        "cost of memory.",
        minimum=XTTS_SAMPLE_RATE,
        maximum=MAX_AUDIO_LENGTH_CEILING,
    )
    enable_grad_checkpoint: bool = option(
        True,
        "Gradient checkpointing: recompute GPT activations in backward to save GPU memory.",
    )
    enable_sdpa: bool = option(
        True,
        "Fused scaled-dot-product attention in the GPT (eager attention when off).",
    )
    enable_mixed_precision: bool = option(
        True,
        "Alias of precision, kept for older calls: False is precision='fp32' (whatever precision says); True leaves "
        "the choice to precision. Folded into precision when the arguments are built, so it always reads True.",
    )
    use_amharic_g2p: bool = option(
        False,
        "Amharic: convert text to IPA phonemes (rule-based G2P) in training and, automatically, inference.",
    )
    # Keyword-only extras.
    learning_rate: float = option(
        5e-6,
        "AdamW learning rate (XTTS fine-tuning uses ~5e-6). With N devices an "
        "optimizer step averages N times the clips and an epoch has N times fewer steps: "
        "keep the rate (and add epochs), or scale it by about sqrt(N) for about the same "
        "progress per epoch (AdamW's square-root rule; the linear rule, x N, comes from SGD "
        "and is usually too strong for fine-tuning).",
        minimum=0.0,
        maximum=1e-2,
    )
    lr_milestones: tuple[float, ...] = option(
        (0.5, 0.75),
        "Fractions of the run's optimizer steps at which the learning rate halves.",
        minimum=0.0,
        maximum=1.0,
    )
    grad_clip: float = option(
        1.0,
        "Gradient norm clipping threshold (0 turns it off).",
        minimum=0.0,
        maximum=1000.0,
    )
    weight_decay: float = option(
        1e-2,
        "AdamW weight decay (weights only, not norms/biases).",
        minimum=0.0,
        maximum=1.0,
    )
    save_step: int = option(
        1000,
        "Save a checkpoint every this many steps.",
        minimum=1,
        maximum=10_000_000,
    )
    save_n_checkpoints: int = option(
        2,
        "Periodic checkpoints kept (the best model is kept apart).",
        minimum=1,
        maximum=100,
    )
    precision: str = option(
        "auto",
        "Training precision, the one switch of mixed precision: auto (BF16 on Ampere and newer, FP16 with a "
        "GradScaler on Volta/Turing, FP32 otherwise) | bf16 | fp16 | fp32 (no mixed precision). A request the GPU "
        "cannot honour falls back, with a reason.",
        choices=PRECISIONS,
    )
    enable_tf32: bool = option(
        True,
        "TF32 matmuls and convolutions on Ampere and newer GPUs: faster FP32 math, slightly less exact (cuDNN's "
        "autotuning stays off: batches vary in length, and it has not been measured to win).",
    )
    optimizer: str = option(
        "adamw",
        "adamw (fused kernels where torch has them: CUDA and CPU) | adamw_8bit (bitsandbytes' AdamW8bit, on CUDA "
        "or a CPU: a quarter of the optimizer memory; falls back to adamw with a reason if bitsandbytes is missing).",
        choices=OPTIMIZERS,
    )
    resume_from: str = option(
        "",
        "A run folder (or a checkpoint in it) to continue: step, optimizer and scheduler are restored.",
    )
    num_workers: int = option(
        -1, "Data loader worker processes; -1 picks 0 on CPU and up to 4 with a GPU.", minimum=-1, maximum=64
    )
    seed: int = option(1, "Seed for shuffling, the eval split and the trainer.", minimum=0, maximum=2**31 - 1)
    run_name: str = option(
        "",
        "Name prefix of the run folder (letters, digits, '-', '_', '.'); empty uses language and version.",
    )
    models_dir: str = option("", "Folder of base models; empty uses ./models (or $XTTS_MODELS_DIR).")
    min_usable_rows: int = option(
        2, "Refuse a dataset with fewer usable rows than this.", minimum=2, maximum=10_000_000
    )
    vocab_new_tokens: int = option(
        2000,
        "New language only: BPE tokens to learn from the dataset's text (capped by what the text supports).",
        minimum=0,
        maximum=50_000,
    )
    print_step: int = option(10, "Print the trainer's progress every this many steps.", minimum=1, maximum=1_000_000)
    # Measured quality (utils.training.evaluation.quality_eval, utils.training.evaluation.best_checkpoint).
    quality_eval: int = option(
        3,
        "Held-out eval sentences spoken with the current weights and scored at each evaluation (0 = off): CER/WER "
        "of a Whisper transcript, speaker similarity (Resemblyzer), duration against the real clip. Clips go to "
        "run_dir/evals/step_<N>/, scores to metrics.jsonl.",
        minimum=0,
        maximum=50,
    )
    best_by: str = option(
        "eval_loss",
        "Which checkpoint ready/ holds: lowest eval_loss, lowest cer, highest similarity, highest naturalness "
        "(predicted MOS), or highest combined = 0.7 x (0.5 x (1 - min(CER, 1)) + 0.5 x similarity) + 0.15 x "
        "(naturalness - 1) / 4 + 0.15 x (1 - babble rate) (docs/quality.md). Early stopping watches the same value. "
        "All but eval_loss need quality_eval >= 1.",
        choices=BEST_RULES,
    )
    early_stop_patience: int = option(
        0,
        "Stop when the best_by value has not improved for this many evaluations (0 = never stop early); "
        "evaluations without a value (e.g. no Whisper model) are not counted.",
        minimum=0,
        maximum=10_000,
    )
    whisper_model: str = option(
        "small",
        "Whisper model for the CER/WER: a faster-whisper size (tiny, base, small, large-v3...) looked up in "
        "models/whisper/<name>/ or downloaded, or a CTranslate2 model folder. Without it the CER is empty, with "
        "the reason, and training goes on.",
    )
    quality_eval_share: float = option(
        0.2,
        "The most of the run's wall time that scored evaluations may take (0.2 = 20%): the first and the last "
        "evaluation are always scored, the others when scoring so far plus one more stays within the share; "
        "1 scores every evaluation. The eval loss is measured at every evaluation either way.",
        minimum=0.01,
        maximum=1.0,
    )
    inference_search: int = option(
        5,
        "At the end of the run, sampling settings (temperature, repetition_penalty, top_p) tried on the chosen "
        "checkpoint, with a fixed seed, on the scored sentences and probes: the best combined score goes into "
        "ready/config.json and ready/finetune.json 'inference' (with every candidate's scores). This many "
        "candidates, the base model's settings first, within quality_eval_share; 0 = off (the base settings stay).",
        minimum=0,
        maximum=8,
    )
    reference_search: int = option(
        4,
        "At the end of the run, reference clips tried on the chosen checkpoint, with a fixed seed, on the scored "
        "sentences and probes: the run's own clip first, then clean 5-15 s training clips alone and 2-3 of the best "
        "together; the best combined score goes into ready/ (reference.wav first) and ready/finetune.json 'reference' "
        "(with every candidate's scores). This many candidates, within quality_eval_share; 0 = off (the run's own "
        "clip stays). Any finished run: python -m utils.cli choose-reference RUN, or the Test tab.",
        minimum=0,
        maximum=9,
    )
    quality_max_audio_tokens: int = option(
        0,
        "Longest scored clip in GPT audio tokens (~21.5 per second); 0 allows 1.5 times the real clip's length.",
        minimum=0,
        maximum=10_000,
    )
    quality_baseline_from: str = option(
        "",
        "A run folder whose step-0 scored evaluation this run takes as its own baseline instead of speaking its "
        "starting weights again (a sweep's trials share one: utils.sweep). Taken only when that run scored the same "
        "starting weights, sentences, probes, seed and Whisper model; otherwise this run scores its own and says why.",
    )
    retention_languages: str = option(
        "auto",
        "Languages the run does not train, spoken at every scored evaluation and compared with step 0, so that a "
        "fine-tune that makes the model forget them is seen (comma separated codes; 'auto': English, or the first of "
        "the base model's languages the run does not train (Spanish for an English run); '' = off). Scored like "
        "any clip: CER where the Whisper model has the language, naturalness, whether each clip stopped "
        "(utils.training.evaluation.retention).",
    )
    speaker_rule: str = option(
        "mean",
        "Several speakers in the dataset (each with enough data becomes a named voice with its own scores): the "
        "best checkpoint is chosen by the best_by value over the voices, their mean or the worst voice's.",
        choices=("mean", "worst"),
    )
    devices: str = option(
        "",
        "Train on several devices, one process each (PyTorch DDP started by torchrun): GPU numbers such as '0,1', "
        "or 'cpu,cpu' to try it without a GPU; one GPU number trains on that GPU alone. Each process takes batch_size "
        "clips per step: the effective batch is batch_size x grad_acumm x devices (see learning_rate for scaling the "
        "rate). Empty: one process on the default device.",
    )
    length_grouping: bool = option(
        True,
        "Every clip once per epoch (several datasets: as their weights draw them) in batches of similar length "
        "(shuffled, sorted by duration within windows of 50 batches, batched, the batches shuffled): less padding per "
        "batch, so more clips per second at batch 4 and up. Off: plain shuffled batches.",
    )
    torch_compile: bool = option(
        False,
        "Compile the GPT blocks with torch.compile (TorchInductor): the first step takes minutes longer. Off by "
        "default: unmeasured on a GPU so far, and no faster on a CPU (1.01x); benchmarks/gpu_table.py measures it.",
    )

    # LoRA (utils.training.loop.lora): adapters on the GPT2 blocks instead of training the whole GPT.
    lora_rank: int = option(
        0,
        "LoRA rank: 0 fine-tunes the whole GPT; 8-64 trains low-rank adapters on the GPT blocks instead (PEFT), with "
        "the base weights frozen (in half precision on a GPU): far less GPU memory, an adapter of tens of MB "
        "(run_dir/adapter/) and ready/ with it merged. A new language also trains its token embeddings and the "
        "output heads. Adapters usually want a higher learning_rate (~1e-4) than a full fine-tune.",
        minimum=0,
        maximum=512,
    )
    lora_alpha: float = option(
        0.0,
        "LoRA alpha: the adapter's output is scaled by alpha / rank; 0 uses twice the rank.",
        minimum=0.0,
        maximum=10_000.0,
    )
    lora_targets: str = option(
        "c_attn,c_proj,c_fc",
        "GPT2 block projections LoRA adapts, comma separated: c_attn (attention q/k/v), c_proj (attention and MLP "
        "output; attn.c_proj or mlp.c_proj for one), c_fc (MLP input).",
    )
    new_language: bool = option(
        False,
        "Confirm that `language` is a language XTTS v2 does not speak (nor amh), to be added to the model: its own "
        "token and vocabulary learned from the dataset. Without it such a code is refused, so a typo is not "
        "trained as a new language.",
    )
    lexicon_file: str = option(
        "",
        "Pronunciation lexicon of the voice: a UTF-8 file of term<TAB>respelling lines (e.g. SQL -> sequel, Nguyen -> "
        "Win; '#' comments, [xx] for another language's entries; or JSON; docs/lexicon.md), applied to the text before "
        "the tokenizer in training, the scored evaluation and inference, and kept with the voice in "
        "ready/finetune.json. With use_amharic_g2p a respelling may be phonemes. Empty: none.",
    )

    def __post_init__(self) -> None:
        csvs = normalized_csvs(self.train_csv, self.eval_csv, canonical_language(str(self.language or "en")))
        object.__setattr__(self, "train_csv", csvs[0])
        object.__setattr__(self, "eval_csv", csvs[1])
        for spec in fields(self):
            if isinstance(getattr(self, spec.name), tuple) and spec.name in ("train_csv", "eval_csv"):
                continue  # several datasets, checked by normalized_csvs
            object.__setattr__(
                self,
                spec.name,
                checked_value(spec.name, getattr(self, spec.name), spec.default, spec.metadata["option"]),
            )
        object.__setattr__(self, "precision", precision_of(self.enable_mixed_precision, self.precision))
        object.__setattr__(self, "enable_mixed_precision", True)  # folded: precision holds the decision
        self._check_together()

    def _check_together(self) -> None:
        """Combinations of values that cannot run, from the values alone: no file is read here (see
        utils.options.input_files.check_input_files for what needs the disk)."""
        if not self.language.strip():
            raise ValueError("language is empty: give the dataset's language code, e.g. 'en'.")
        check_g2p_language(self.language, self.use_amharic_g2p)
        self._check_new_language()
        object.__setattr__(self, "devices", ",".join(parse_devices(self.devices)))  # "cuda:0, cuda:1" -> "0,1"
        self._check_meaningful()
        if self.best_by != "eval_loss" and self.quality_eval == 0:
            raise ValueError(
                f"best_by={self.best_by!r} is measured on generated speech: set quality_eval to 1 or more "
                "sentences, or use best_by='eval_loss'."
            )
        if self.batch_size == "auto" and len(parse_devices(self.devices)) > 1 if self.devices else False:
            raise ValueError("batch_size='auto' plans one device's memory: give a number with several devices.")
        if self.lora_rank:
            parse_targets(self.lora_targets)
        trained = [self.language]
        if isinstance(self.train_csv, tuple):
            trained += [e.language for e in dataset_entries(self.train_csv, self.eval_csv, self.language)]
        check_retention_setting(self.retention_languages, trained)
        if self.run_name and (not RUN_NAME_PATTERN.fullmatch(self.run_name) or ".." in self.run_name):
            raise ValueError(
                f"run_name {self.run_name[:100]!r} is not a name: use up to 80 letters, digits, '-', '_' "
                "and '.', starting with a letter or digit (it names a folder, not a path)."
            )

    def _check_meaningful(self) -> None:
        """Values inside their bounds that still cannot mean what they say: refused with the reason."""
        if self.learning_rate == 0:
            raise ValueError(
                "learning_rate is 0: the weights would never change and the whole run would train nothing. "
                "Give a positive rate (XTTS fine-tuning uses about 5e-06)."
            )
        repeated = sorted({m for m in self.lr_milestones if self.lr_milestones.count(m) > 1})
        if repeated:
            raise ValueError(
                f"lr_milestones repeat {', '.join(f'{m:g}' for m in repeated)}: each is a point where the rate "
                "halves, so a repeat would quarter it at once. Give each fraction once."
            )

    def _check_new_language(self) -> None:
        if isinstance(self.train_csv, tuple):
            main = canonical_language(self.language)
            entries = dataset_entries(self.train_csv, self.eval_csv, self.language)
            if main not in {entry.language for entry in entries}:
                raise ValueError(
                    f"language {main!r} is none of the datasets' ({', '.join(e.language for e in entries)}): the run's "
                    "language is that of its own voice (its evaluation, G2P, new vocabulary and ready/ voice); give "
                    "one of theirs."
                )
            for entry in entries:
                if entry.language != main and entry.language not in LANGUAGE_CHOICES:
                    raise ValueError(
                        f"train_csv {entry.csv!r}: language {entry.language!r} is not one XTTS v2 speaks, and only "
                        f"the run's own language ({main!r}) may be new to the model. Give that dataset one of "
                        f"{', '.join(LANGUAGE_CHOICES)}, or make it the run's language."
                    )
        # A resumed run or a fine-tuned model may already hold the language: their vocab is checked later.
        if self.new_language or self.resume_from or self.custom_model:
            return
        if canonical_language(self.language) not in LANGUAGE_CHOICES:
            raise ValueError(
                f"language {self.language!r} is not one XTTS v2 speaks ({', '.join(LANGUAGE_CHOICES)}): training "
                "it adds a new language to the model (its own token and vocabulary). If that is what you want, "
                "confirm it with new_language=True (CLI --new-language; on the page, tick 'Add a new language'); "
                "otherwise give one of those codes."
            )

    @classmethod
    def positional_names(cls) -> list[str]:
        return [f.name for f in fields(cls)][:14]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lr_milestones"] = list(self.lr_milestones)
        for name in ("train_csv", "eval_csv"):
            if isinstance(data[name], tuple):
                data[name] = list(data[name])
        return data

    def replace(self, **changes: Any) -> TrainArguments:
        return TrainArguments(**{**self.to_dict(), **changes})


def precision_of(enable_mixed_precision: bool, precision: str) -> str:
    """The one precision decision of a call that may still use the `enable_mixed_precision` alias."""
    return precision if enable_mixed_precision is not False else Precision.FP32.value


def fold_precision_alias(keywords: dict[str, Any]) -> dict[str, Any]:
    """train_gpt keywords with the `enable_mixed_precision` alias folded into `precision` (as TrainArguments does),
    so that a later change of `precision` is not undone by the alias."""
    if keywords.get("enable_mixed_precision", True) is not False:
        return dict(keywords)
    return {**keywords, "enable_mixed_precision": True, "precision": Precision.FP32.value}


def option_of(name: str) -> Option:
    return TrainArguments.__dataclass_fields__[name].metadata["option"]


def argument_defaults() -> dict[str, Any]:
    return {f.name: (f.default if f.default is not MISSING else None) for f in fields(TrainArguments)}
