"""`train_gpt`: fine-tune the XTTS GPT on a user's dataset with coqui's GPTTrainer and Trainer.

The same function serves notebooks, the CLI (`python -m utils.cli train`) and the web UI (which runs
it in a child process). Order of work: cheap argument checks, base model files, dataset validation
(all before any model is built), then the model, the optimizations, coqui's training loop, and the
`ready/` export.
"""

from __future__ import annotations

import csv
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import psutil
import torch

from utils.base_models import TINY, BaseModel, check_version_name, ensure_base_model, models_root
from utils.dataset import DatasetReport, validate_dataset
from utils.export import READY_DIR, REFERENCE_WAV, export_ready, write_reference_wav
from utils.languages import canonical_language
from utils.runs import (
    DATASET_REPORT_FILE,
    DROPPED_ROWS_FILE,
    OPTIMIZATIONS_FILE,
    library_versions,
    now_iso,
    read_run,
    update_run,
    write_run,
)
from utils.text_frontend import TextFrontEnd
from utils.train_args import TrainArguments
from utils.training_optimizations import detect_gpu, format_memory_stats

ProgressCallback = Callable[[dict[str, Any]], None]


class TrainResult(NamedTuple):
    """What `train_gpt` returns; unpacks to six paths, in this order."""

    speaker_path: str  # ready/speakers_xtts.pth ("" when the base model has none)
    config_path: str  # ready/config.json
    checkpoint_path: str  # the fine-tuned checkpoint: best by eval loss (or the last, if stopped first)
    vocab_path: str  # ready/vocab.json
    run_dir: str
    reference_wav: str  # ready/reference.wav, a clean clip from the training data

    @property
    def ready_dir(self) -> str:
        return str(Path(self.run_dir) / READY_DIR)

    @property
    def status(self) -> str:
        """finished | stopped | interrupted (a stopped run can be continued with resume_from)."""
        return str(read_run(self.run_dir).get("status", "unknown"))


class _StopFlag:
    """Adapts the ways a caller can ask for a stop: an Event-like object or a callable."""

    def __init__(self, stop: Any) -> None:
        self.stop = stop

    def __call__(self) -> bool:
        if self.stop is None:
            return False
        if hasattr(self.stop, "is_set"):
            return bool(self.stop.is_set())
        return bool(self.stop())


def train_gpt(
    custom_model: str = "",
    version: str = "v2.0.2",
    language: str = "en",
    num_epochs: int = 10,
    batch_size: int = 8,
    grad_acumm: int = 2,
    train_csv: str = "",
    eval_csv: str = "",
    output_path: str = "./output",
    max_audio_length: int = 255995,
    enable_grad_checkpoint: bool = True,
    enable_sdpa: bool = True,
    enable_mixed_precision: bool = True,
    use_amharic_g2p: bool = False,
    *,
    progress_callback: ProgressCallback | None = None,
    stop_event: Any = None,
    **options: Any,
) -> TrainResult:
    """Fine-tune the XTTS GPT; returns the paths of the fine-tuned voice (see `TrainResult`).

    Keyword options (defaults and help in `utils.train_args.TrainArguments`): learning_rate,
    lr_milestones, grad_clip, weight_decay, save_step, save_n_checkpoints, precision, resume_from,
    num_workers, seed, run_name, models_dir, min_usable_rows, vocab_new_tokens, print_step.

    progress_callback receives each record written to metrics.jsonl (train steps, evals, status).
    stop_event (an Event, or a callable returning True) ends the run at the next step boundary
    with a checkpoint saved; so does Ctrl-C. Either way the function returns normally.
    Raises ValueError for bad arguments or an unusable dataset, before any model is built.
    """
    unknown = sorted(set(options) - set(TrainArguments.__dataclass_fields__))
    if unknown:
        raise ValueError(f"Unknown option(s) {', '.join(unknown)}. Known: see utils.train_args.TrainArguments.")
    args = TrainArguments(
        custom_model=custom_model or "", version=version, language=language, num_epochs=num_epochs,
        batch_size=batch_size, grad_acumm=grad_acumm, train_csv=str(train_csv or ""),
        eval_csv=str(eval_csv or ""), output_path=str(output_path), max_audio_length=max_audio_length,
        enable_grad_checkpoint=enable_grad_checkpoint, enable_sdpa=enable_sdpa,
        enable_mixed_precision=enable_mixed_precision, use_amharic_g2p=use_amharic_g2p, **options,
    )  # fmt: skip
    args.validate()
    return _Run(args, progress_callback, _StopFlag(stop_event)).execute()


