"""What a run records while it runs: run.json (the truth: its status, arguments, files and every ending, failures
included) and the status records of metrics.jsonl the caller follows. A base class of `TrainingRun`
(utils.training.run), whose state it reads; the end of the run is `RunEnding` (utils.training.ending)."""

from __future__ import annotations

import contextlib
import csv
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from utils.data.validation import DatasetReport
from utils.device.gpu import detect_gpu
from utils.files import append_jsonl, atomic_output, is_disk_full, rewrite_jsonl, write_json_atomic
from utils.model.base_models import BaseModel
from utils.model.ready import REFERENCE_WAV, write_reference_wav
from utils.options.arguments import TrainArguments
from utils.training.checkpointing.checkpoints import DiskFull, newest_checkpoint
from utils.training.evaluation.evaluation_plan import own_language_rows
from utils.training.evaluation.voices import write_voice_references
from utils.training.loop.oom import out_of_memory_advice, planner_suggestion
from utils.training.loop.setup import TrainingSetup
from utils.training.ranks import distributed
from utils.training.recording.metrics import MetricsLogger
from utils.training.recording.records import RunRecord, StatusRecord
from utils.training.recording.run_record import (
    DATASET_REPORT_FILE,
    DROPPED_ROWS_FILE,
    METRICS_FILE,
    OPTIMIZATIONS_FILE,
    RunStatus,
    changed_arguments,
    history_entry,
    library_versions,
    load_run,
    now_iso,
    process_identity,
    update_run,
    write_run,
)
from utils.training.recording.spec import RunSpec

SUPERSEDED_METRICS_FILE = "metrics.superseded.jsonl"  # records of steps a resume trains again


