"""One call of `train_gpt`, step by step: check everything, create the run folder, train, export `ready/`.

Order of work: cheap argument checks (in TrainArguments, then the files it names), dataset validation
and the base model (all before any folder or model exists), then the run folder and its record, the model and coqui's
training loop, and the `ready/` export. From the moment the folder exists, every ending is recorded
in run.json and metrics.jsonl: finished, stopped, interrupted or failed with the reason.
The end, after the last step (ready/, the verdict, sampling settings, the ending's record), is
`RunEnding` (utils.training.ending), this class's base.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from utils.data.check_cache import cache_folder, remove_from_new_output
from utils.data.mix_check import validate_datasets
from utils.data.text_checks import text_check_options
from utils.data.validation import DatasetReport
from utils.device.memory import format_memory_stats
from utils.model.base_models import BaseModel, ensure_base_model, run_vocab_file
from utils.model.ready import REFERENCE_WAV
from utils.options.arguments import TrainArguments
from utils.options.input_files import check_input_files
from utils.text.frontend import TextFrontEnd
from utils.text.languages import canonical_language
from utils.text.visible import visible
from utils.training.checkpointing.finish_export import export_pending
from utils.training.checkpointing.resume_checks import check_resume, checkpoint_steps
from utils.training.controls import StopFlag, torch_settings_restored
from utils.training.ending import RunEnding
from utils.training.evaluation.best_checkpoint import CheckpointChoice, checkpoint_choice
from utils.training.evaluation.voices import dataset_voices
from utils.training.inputs import batching
from utils.training.inputs.input_checks import (
    check_checkpoint_file,
    check_clip_length,
    check_output_path,
    raise_if_unusable,
    resume_point,
)
from utils.training.loop.auto_batch import plan_generation_batch, probe_batch_size, resolve_batch
from utils.training.loop.oom import OutOfMemoryLog, resumed_micro_batch
from utils.training.loop.setup import TrainingSetup, build_training_setup, trainer_parts
from utils.training.rank_run import train_beside_rank_zero
from utils.training.ranks import distributed
from utils.training.ranks.data_parallel import DataParallelRanks
from utils.training.recording.metrics import MetricsLogger
from utils.training.recording.outcome import RunOutput
from utils.training.recording.phase_times import PhaseTimes
from utils.training.recording.run_record import (
    METRICS_FILE,
    RunStatus,
    create_run_dir,
    read_run,
    update_run,
)
from utils.training.recording.spec import RunSpec
from utils.training.recording.tensorboard_log import TensorBoardMirror
from utils.training.run_records import RunRecords

ProgressCallback = Callable[[dict[str, Any]], None]


class TrainingRun(RunRecords, RunEnding):
    """One fine-tuning run: `execute()` trains and returns where the voice is."""

    def __init__(
        self,
        args: TrainArguments,
        progress: ProgressCallback | None = None,
        should_stop: Any = None,
        audio_roots: Any = None,
        run_dir: str | Path | None = None,
        devices: tuple[str, ...] = (),
    ) -> None:
        check_input_files(args)  # TrainArguments reads no file: the files it names are checked where a run starts
        self.phase_times = PhaseTimes()  # where the wall time goes, from the call on (run.json `timings`)
        self.args = args
        self.audio_roots = audio_roots
        # The folder a worker was started on (its spec.json written by the caller); None: this run creates one.
        self.given_run_dir = Path(run_dir).resolve() if run_dir is not None else None
        self.devices = devices  # a several-device run's spec: each local rank's device, kept in spec.json
        self.progress = progress
        self.should_stop = StopFlag(should_stop)
        self.language = canonical_language(args.language)
        self.frontend = TextFrontEnd.for_run(self.language, args.use_amharic_g2p, args.lexicon_file)
        # Rank 0 alone checks: the other ranks start once rank 0 has already marked the run as starting.
        self.resume_point = (
            resume_point(args.resume_from, refuse_active=distributed.is_main_process()) if args.resume_from else None
        )
        self.resume_dir = (
            None
            if self.resume_point is None
            else (self.resume_point.parent if self.resume_point.is_file() else self.resume_point)
        )
        given, resumed = self.given_run_dir, self.resume_dir
        if given is not None and resumed is not None and given != resumed.resolve():
            raise ValueError(f"resume_from {resumed} is not the worker's run folder {given}.")
        self.run_dir: Path | None = None
        self.spec: RunSpec | None = None  # the resolved spec, written as spec.json once the folder exists
        self.metrics: MetricsLogger | None = None
        self.setup: TrainingSetup | None = None
        self.clip_failures: list[str] = []
        self.batch_choice = ""
        self.generation_batch = 0  # rows a scored evaluation generates together (0: all), planned on a GPU
        self.choice: CheckpointChoice | None = None  # best checkpoint by the run's rule; early stopping
        self.ranks: list[dict[str, Any]] = []  # the processes of the run: this one, or one per device
        self.dataset_fingerprint = ""  # the dataset by content (DatasetReport.fingerprint), for a later resume
        self.micro_batch: int | None = None  # a resume's clips per forward/backward (out-of-memory errors halved)
        self.export_only = False  # a resume of a run that trained every step and only lacks ready/
        self.speakers: list[Any] = []  # several speakers: the voices of the dataset (utils.training.evaluation.voices)
        self.voices: dict[str, Any] = {}  # and what run.json `voices` records of them
        self.voice_notes: list[str] = []

    # --- before any folder or model exists ------------------------------------------------------------
    def check_inputs(self) -> tuple[BaseModel, DatasetReport]:
        output = Path(self.args.output_path).expanduser()
        created = not output.exists()
        try:
            return self._check_inputs()
        except BaseException:
            if created:  # the check's cache made it
                remove_from_new_output(output)
            raise

    def _check_inputs(self) -> tuple[BaseModel, DatasetReport]:
        if self.args.custom_model:
            check_checkpoint_file(Path(self.args.custom_model).expanduser(), "custom_model")
        models_dir = self.args.models_dir or None
        vocab = run_vocab_file(self.args.version, self.args.custom_model, models_dir)
        report = validate_datasets(
            self.args.train_csv,
            self.args.eval_csv,
            self.language,
            self.args.max_audio_length,
            options_for=lambda language: text_check_options(
                language,
                self.args.use_amharic_g2p and language == self.language,  # G2P in its own language only
                vocab=vocab,
                lexicon_file=self.args.lexicon_file,
            ),
            seed=self.args.seed,
            audio_roots=self.audio_roots,
            # Checked once: an unchanged dataset (a resume, a second run, the page's Check) is not decoded again.
            # Rank 0 alone writes the cache: another rank's write could follow rank 0's removal after a refusal.
            cache_dir=cache_folder(self.args.output_path) if distributed.is_main_process() else None,
            should_stop=self.should_stop,
        )
        raise_if_unusable(report, self.args.min_usable_rows)
        # A real base model may need a download: that waits until the dataset is known to be usable.
        base = ensure_base_model(self.args.version, models_dir)
        check_clip_length(self.args.max_audio_length, base)
        check_output_path(Path(self.args.output_path).expanduser())
        return base, report

    def execute(self) -> RunOutput:
        base, report = self.check_inputs()
        self.ranks = distributed.describe_ranks()  # a collective: every rank of a multi-process run takes part
        if not distributed.is_main_process():
            return train_beside_rank_zero(
                self.args, self.frontend, self.should_stop, self.resume_point, base, report, self.ranks
            )
        # Several speakers: checked before any folder exists (two names that would share a file are refused).
        self.speakers, self.voice_notes = dataset_voices(report)
        report.notes += [visible(note) for note in self.voice_notes]  # the run's dataset report says who has no voice
        probe_batch, total_steps = self._plan_sizes(report)
        self.dataset_fingerprint = report.fingerprint()
        self.micro_batch = resumed_micro_batch(self.resume_dir, self.args.batch_size)
        self._check_resume(base, total_steps)
        self._open_run_folder(base, report, probe_batch)
        with torch_settings_restored(), self._recording_failures():
            self._prepare_training(base, report, probe_batch)
            try:
                distributed.share_run_dir(self.run_dir)  # the other ranks (if any) build their trainers now
                if self.export_only:
                    self.setup.trainer.finish_without_training()
                else:
                    self.setup.trainer.fit()
            finally:
                self.clip_failures = list(self.setup.trainer.model.clip_failures)  # the model is released next
                self.setup.release()
            return self._finish(base)

    def _plan_sizes(self, report: DatasetReport) -> tuple[bool, int]:
        """Before any model is built: batch_size="auto" becomes a number (the spec is final), and the scored
        evaluation's generation batch is planned (a plan that is traced patches torch meanwhile). Returns whether
        the batch size is still to be confirmed by a probe step, and the run's total steps."""
        durations = None
        if self.args.batch_size == "auto" and self.resume_dir is None:
            durations = [seconds for _, seconds in report.iter_usable("train")]  # the longest batch is planned
        self.args, self.batch_choice, probe_batch = resolve_batch(
            self.args, report.epoch_rows, self.resume_dir, durations
        )
        self.generation_batch, generation_choice = plan_generation_batch(
            self.args, durations or [seconds for _, seconds in report.iter_usable("train")]
        )
        if generation_choice:
            print(generation_choice, flush=True)
        return probe_batch, self.args.num_epochs * batching.rank_steps_per_epoch(
            report.epoch_rows, self.args.batch_size
        )

    def _check_resume(self, base: BaseModel, total_steps: int) -> None:
        """Before anything is written: a refused resume leaves the run's record as it was."""
        if self.resume_dir is None or self.resume_point is None:
            return
        check_resume(
            self.resume_dir,
            self.resume_point,
            read_run(self.resume_dir),
            self.args,
            language=self.language,
            base_version=base.version,
            frontend=self.frontend.to_dict(),
            fingerprint=self.dataset_fingerprint,
            total_steps=total_steps,
        )
        # Trained in full, ready/ missing (the disk filled during the export): export without training.
        self.export_only = export_pending(self.resume_dir, checkpoint_steps(self.resume_point), total_steps)

    def _open_run_folder(self, base: BaseModel, report: DatasetReport, probe_batch: bool) -> None:
        """The run's folder (new, given or resumed), its spec, its metrics log (a resume's later lines set aside)
        and run.json."""
        self.run_dir = (
            self.resume_dir
            or self.given_run_dir
            or create_run_dir(self.args.output_path, self.args.run_name or f"{self.language}-{base.version}")
        )
        self._write_spec(probe_batch)
        if self.resume_point is not None:
            self._supersede_metrics(checkpoint_steps(self.resume_point))
        self.metrics = self._metrics_logger(
            report.epoch_rows, TensorBoardMirror(self.run_dir, resumed=self.resume_dir is not None)
        )
        self._write_record(base, report)

    def _prepare_training(self, base: BaseModel, report: DatasetReport, probe_batch: bool) -> None:
        """What the trainer works with (the reference clip, the checkpoint choice), then the model and trainer built
        with it, the batch size confirmed; the run says it is running."""
        self._write_references(report)
        self.choice = checkpoint_choice(
            self.args,
            report,
            self.frontend,
            self.run_dir,
            self.metrics,
            self.run_dir / REFERENCE_WAV,
            generation_batch=self.generation_batch,
            voices=self.speakers,
            voice_notes=self.voice_notes,
            timings=self.phase_times,
        )
        self.setup = self._build_setup(base, report)
        if probe_batch:
            self._confirm_batch_size(base, report)
        self._write_run_files(report)
        self._set_status(
            RunStatus.RUNNING, step=self.setup.trainer.total_steps_done, total_steps=self.metrics.total_steps
        )
        print(
            f"\nRun folder: {self.run_dir}\n{self.setup.report.to_markdown()}\n{format_memory_stats()}\n",
            flush=True,
        )

    def _metrics_logger(self, train_rows: int, tensorboard: TensorBoardMirror | None) -> MetricsLogger:
        assert self.run_dir is not None
        steps_per_epoch = batching.rank_steps_per_epoch(train_rows, self.args.batch_size)
        return MetricsLogger(
            self.run_dir / METRICS_FILE,
            batch_size=self.args.batch_size * len(self.ranks),
            steps_per_epoch=steps_per_epoch,
            total_steps=self.args.num_epochs * steps_per_epoch,
            on_event=self.progress,
            tensorboard=tensorboard,
        )

    def _build_setup(self, base: BaseModel, report: DatasetReport) -> TrainingSetup:
        """The model and trainer, built with their collaborators: the caller's stop, the checkpoint choice, the phase
        timer, the out-of-memory records (a resume's micro-batch) and, with several devices, the ranks."""
        assert self.run_dir is not None and self.metrics is not None
        parts = trainer_parts(
            self.args,
            self.run_dir,
            self.metrics,
            should_stop=self.should_stop,
            on_checkpoint=self._checkpoint_saved,
            scoring=self.choice,
            timings=self.phase_times,
            out_of_memory=OutOfMemoryLog(self.run_dir, self.metrics, self.args, self.micro_batch),
            ranks=DataParallelRanks(self.ranks) if distributed.is_distributed() else None,
        )
        return build_training_setup(
            self.args, base, report, self.frontend, self.run_dir, parts, resume=self.resume_point
        )

    def _confirm_batch_size(self, base: BaseModel, report: DatasetReport) -> None:
        """batch_size="auto" on a GPU: one real step at the longest lengths confirms the planned batch. When it does
        not fit, the trainer is built again for the batch that did (nothing is patched into a built trainer)."""
        assert self.setup is not None and self.metrics is not None and self.spec is not None
        batch = probe_batch_size(self.setup.trainer, self.args.batch_size)
        if batch != self.args.batch_size:
            self.batch_choice += f"; the probe step fit {batch}"
            self.setup.release()
            self.args = self.args.replace(batch_size=batch)
            self.metrics = self._metrics_logger(report.epoch_rows, self.metrics.tensorboard)
            self.setup = self._build_setup(base, report)
            self.spec = self.spec.with_changes(arguments=self.args.to_dict(), batch_size_auto=self.batch_choice)
            self.spec.write()
        print(self.batch_choice, flush=True)
        update_run(self.run_dir, arguments=self.args.to_dict(), batch_size_auto=self.batch_choice)
