"""How a run ends, after its last step: `ready/` exported from the run's chosen checkpoint (a LoRA run's adapter beside
it), the verdict against the starting weights, reference clips and sampling settings measured on the exported voice,
and the ending recorded in run.json and metrics.jsonl. A base class of `TrainingRun` (utils.training.run), whose state
it reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from utils.model.base_models import BaseModel
from utils.model.named_voices import write_named_voices
from utils.model.ready import REFERENCE_WAV, export_ready
from utils.model.references import voice_references
from utils.options.arguments import TrainArguments
from utils.text.frontend import TextFrontEnd
from utils.training.checkpointing.checkpoints import newest_checkpoint
from utils.training.checkpointing.finish_export import EXPORT_ONLY_MESSAGE
from utils.training.evaluation.best_checkpoint import CheckpointChoice
from utils.training.evaluation.inference_search import choose_inference_settings
from utils.training.evaluation.reference_choice import reference_at_run_end
from utils.training.evaluation.verdict import run_verdict
from utils.training.loop.lora import LoraSettings, export_adapter
from utils.training.loop.setup import TrainingSetup
from utils.training.recording.checkpoint_files import BEST_MODEL_FILE, checkpoint_step
from utils.training.recording.outcome import RunOutput
from utils.training.recording.phase_times import EXPORT, INFERENCE_SEARCH, REFERENCE_CHOICE, PhaseTimes
from utils.training.recording.run_record import RunStatus, now_iso, update_run


class RunEnding:
    """The end of a `TrainingRun`: the state it reads is the run's, set before training; `_set_status` and
    `_clip_failures` are the run's own."""

    args: TrainArguments
    run_dir: Path | None
    setup: TrainingSetup | None
    choice: CheckpointChoice | None
    phase_times: PhaseTimes
    language: str
    frontend: TextFrontEnd
    export_only: bool
    voices: dict[str, Any]
    _set_status: Callable[..., None]
    _clip_failures: Callable[[], dict[str, Any]]

    def _finish(self, base: BaseModel) -> RunOutput:
        """Export ready/ from the run's checkpoint and record how the run ended."""
        assert self.run_dir is not None and self.setup is not None
        trainer = self.setup.trainer
        status = trainer.outcome or RunStatus.FAILED
        best = self.run_dir / BEST_MODEL_FILE
        checkpoint = best if best.is_file() else newest_checkpoint(self.run_dir)
        if checkpoint is None:
            why = f" ({trainer.stop_reason})" if trainer.stop_reason else ""  # the run's own reason: out of memory
            self._set_status(
                status, finished=now_iso(), steps_done=0, message=f"Stopped before the first step{why}: nothing saved."
            )
            raise RuntimeError(
                f"The run {status.value} before its first step{why}; nothing was saved in {self.run_dir}."
            )
        exporting = self.phase_times.clock()
        chosen = self._chosen(checkpoint)
        verdict = run_verdict(self.run_dir, chosen.get("checkpoint_step"))
        ready = export_ready(
            self.run_dir,
            checkpoint,
            config=self.setup.inference_config,
            vocab_path=self.setup.vocab_path,
            speakers_path=base.speakers,
            reference_wav=self.run_dir / REFERENCE_WAV,
            base_weights=trainer.config.model_args.xtts_checkpoint,
            finetune_info={
                "base_version": base.version,
                "language": self.language,
                "text_frontend": self.frontend.to_dict(),
                "run_dir": str(self.run_dir),
                "steps_done": trainer.total_steps_done,
                **chosen,
                **({"verdict": verdict} if verdict else {}),
            },
        )
        adapter = self._export_adapter(base, checkpoint)
        if self.voices:
            self._write_named_voices(ready)
        self.phase_times.add(EXPORT, self.phase_times.clock() - exporting)
        self._choose_reference(ready, status)
        inference = self._choose_inference(ready, status)
        update_run(self.run_dir, inference=inference, **({"verdict": verdict} if verdict else {}))
        self.phase_times.end()
        failures = self._clip_failures()
        message = self._end_message(status, failures["clips_failed"], verdict)
        self._set_status(
            status,
            finished=now_iso(),
            steps_done=trainer.total_steps_done,
            checkpoint_path=str(checkpoint),
            stop_checkpoint=trainer.stop_checkpoint,
            **({"stop_reason": trainer.stop_reason} if trainer.stop_reason else {}),
            ready_dir=str(ready),
            **({"adapter_dir": str(adapter)} if adapter else {}),
            message=message,
            timings=self.phase_times.as_dict(),
            **failures,
        )
        print(f"\n{message}\nReady for inference: {ready}", flush=True)
        return RunOutput(self.run_dir, ready, checkpoint)

    def _write_named_voices(self, ready: Path) -> None:
        """The named voices in ready/ (utils.model.named_voices); a failure (coqui cannot read a clip) leaves the voice
        of ready/ as it is and says why in run.json, without failing a run that trained."""
        try:
            write_named_voices(ready, self.voices, self.run_dir)
        except Exception as exc:  # noqa: BLE001 - the run's weights and ready/ are there; only the names are missing
            update_run(self.run_dir, named_voices_error=f"{type(exc).__name__}: {exc}"[:500])

    def _end_message(self, status: RunStatus, clips_failed: int, verdict: dict[str, Any] | None) -> str:
        """What the page and the terminal say at the end: how the run ended (its own reason when it stopped itself:
        early stopping, out of memory at one clip), the clips skipped, and the verdict against the baseline."""
        assert self.setup is not None
        trainer = self.setup.trainer
        skipped = (
            f" {clips_failed} clip(s) could not be loaded and were skipped (listed in run.json)."
            if clips_failed
            else ""
        )
        message = {
            RunStatus.FINISHED: EXPORT_ONLY_MESSAGE if self.export_only else "Training finished.",
            RunStatus.STOPPED: f"Stopped at step {trainer.total_steps_done}; checkpoint saved: "
            f"{trainer.stop_checkpoint}",
            RunStatus.INTERRUPTED: f"Interrupted at step {trainer.total_steps_done}; checkpoint saved: "
            f"{trainer.stop_checkpoint}",
        }.get(status, status.value) + skipped
        if self.choice is not None and self.choice.stop_message:
            message = self.choice.stop_message + f" Checkpoint saved: {trainer.stop_checkpoint}" + skipped
        if trainer.stop_reason:
            message = trainer.stop_reason + f" Checkpoint saved: {trainer.stop_checkpoint}" + skipped
        return message + (f" {verdict['text']}" if verdict else "")

    def _choose_reference(self, ready: Path, status: RunStatus) -> None:
        """The voice's reference clips chosen by measurement on ready/ (utils.training.evaluation.reference_choice),
        or why not, in ready/finetune.json; the sampling search that follows speaks with them."""
        choosing = self.phase_times.clock()
        interrupted = status is RunStatus.INTERRUPTED
        reference_at_run_end(ready, self.choice, self.args.reference_search, self.args.seed, interrupted)
        if self.choice is not None and self.choice.evaluator is not None:
            self.choice.evaluator.reference_wav = voice_references(ready)
        self.phase_times.add(REFERENCE_CHOICE, self.phase_times.clock() - choosing)

    def _choose_inference(self, ready: Path, status: RunStatus) -> dict[str, Any]:
        """Sampling settings measured on the ready/ voice, written into it
        (utils.training.evaluation.inference_search), but not after a Ctrl-C (the user wants the prompt back); what
        run.json keeps of them: the settings and their source."""
        searching = self.phase_times.clock()
        choice = self.choice
        record = choose_inference_settings(
            ready,
            choice.evaluator if choice else None,
            choice.budget if choice else None,
            0 if status is RunStatus.INTERRUPTED else self.args.inference_search,
            self.args.seed,
        )
        self.phase_times.add(INFERENCE_SEARCH, self.phase_times.clock() - searching)
        return {k: record.get(k) for k in ("settings", "source", "reason")}

    def _export_adapter(self, base: BaseModel, checkpoint: Path) -> Path | None:
        """A LoRA run's adapter alone in run_dir/adapter/ (from the checkpoint ready/ holds merged)."""
        settings = LoraSettings.from_args(self.args)
        if settings is None:
            return None
        assert self.run_dir is not None and self.setup is not None
        info = {
            "rank": settings.rank,
            "alpha": settings.alpha,
            "targets": list(settings.targets),
            "base_version": base.version,
            "language": self.language,
            "new_language": bool(self.setup.vocab_info.get("extended")),
            **self._chosen(checkpoint),
        }
        return export_adapter(self.run_dir, checkpoint, info)

    def _chosen(self, checkpoint: Path) -> dict[str, Any]:
        """What ready/finetune.json says about the checkpoint it holds: its step and, for the best model, why."""
        best = self.choice.best if self.choice is not None else None
        if checkpoint.name == BEST_MODEL_FILE and best:
            return {"checkpoint_step": best["step"], "best": best}
        return {"checkpoint_step": checkpoint_step(checkpoint)}