class RunRecords:
    """The records of a `TrainingRun`: the state they read is the run's."""

    args: TrainArguments
    run_dir: Path | None
    resume_dir: Path | None
    metrics: MetricsLogger | None
    setup: TrainingSetup | None
    language: str
    frontend: Any
    ranks: list[dict[str, Any]]
    dataset_fingerprint: str
    micro_batch: int | None
    clip_failures: list[str]
    audio_roots: Any
    batch_choice: str
    devices: tuple[str, ...]
    spec: RunSpec | None
    speakers: list[Any]
    voices: dict[str, Any]

    def _supersede_metrics(self, steps_done: int | None) -> None:
        """The steps, evaluations and scores logged after the checkpoint a resume continues from (a kill -9 or a
        resume from an older checkpoint) are trained again: they move to metrics.superseded.jsonl, so each step
        is in metrics.jsonl once. Status records stay: they are the run's history."""
        assert self.run_dir is not None
        if steps_done is None:
            return
        later = rewrite_jsonl(
            self.run_dir / METRICS_FILE,
            lambda r: r.get("type") != StatusRecord.TYPE and isinstance(r.get("step"), int) and r["step"] > steps_done,
        )
        for record in later:
            append_jsonl(self.run_dir / SUPERSEDED_METRICS_FILE, {**record, "superseded_at": now_iso()})

    def _set_status(self, status: RunStatus, **fields: Any) -> None:
        """run.json first (the truth), then the status record in metrics.jsonl, which the caller is sent. `fields`
        are StatusRecord's, with the same names and meaning in RunRecord."""
        assert self.run_dir is not None and self.metrics is not None
        update_run(self.run_dir, status=status, **fields)
        self.metrics.status(status.value, run_dir=str(self.run_dir), **fields)

    def _checkpoint_saved(self, kind: str, path: Path, steps_done: int) -> None:
        assert self.run_dir is not None
        if kind == "best":
            update_run(self.run_dir, best_checkpoint=str(path), best_checkpoint_step=steps_done)
        else:
            update_run(self.run_dir, last_checkpoint=str(path), last_checkpoint_step=steps_done)

    def _write_record(self, base: BaseModel, report: DatasetReport) -> None:
        assert self.run_dir is not None
        previous = load_run(self.run_dir) if self.resume_dir else RunRecord()
        resumed = bool(previous.to_json())
        gpu = detect_gpu()
        write_run(
            self.run_dir,
            RunRecord(
                status=RunStatus.STARTING.value,
                started=now_iso(),
                arguments=self.args.to_dict(),
                run_dir=str(self.run_dir),
                base_model={"version": base.version, "folder": str(base.folder)},
                language=self.language,
                text_frontend=self.frontend.to_dict(),
                device={**gpu.to_dict(), "summary": gpu.summary(), "torch_threads": torch.get_num_threads()},
                versions=library_versions(),
                command=sys.argv[:1],
                **(distributed.launcher_identity() or process_identity()),  # the process that called train_gpt
                **distributed.run_fields(self.ranks),
                dataset={
                    **{k: v for k, v in report.to_dict().items() if k != "problems"},
                    "fingerprint": self.dataset_fingerprint,
                },
                # What a resume continues from: its checkpoints, its best and early stopping's count.
                last_checkpoint=previous.last_checkpoint,
                last_checkpoint_step=previous.last_checkpoint_step,
                best_checkpoint=previous.best_checkpoint,
                best_checkpoint_step=previous.best_checkpoint_step,
                best=previous.best,
                early_stop=previous.early_stop.count_only() if previous.early_stop else None,
                micro_batch_size=self.micro_batch,
                out_of_memory=previous.out_of_memory,
                history=(previous.history or []) + ([history_entry(previous)] if resumed else []),
                changed_on_resume=changed_arguments(previous.arguments or {}, self.args.to_dict()),
            ),
        )
        self._set_status(RunStatus.STARTING)

    def _write_run_files(self, report: DatasetReport) -> None:
        assert self.run_dir is not None and self.setup is not None
        setup = self.setup
        update_run(
            self.run_dir,
            steps_per_epoch=setup.steps_per_epoch,
            optimizer_steps_per_epoch=math.ceil(setup.steps_per_epoch / self.args.grad_acumm),
            total_steps=setup.total_steps,
            effective_batch_size=self.args.batch_size * self.args.grad_acumm * len(self.ranks),
            lr_milestones_optimizer_steps=setup.lr_milestones,
            vocab=setup.vocab_info,
        )
        setup.report.save(self.run_dir / OPTIMIZATIONS_FILE)
        write_json_atomic(self.run_dir / DATASET_REPORT_FILE, report.to_dict())
        with atomic_output(self.run_dir / DROPPED_ROWS_FILE, "w", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["csv_file", "line", "audio_file", "severity", "reason"])
            for problem in report.problems:
                writer.writerow([problem.csv_file, problem.line, problem.audio_file, problem.severity, problem.reason])

    @contextlib.contextmanager
    def _recording_failures(self) -> Iterator[None]:
        """Any error from here on ends the run as failed, with the reason, in run.json and metrics.jsonl."""
        try:
            yield
        except torch.OutOfMemoryError as exc:
            advice = out_of_memory_advice(self.args) + planner_suggestion(self.args)
            self._fail(f"out of GPU memory. {advice}")
            raise torch.OutOfMemoryError(advice) from exc
        except BaseException as exc:
            message = self._failure_message(exc)
            if load_run(self.run_dir).status != RunStatus.FAILED.value:
                self._fail(message)
            if is_disk_full(exc) and not isinstance(exc, DiskFull):
                raise DiskFull(message) from exc  # the caller gets the product's words too, as one type
            raise

    def _failure_message(self, exc: BaseException) -> str:
        """The product's own words for what a user can fix; the exception as it is otherwise."""
        if isinstance(exc, DiskFull):
            return str(exc)
        if is_disk_full(exc):
            newest = newest_checkpoint(self.run_dir) if self.run_dir else None
            kept = f"the last good checkpoint is kept: {newest}" if newest else "no checkpoint was saved"
            return f"The disk is full: writing into {self.run_dir} failed. Free some space and resume the run; {kept}."
        return f"{type(exc).__name__}: {exc}"

    def _fail(self, error: str) -> None:
        trainer = self.setup.trainer if self.setup is not None else None
        extra = {} if trainer is None else {"stop_checkpoint": trainer.stop_checkpoint, **self._clip_failures()}
        self._set_status(
            RunStatus.FAILED,
            finished=now_iso(),
            error=error,
            steps_done=trainer.total_steps_done if trainer else 0,
            **extra,
        )

    def _clip_failures(self) -> dict[str, Any]:
        """How many clips could not be loaded during training, and the first few, for run.json and the page."""
        return {"clips_failed": len(self.clip_failures), "clip_failures": self.clip_failures[:20]}

    def _write_references(self, report: DatasetReport) -> None:
        """The voice's reference clip (ready/ and every scored evaluation clone it); several speakers: each one with
        enough data a named voice with its own clip (run.json `voices`), the first one ready/'s own voice. Taken now,
        while the dataset is as validated: the user's files may move during a long run."""
        assert self.run_dir is not None
        voices = self.speakers
        self.voices = write_voice_references(voices, self.run_dir) if voices else {}
        if voices:
            reference_rows = voices[0].train
        elif report.file_languages:  # several datasets of one voice: its clips in the run's language
            reference_rows = [(row.audio_location, seconds) for row, seconds in own_language_rows(report, "train")]
        else:
            reference_rows = [(row.audio_location, seconds) for row, seconds in report.iter_usable("train")]
        update_run(
            self.run_dir,
            reference=write_reference_wav(reference_rows, self.run_dir / REFERENCE_WAV),
            **({"voices": self.voices} if self.voices else {}),
        )

    def _write_spec(self, probe_batch: bool) -> None:
        """spec.json: the resolved arguments this run trains with (a worker's caller wrote them as given)."""
        assert self.run_dir is not None
        self.spec = RunSpec.create(
            self.args,
            self.run_dir,
            self.audio_roots,
            resolved=True,
            batch_size_auto=self.batch_choice,
            probe_batch=probe_batch,
            devices=self.devices,
            micro_batch_size=self.micro_batch or 0,
        )
        self.spec.write()
