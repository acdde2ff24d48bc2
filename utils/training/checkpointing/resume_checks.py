"""What a resume may continue: the same run, on the same language, base model, vocabulary, optimizer and dataset.

A resume restores a run's weights, optimizer and step count and goes on with its plan. Continued on
another language, base model, vocabulary or dataset it would be another run recorded as this one
(run.json and ready/finetune.json would describe data the run never trained on), so such a resume is
refused before anything is written, with what differs and how to start a new run from the checkpoint
instead. The dataset is compared by content (`DatasetReport.fingerprint`), so a dataset moved to
another folder still resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.options.arguments import TrainArguments
from utils.training.checkpointing.checkpoints import newest_checkpoint
from utils.training.checkpointing.finish_export import export_pending
from utils.training.recording.checkpoint_files import checkpoint_step


def checkpoint_steps(resume_point: Path) -> int | None:
    """The steps done at the checkpoint a resume continues from (None when its name does not say)."""
    checkpoint = resume_point if resume_point.is_file() else newest_checkpoint(resume_point)
    return checkpoint_step(checkpoint) if checkpoint else None


def resume_differences(
    record: dict[str, Any],
    args: TrainArguments,
    language: str,
    base_version: str,
    frontend: dict[str, Any],
    fingerprint: str,
) -> list[str]:
    """What this call gives that the run did not train with, one phrase each (empty: the same run)."""
    before = record.get("arguments") or {}
    found = []
    if record.get("language") and record["language"] != language:
        found.append(f"language {language!r} (the run trained on {record['language']!r})")
    trained_base = (record.get("base_model") or {}).get("version")
    if trained_base and trained_base != base_version:
        found.append(f"base model {base_version!r} (the run trained from {trained_base!r})")
    if args.custom_model and args.custom_model != before.get("custom_model", ""):
        started = before.get("custom_model") or "the base model"
        found.append(f"custom_model {args.custom_model!r} (the run started from {started})")
    trained_g2p = (record.get("text_frontend") or {}).get("amharic_g2p")
    if trained_g2p is not None and bool(trained_g2p) != bool(frontend.get("amharic_g2p")):
        found.append(f"use_amharic_g2p={bool(frontend.get('amharic_g2p'))} (the run trained with {bool(trained_g2p)})")
    if "vocab_new_tokens" in before and before["vocab_new_tokens"] != args.vocab_new_tokens:
        found.append(
            f"vocab_new_tokens {args.vocab_new_tokens} (the run's vocabulary used {before['vocab_new_tokens']})"
        )
    if "lora_rank" in before:
        lora = _lora_difference(before, args)
        if lora:
            found.append(lora)
    if before.get("optimizer", args.optimizer) != args.optimizer:
        # The checkpoint holds that optimizer's state (AdamW's moments, or 8-bit ones): the other cannot load it.
        found.append(
            f"optimizer {args.optimizer!r} (the run trained with {before['optimizer']!r}, whose state its "
            "checkpoints hold)"
        )
    if "length_grouping" in before and bool(before["length_grouping"]) != bool(args.length_grouping):
        # The interrupted epoch's batch order depends on it: the resume skips the batches already trained.
        found.append(
            f"length_grouping={bool(args.length_grouping)} (the run trained with {bool(before['length_grouping'])})"
        )
    trained_data = (record.get("dataset") or {}).get("fingerprint")
    mixed = _datasets_difference(before, args)
    if mixed:
        found.append(mixed)
    elif trained_data and trained_data != fingerprint:
        found.append(
            f"the dataset {_named(args.train_csv)!r}{' + ' + repr(_named(args.eval_csv)) if args.eval_csv else ''} "
            "holds other rows "
            "than the one the run trained on (compared by content: texts, speakers, splits and audio)"
        )
    return found


def _named(csvs: Any) -> str:
    return ", ".join(csvs) if isinstance(csvs, tuple) else str(csvs)


def _datasets_difference(before: dict[str, Any], args: TrainArguments) -> str:
    """Another list of datasets (utils.data.mix), named: each dataset's CSV, language and rate."""
    from utils.data.mix import dataset_entries, describe_rate

    if "train_csv" not in before or not (isinstance(before["train_csv"], list) or isinstance(args.train_csv, tuple)):
        return ""
    trained = before["train_csv"] if isinstance(before["train_csv"], list) else before["train_csv"]
    trained_evals = before.get("eval_csv") or ""
    try:
        then = dataset_entries(
            tuple(trained) if isinstance(trained, list) else trained,
            tuple(trained_evals) if isinstance(trained_evals, list) else trained_evals,
            before.get("language", args.language),
        )
    except ValueError:
        return ""
    now = dataset_entries(args.train_csv, args.eval_csv, args.language)
    key = lambda entries: [(e.language, e.weight, e.share, Path(e.csv).name) for e in entries]
    if key(then) == key(now):
        return ""
    return f"the datasets {describe_rate(now)} (the run trained on {describe_rate(then)})"