def estimate_gpt_memory(*args: Any, **kwargs: Any) -> Any:
    """Predicted peak GPU memory of `train_gpt` called with the same arguments, and its breakdown, without
    loading weights: `peak_gib, breakdown = estimate_gpt_memory(version="v2.0.2", batch_size=8)`. Also takes
    batch_size="auto". See utils.memory_plan.planner.estimate_gpt_memory for the planner's own options."""
    from utils.memory_plan.planner import estimate_gpt_memory as estimate

    return estimate(*args, **kwargs)


class _Run:
    """One call of train_gpt, step by step."""

    def __init__(self, args: TrainArguments, progress: ProgressCallback | None, should_stop: _StopFlag) -> None:
        self.args = args
        self.progress = progress
        self.should_stop = should_stop
        self.language = canonical_language(args.language)
        self.frontend = TextFrontEnd(self.language, args.use_amharic_g2p)
        self.resume_dir = _resume_dir(args.resume_from) if args.resume_from else None

    # --- before any model is built --------------------------------------------------------------------
    def check_inputs(self) -> tuple[BaseModel, DatasetReport]:
        models_dir = self.args.models_dir or None
        options = validation_options(
            self.args.version, self.language, self.args.use_amharic_g2p, self.args.custom_model, models_dir
        )
        report = validate_dataset(
            self.args.train_csv,
            self.args.eval_csv or None,
            self.language,
            self.args.max_audio_length,
            seed=self.args.seed,
            **options,
        )
        _raise_if_unusable(report, self.args.min_usable_rows)
        # A real base model may need a download: that waits until the dataset is known to be usable.
        return ensure_base_model(self.args.version, models_dir), report

    def execute(self) -> TrainResult:
        base, report = self.check_inputs()
        from utils.model_setup import build_training_setup

        _restore_torch_threads()
        setup = build_training_setup(
            self.args, base, report, self.frontend, self.resume_dir, on_event=self.progress, should_stop=self.should_stop
        )
        run_dir = setup.trainer.output_path
        logger = setup.metrics
        self._write_run_files(run_dir, base, report, setup)
        # Taken now, while the dataset is as validated: the user's files may move during a long run.
        reference = write_reference_wav(setup.train_durations, run_dir / REFERENCE_WAV)
        update_run(run_dir, reference=reference)
        logger.status("resumed" if self.resume_dir else "started", step=setup.trainer.total_steps_done,
                      total_steps=setup.total_steps)  # fmt: skip
        print(f"\nRun folder: {run_dir}\n{setup.report.to_markdown()}\n{format_memory_stats()}\n", flush=True)
        try:
            setup.trainer.fit()
        except torch.OutOfMemoryError as exc:
            _record_failure(run_dir, setup, "out of GPU memory")
            raise torch.OutOfMemoryError(_out_of_memory_advice(self.args)) from exc
        except BaseException as exc:
            _record_failure(run_dir, setup, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            setup.release()
        trainer = setup.trainer
        best = run_dir / "best_model.pth"
        checkpoint = best if best.is_file() else Path(trainer.stop_checkpoint or _last_checkpoint(run_dir))
        if not checkpoint.is_file():
            update_run(run_dir, status=trainer.outcome, finished=now_iso(), steps_done=0)
            logger.status(trainer.outcome, step=0, message="Stopped before the first step: nothing saved.")
            raise RuntimeError(f"The run {trainer.outcome} before its first step; nothing was saved in {run_dir}.")
        try:
            return self._finish(run_dir, base, setup, checkpoint)
        except BaseException as exc:
            _record_failure(run_dir, setup, f"export failed: {type(exc).__name__}: {exc}")
            raise

    def _write_run_files(self, run_dir: Path, base: BaseModel, report: DatasetReport, setup: Any) -> None:
        previous = read_run(run_dir) if self.resume_dir else {}
        record = {
            "status": "running",
            "started": now_iso(),
            "arguments": self.args.to_dict(),
            "run_dir": str(run_dir),
            "base_model": {"version": base.version, "folder": str(base.folder)},
            "language": self.language,
            "text_frontend": self.frontend.to_dict(),
            "device": {**detect_gpu().to_dict(), "summary": detect_gpu().summary()},
            "versions": library_versions(),
            "command": sys.argv[:1],
            "pid": os.getpid(),
            "dataset": {k: v for k, v in report.to_dict().items() if k != "problems"},
            "steps_per_epoch": setup.steps_per_epoch,
            "optimizer_steps_per_epoch": math.ceil(setup.steps_per_epoch / self.args.grad_acumm),
            "total_steps": setup.total_steps,
            "effective_batch_size": self.args.batch_size * self.args.grad_acumm,
            "lr_milestones_optimizer_steps": setup.lr_milestones,
            "vocab": setup.vocab_info,
            "history": previous.get("history", []) + ([_history_entry(previous)] if previous else []),
        }
        write_run(run_dir, record)
        setup.report.save(run_dir / OPTIMIZATIONS_FILE)
        (run_dir / DATASET_REPORT_FILE).write_text(_json(report.to_dict()), encoding="utf-8")
        with open(run_dir / DROPPED_ROWS_FILE, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["csv_file", "line", "audio_file", "severity", "reason"])
            for problem in report.problems:
                writer.writerow([problem.csv_file, problem.line, problem.audio_file, problem.severity, problem.reason])

    def _finish(self, run_dir: Path, base: BaseModel, setup: Any, checkpoint: Path) -> TrainResult:
        """Export ready/ from `checkpoint` and record how the run ended."""
        trainer = setup.trainer
        ready = export_ready(
            run_dir,
            checkpoint,
            config=setup.inference_config,
            vocab_path=setup.vocab_path,
            speakers_path=base.speakers,
            reference_wav=run_dir / REFERENCE_WAV,
            finetune_info={
                "base_version": base.version,
                "language": self.language,
                "text_frontend": self.frontend.to_dict(),
                "run_dir": str(run_dir),
                "steps_done": trainer.total_steps_done,
            },
        )
        status = trainer.outcome
        update_run(
            run_dir,
            status=status,
            finished=now_iso(),
            steps_done=trainer.total_steps_done,
            checkpoint_path=str(checkpoint),
            stop_checkpoint=trainer.stop_checkpoint,
            ready_dir=str(ready),
        )
        message = {
            "finished": "Training finished.",
            "stopped": f"Stopped at step {trainer.total_steps_done}; checkpoint saved: {trainer.stop_checkpoint}",
            "interrupted": f"Interrupted at step {trainer.total_steps_done}; checkpoint saved: {trainer.stop_checkpoint}",
        }.get(status, status)
        setup.metrics.status(status, step=trainer.total_steps_done, checkpoint=str(checkpoint),
                             stop_checkpoint=trainer.stop_checkpoint, ready_dir=str(ready), message=message)  # fmt: skip
        print(f"\n{message}\nReady for inference: {ready}", flush=True)
        speakers = ready / "speakers_xtts.pth"
        return TrainResult(
            speaker_path=str(speakers) if speakers.is_file() else "",
            config_path=str(ready / "config.json"),
            checkpoint_path=str(checkpoint),
            vocab_path=str(ready / "vocab.json"),
            run_dir=str(run_dir),
            reference_wav=str(ready / REFERENCE_WAV),
        )


def _record_failure(run_dir: Path, setup: Any, error: str) -> None:
    """Mark the run failed in run.json and metrics.jsonl (the web UI reads both)."""
    steps = setup.trainer.total_steps_done
    update_run(run_dir, status="failed", finished=now_iso(), error=error, steps_done=steps)
    setup.metrics.status("failed", error=error, step=steps)


def _out_of_memory_advice(args: TrainArguments) -> str:
    """Turn a CUDA OOM into what to change, most effective first."""
    steps = []
    if not args.enable_grad_checkpoint:
        steps.append("turn on gradient checkpointing (enable_grad_checkpoint=True)")
    if not args.enable_mixed_precision:
        steps.append("turn on mixed precision (enable_mixed_precision=True)")
    if args.batch_size > 1:
        smaller = max(1, args.batch_size // 2)
        steps.append(f"use batch_size={smaller} with grad_acumm={args.grad_acumm * args.batch_size // smaller} "
                     "(same effective batch)")  # fmt: skip
    if args.max_audio_length > 220500:
        steps.append("lower max_audio_length (e.g. 220500 = 10 s): memory grows with the longest clip")
    steps.append("close other programs using the GPU (nvidia-smi lists them)")
    return "Out of GPU memory. Try, in this order: " + "; ".join(steps) + "."


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def _history_entry(previous: dict[str, Any]) -> dict[str, Any]:
    keys = ("started", "finished", "status", "steps_done", "arguments")
    return {k: previous.get(k) for k in keys}


def _raise_if_unusable(report: DatasetReport, min_rows: int) -> None:
    if report.ok and report.rows_usable >= min_rows:
        return
    errors = report.errors[:8]
    details = "\n".join(
        f"  {Path(p.csv_file).name or 'dataset'} line {p.line}: {p.audio_file + ': ' if p.audio_file else ''}{p.reason}"
        for p in errors
    )
    more = f"\n  ... and {len(report.errors) - len(errors)} more" if len(report.errors) > len(errors) else ""
    need = f"at least {min_rows} usable rows (one for training and one for evaluation at minimum)"
    raise ValueError(
        f"The dataset cannot be used for training: {report.rows_usable} of {report.rows_read} rows usable, "
        f"{report.train_count} for training and {report.eval_count} for evaluation; {need} are needed.\n"
        f"{details}{more}\nFix these rows (see validate_dataset for the full report) and try again."
    )


def validation_options(
    version: str, language: str, use_amharic_g2p: bool = False, custom_model: str = "", models_dir: str | None = None
) -> dict[str, Any]:
    """validate_dataset's keywords that check text exactly as a run with these settings will see it:
    through its front end, and against its vocab when that is on disk (a custom model's, else the
    base's; the tiny model is built here, in seconds). Raises ValueError for an unknown version."""
    check_version_name(version, models_dir)
    frontend = TextFrontEnd(canonical_language(language), use_amharic_g2p)
    custom_vocab = Path(custom_model).expanduser().parent / "vocab.json" if custom_model else None
    if custom_vocab is not None and custom_vocab.is_file():
        vocab: Path | None = custom_vocab
    elif version == TINY:
        vocab = ensure_base_model(TINY, models_dir).vocab
    else:
        vocab = models_root(models_dir) / version / "vocab.json"
    return {"text_frontend": frontend, "vocab_path": vocab if vocab is not None and vocab.is_file() else None}


def _resume_dir(resume_from: str) -> Path:
    path = Path(resume_from).expanduser()
    run_dir = path.parent if path.is_file() else path
    if not any(run_dir.glob("checkpoint_*.pth")) and not any(run_dir.glob("best_model*.pth")):
        raise ValueError(f"resume_from: {run_dir} holds no checkpoint (checkpoint_*.pth or best_model*.pth) to "
                         "continue from.")  # fmt: skip
    if not (run_dir / "config.json").is_file():
        raise ValueError(f"resume_from: {run_dir} has no config.json; it is not a training run folder.")
    return run_dir


def _last_checkpoint(run_dir: Path) -> str:
    from trainer.io import get_last_checkpoint

    try:
        return get_last_checkpoint(str(run_dir))[0]
    except ValueError:
        return str(run_dir / "no-checkpoint")


def _restore_torch_threads() -> None:
    # coqui's XTTS dataset module sets torch to one thread when imported; CPU training wants them all.
    torch.set_num_threads(max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1))
