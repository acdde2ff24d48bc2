"""`train_gpt`: fine-tune the XTTS GPT on a user's dataset with coqui's GPTTrainer and Trainer.

The same function serves notebooks, the CLI (`python -m utils.cli train`) and the web UI (which runs
it in a worker process, `python -m utils.training.process.worker RUN_DIR`). The work itself is
`utils.training.run.TrainingRun`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from utils.options.arguments import TrainArguments, argument_defaults
from utils.options.input_files import check_input_files
from utils.text.visible import with_visible_errors
from utils.training.ranks import distributed
from utils.training.recording.outcome import TrainResult

__all__ = ["TrainResult", "compare_runs", "estimate_gpt_memory", "fit_my_gpu", "sweep_gpt", "train_gpt"]

ProgressCallback = Callable[[dict[str, Any]], None]
# train_gpt's positional parameters are TrainArguments' first fields: names, order, types and defaults as declared
# there (tests/training/test_train_gpt_signature.py compares them).
DEFAULTS = argument_defaults()


@with_visible_errors
def train_gpt(
    custom_model: str = DEFAULTS["custom_model"],
    version: str = DEFAULTS["version"],
    language: str = DEFAULTS["language"],
    num_epochs: int = DEFAULTS["num_epochs"],
    batch_size: int | str = DEFAULTS["batch_size"],
    grad_acumm: int = DEFAULTS["grad_acumm"],
    train_csv: str | tuple[str, ...] = DEFAULTS["train_csv"],
    eval_csv: str | tuple[str, ...] = DEFAULTS["eval_csv"],
    output_path: str = DEFAULTS["output_path"],
    max_audio_length: int = DEFAULTS["max_audio_length"],
    enable_grad_checkpoint: bool = DEFAULTS["enable_grad_checkpoint"],
    enable_sdpa: bool = DEFAULTS["enable_sdpa"],
    enable_mixed_precision: bool = DEFAULTS["enable_mixed_precision"],
    use_amharic_g2p: bool = DEFAULTS["use_amharic_g2p"],
    *,
    progress_callback: ProgressCallback | None = None,
    stop_event: Any = None,
    audio_roots: Sequence[str] | None = None,
    **options: Any,
) -> TrainResult:
    """Fine-tune the XTTS GPT; returns the paths of the fine-tuned voice (see `TrainResult`).

    Keyword options (defaults, bounds and help in `utils.options.arguments.TrainArguments`): learning_rate,
    lr_milestones, grad_clip, weight_decay, save_step, save_n_checkpoints, precision, resume_from,
    num_workers, seed, run_name, models_dir, optimizer, enable_tf32, devices, quality_eval,
    best_by, early_stop_patience, whisper_model, ... (`python -m utils.cli train --help` lists them all).

    progress_callback receives each record written to metrics.jsonl (train steps, evals, status).
    stop_event (an Event, or a callable returning True) ends the run at the next step boundary
    with a checkpoint saved; so does Ctrl-C. Either way the function returns normally.
    audio_roots (the web app's confinement) refuses dataset rows whose audio lies outside these folders.
    Raises ValueError for bad arguments or an unusable dataset, before any model is built.
    """
    unknown = sorted(set(options) - set(TrainArguments.__dataclass_fields__))
    if unknown:
        raise ValueError(f"Unknown option(s) {', '.join(unknown)}. Known: see utils.options.arguments.TrainArguments.")
    call = locals()
    args = TrainArguments(**{name: call[name] for name in TrainArguments.positional_names()}, **options)
    check_input_files(args)  # the files it names, before any process or folder exists
    if args.devices and not distributed.in_process_group():
        from utils.training.process.launcher import launch

        return launch(args, progress_callback, stop_event, audio_roots=audio_roots)  # this function once per device
    # Imported here: the training stack (coqui, transformers) takes seconds to import, which a notebook's
    # estimate_gpt_memory or fit_my_gpu does not need.
    from utils.training.run import TrainingRun

    return TrainResult.of(TrainingRun(args, progress_callback, stop_event, audio_roots=audio_roots).execute())


@with_visible_errors
def estimate_gpt_memory(*args: Any, **kwargs: Any) -> Any:
    """Predicted peak GPU memory of `train_gpt` called with the same arguments, and its breakdown, without
    loading weights: `peak_gib, breakdown = estimate_gpt_memory(version="v2.0.2", batch_size=8)`. The peak is the
    largest of the run's phases (`.phase_peaks_gib`: training step, eval loss, scored evaluation, checkpoint save;
    `.peak_phase` names it). Also takes batch_size="auto". See utils.memory_plan.planner.estimate_gpt_memory for the
    planner's own options."""
    from utils.memory_plan.planner import estimate_gpt_memory as estimate

    return estimate(*args, **kwargs)


@with_visible_errors
def fit_my_gpu(*args: Any, card_gb: float | None = None, free_bytes: int | None = None, **kwargs: Any) -> Any:
    """The fastest configuration of train_gpt's arguments that fits the GPU (its free memory, `card_gb` =
    4, 6, 8, 12, 16, 24, 48 or 80, or `free_bytes`), keeping batch_size x grad_acumm (at most `train_rows=`, the
    dataset's training clips), and why:
    `fit = fit_my_gpu(card_gb=8, version="v2.0.2"); print(fit.to_markdown()); train_gpt(..., **fit.keywords)`.
    See utils.memory_plan.fit_gpu."""
    from utils.memory_plan.fit_gpu import fit_my_gpu as fit

    return fit(*args, card_gb=card_gb, free_bytes=free_bytes, **kwargs)


@with_visible_errors
def sweep_gpt(**kwargs: Any) -> Any:
    """A scored sweep of train_gpt's settings on Optuna: trials are ordinary runs, the base model scored once, a trial
    that falls behind pruned with its checkpoint, the study resumable and shareable:
    `result = sweep_gpt(train_csv=..., version="v2.0.2", trials=8, space={"learning_rate": (1e-6, 1e-4)});
    print(result.to_markdown())`. See utils.sweep.sweep.sweep_gpt for every option."""
    from utils.sweep.sweep import sweep_gpt as sweep

    return sweep(**kwargs)


@with_visible_errors
def compare_runs(output_dir: str = "./output", sort_by: str = "combined") -> Any:
    """Every run of an output folder side by side (a pandas DataFrame): settings, best scores, verdict against the
    base model, time, memory, sweep trial and blind-listening tally, best first. See utils.sweep.runs."""
    from utils.sweep.runs import compare_runs as compare

    return compare(output_dir, sort_by)