def _lora_difference(before: dict[str, Any], args: TrainArguments) -> str:
    """LoRA's rank, alpha and targets are part of the weights a run trains (its scaling is saved in every checkpoint
    and merged into ready/): another setting, or full vs LoRA, is another run."""
    from types import SimpleNamespace

    from utils.model.lora import LoraSettings

    def settings(values: Any) -> tuple[int, float, frozenset[str]] | None:
        lora = LoraSettings.from_args(values)
        return None if lora is None else (lora.rank, lora.alpha, frozenset(lora.targets))

    names = ("lora_rank", "lora_alpha", "lora_targets")
    trained = SimpleNamespace(**{name: before.get(name, getattr(args, name)) for name in names})
    if settings(trained) == settings(args):
        return ""

    def described(values: Any) -> str:
        lora = LoraSettings.from_args(values)
        if lora is None:
            return "a full fine-tune (lora_rank 0)"
        return f"lora_rank {lora.rank}, lora_alpha {lora.alpha:g}, lora_targets {','.join(lora.targets)!r}"

    return f"{described(args)} (the run trained as {described(trained)})"


def new_run_hint(run_dir: Path, resume_point: Path) -> str:
    ready = run_dir / "ready" / "model.pth"
    start = ready if ready.is_file() else (resume_point if resume_point.is_file() else newest_checkpoint(run_dir))
    return (
        f"To train further on these settings, start a new run from its weights: train_gpt(custom_model='{start}', "
        "resume_from='', ...) with your language and dataset."
    )


def check_resume(
    run_dir: Path,
    resume_point: Path,
    record: dict[str, Any],
    args: TrainArguments,
    *,
    language: str,
    base_version: str,
    frontend: dict[str, Any],
    fingerprint: str,
    total_steps: int,
) -> None:
    """Refuse (ValueError, nothing written) a resume that would not continue the run it names. A run that trained
    every step but whose ready/ is incomplete is not refused: the resume only exports
    (utils.training.checkpointing.finish_export)."""
    differences = resume_differences(record, args, language, base_version, frontend, fingerprint)
    if differences:
        raise ValueError(
            f"resume_from: {run_dir.name} cannot be continued with these arguments; they differ in "
            + "; ".join(differences)
            + f". A resume continues the same run. {new_run_hint(run_dir, resume_point)}"
        )
    done = checkpoint_steps(resume_point)
    if done is not None and total_steps <= done and not export_pending(run_dir, done, total_steps):
        raise ValueError(
            f"resume_from: {run_dir.name} has already trained {done} steps and num_epochs={args.num_epochs} "
            f"plans {total_steps} in all, so nothing is left to train. Give more epochs to continue it "
            f"(each epoch is {total_steps // max(args.num_epochs, 1)} steps). {new_run_hint(run_dir, resume_point)}"
        )
