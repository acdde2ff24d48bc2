"""Which checkpoint is best, by the rule the user picked, and when to stop early.

`CheckpointChoice` is called by `FineTuneTrainer.save_best_model` at the end of every epoch, after coqui's
eval pass. It measures the voice when the run asks for it (`QualityEvaluator`), appends a "quality"
record to metrics.jsonl, saves `best_model.pth` when this evaluation beats the best so far under the
rule (`utils.quality.selection.BestRule`: lowest eval loss, lowest CER, highest similarity or highest
combined score), records in run.json `best: {rule, step, value, by, why, ...}`, and ends the run through
the Stop button's own path (`StopTraining`) once the rule's value has not improved for
`early_stop_patience` evaluations, with the count and then the reason in run.json `early_stop` (the records are
declared in utils.training.recording.records: BestChoice, EarlyStopState, QualitySetup, QualityRecord).

Scoring off the training loop: under best_by eval_loss the choice does not depend on the scores, so only the
generation (which needs the weights of this step) runs in the loop; decoding and scoring run on a background
thread (one at a time), and their "quality" record is appended at the first step boundary after they are
done, or by `wait` at the run's end (the trainer calls it before the final export): none is lost. Under a
quality rule the scores decide the best checkpoint, so they are computed in the loop.

Degrading gracefully: an evaluation without the rule's value (no Whisper model for "cer", no speech to
embed for "similarity") cannot win and does not count for early stopping. Until some evaluation has the
value, the lowest eval loss keeps a provisional best, so `ready/` always holds a chosen checkpoint and
run.json says why.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

from utils.quality.selection import BestRule, EarlyStopping, is_better
from utils.training.evaluation.quality_eval import ScoringBudget
from utils.training.evaluation.shared_baseline import shared_baseline
from utils.training.loop.trainer import StopTraining
from utils.training.ranks import distributed
from utils.training.recording.checkpoint_files import BEST_MODEL_FILE
from utils.training.recording.phase_times import SAVES, SCORED_EVAL, SCORING_WAIT, PhaseTimes
from utils.training.recording.records import BestChoice, EarlyStopState, QualityRecord
from utils.training.recording.run_record import load_run, update_run

log = logging.getLogger(__name__)


# The numbers of a scored evaluation a rule may read (utils.quality.selection.BestRule.value_of).
SCORE_NAMES = ("cer", "wer", "similarity", "duration_ratio", "combined", "naturalness", "babble_rate")


class EarlyStop(StopTraining):
    """The rule's value has not improved for `patience` evaluations: the run ends as the Stop button ends it."""


def _shown(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


def _shown_apart(value: float, other: float) -> tuple[str, str]:
    """Both values with as few digits as tell them apart ("7.5912 is lower than 7.5914", not "7.591 ... 7.591")."""
    for digits in range(4, 10):
        shown = f"{value:.{digits}g}", f"{other:.{digits}g}"
        if shown[0] != shown[1]:
            break
    return shown


class CheckpointChoice:
    """The run's best-checkpoint rule and early stopping (see the module docstring): the trainer's `Scoring`
    (utils.training.loop.contract). About 260 lines: the decision, the scoring on and off the training thread and
    early stopping share the run's best and its budget."""

    def __init__(
        self,
        rule: str | BestRule,
        patience: int,
        run_dir: Path,
        metrics: Any,
        evaluator: Any = None,
        scoring_share: float = 1.0,
        baseline_from: str = "",
        timings: PhaseTimes | None = None,
    ) -> None:
        self.rule = BestRule.parse(rule)
        self.baseline_from = baseline_from  # another run's step 0 to take instead of scoring it (shared_baseline)
        self.run_dir = Path(run_dir)
        self.metrics = metrics
        self.evaluator = evaluator
        self.budget = ScoringBudget(scoring_share)
        self.stopper = EarlyStopping(self.rule, patience) if patience else None
        self.best: dict[str, Any] | None = None
        self.stop_message: str | None = None
        self.stop_requested = False  # a multi-process run's early stop, taken at the next step by every rank
        # Under best_by eval_loss an evaluation is decoded and scored on a background thread (one at a time).
        self.background_scoring = self.rule is BestRule.EVAL_LOSS
        self._scoring: threading.Thread | None = None
        self._scored: tuple[dict[str, Any], dict[str, Any]] | None = None  # (quality fields, record fields)
        self._phase_times = timings  # the run's phase timer (the trainer's too): scoring and saves counted apart
        # Training clips that may become the voice's reference, taken while the dataset is as validated; measured
        # at the run's end (utils.training.evaluation.reference_choice).
        self.reference_pool: list[list[tuple[str, float]]] = []
        self._restore()

    def _restore(self) -> None:
        """A resumed run continues from its recorded best (and early-stopping count) under the same rule."""
        record = load_run(self.run_dir)
        best = record.best
        if best is None or best.rule != self.rule.value or not (self.run_dir / BEST_MODEL_FILE).is_file():
            return
        self.best = best.to_json()
        stopping = record.early_stop or EarlyStopState()
        if self.stopper is not None and stopping.rule == self.rule.value and best.value is not None:
            self.stopper.best = float(best.value)
            self.stopper.evals_without_improvement = int(stopping.evals_without_improvement or 0)

    def _phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self._phase_times.phase(name) if self._phase_times is not None else contextlib.nullcontext()

    # --- the decision -------------------------------------------------------------------------------
    def decide(self, step: int, values: dict[str, float | None], reasons: list[str]) -> tuple[bool, str, str]:
        """(better, by which rule, why) for an evaluation with `values` (eval_loss, cer, similarity, combined)."""
        rule, best = self.rule, self.best
        value = rule.value_of(values)
        provisional = best is not None and best.get("value") is None and best.get("by") != rule.value
        if value is not None:
            if best is None or provisional:
                return True, rule.value, f"first evaluation with a {rule.value}: {_shown(value)}"
            if is_better(rule, value, best["value"]):
                side = "higher" if rule.higher_is_better else "lower"
                new, old = _shown_apart(value, best["value"])
                return True, rule.value, f"{rule.value} {new} is {side} than {old} (step {best['step']})"
            return False, rule.value, ""
        if best is not None and not provisional:
            return False, rule.value, ""
        # No value under the rule yet: the eval loss keeps a provisional best.
        missing = next((r for r in reasons if r.startswith(f"{rule.value}:")), f"{rule.value}: not measured")
        loss = values.get("eval_loss")
        previous = None if best is None else best["metrics"].get("eval_loss")
        if not is_better(BestRule.EVAL_LOSS, loss, previous):
            return False, BestRule.EVAL_LOSS.value, ""
        return (
            True,
            BestRule.EVAL_LOSS.value,
            (f"no {missing}; provisional best by eval loss {_shown(loss)} until an evaluation has a {rule.value}"),
        )

    # --- what the trainer calls ---------------------------------------------------------------------
    def __call__(self, trainer: Any) -> None:
        step = trainer.total_steps_done
        losses = {
            "train_loss": trainer._pick_target_avg_loss(trainer.keep_avg_train) or float("inf"),
            "eval_loss": trainer._pick_target_avg_loss(trainer.keep_avg_eval),
        }
        values: dict[str, float | None] = {"eval_loss": losses["eval_loss"]}
        if values["eval_loss"] is None and losses["train_loss"] != float("inf"):
            values["eval_loss"] = losses["train_loss"]  # no eval pass: the train loss stands in, as coqui does
        spoken, quality = self._speak(trainer, step)
        if quality is not None:
            values.update({k: quality.get(k) for k in SCORE_NAMES})
        better, by, why = self.decide(step, values, quality["reasons"] if quality else [])
        candidate = BestChoice(
            rule=self.rule.value,
            step=step,
            value=self.rule.value_of(values) if by == self.rule.value else None,
            by=by,
            why=why,
            metrics=values,
            checkpoint=str(self.run_dir / BEST_MODEL_FILE),
        )
        better = better and self._save_best(trainer, candidate, losses)
        stop = self._count(values)
        if self.stopper is not None:
            count = EarlyStopState(
                rule=self.rule.value,
                patience=self.stopper.patience,
                evals_without_improvement=self.stopper.evals_without_improvement,
            )
            update_run(self.run_dir, early_stop=count)
        record = {
            "step": step,
            "epoch": trainer.epochs_done + 1,
            "rule": self.rule.value,
            "eval_loss": values["eval_loss"],
            "is_best": better,
            "best_step": self.best["step"] if self.best else None,
        }
        if quality is not None:
            self._record(quality, record)
        elif spoken is not None:
            self._score_in_background(spoken, record)
        if self._phase_times is not None:  # each phase's time and memory so far: a run that dies keeps them
            update_run(self.run_dir, timings=self._phase_times.as_dict())
        if stop:
            self._stop(step)

    def _speak(self, trainer: Any, step: int) -> tuple[Any, dict[str, Any] | None]:
        """The evaluation's sentences and probes spoken with the current weights, when the scoring budget allows
        (always at the last epoch): (what was spoken, its scores when scored here rather than in the background)."""
        if self.evaluator is None:
            return None, None
        if not self.budget.should_score(trainer.epochs_done + 1 >= trainer.config.epochs):
            log.info("Quality evaluation at step %d %s.", step, self.budget.reason_skipped())
            return None, None
        with self._phase(SCORING_WAIT):
            self.wait()  # at most one evaluation being scored: the previous one is recorded first
        quality = None
        with self._phase(SCORED_EVAL):
            started = time.monotonic()
            spoken = self.evaluator.generate(trainer.model.xtts, step)
            if not self.background_scoring:
                quality = spoken.finish()
            self.budget.record(time.monotonic() - started)
        return spoken, quality

    def _save_best(self, trainer: Any, candidate: BestChoice, losses: dict[str, Any]) -> bool:
        """best_model.pth written with the current weights; whether it was (a save may be refused)."""
        # run.json names the best once best_model.pth holds it: the write may still be in flight (a background
        # save), and a kill -9 or a full disk before it lands must not leave a record of weights not on disk.
        record_best = lambda _path, best=candidate: update_run(self.run_dir, best=best)
        with self._phase(SAVES):
            saved = trainer.checkpoints.save_best(trainer, candidate.step, losses, on_done=record_best)
        if saved is None:
            return False
        self.best = candidate.to_json()
        return True

    # --- scoring off the training loop --------------------------------------------------------------
    def _record(self, quality: dict[str, Any], record: dict[str, Any]) -> None:
        self.metrics.quality(QualityRecord(**{**quality, **record}))

    def score_baseline(self, trainer: Any) -> None:
        """Step 0: the weights the run starts from (the base model's, or custom_model's), spoken and scored with the
        same sentences, probes and seed as every evaluation, as the run's baseline. Only at the start of a run (a
        resumed run has its own already); scored on the background thread, as it decides nothing; its time counts
        in the scoring budget."""
        if self.evaluator is None or trainer.continue_run or trainer.total_steps_done:
            return
        if self.baseline_from:
            shared, why = shared_baseline(self.baseline_from, self.run_dir)
            if shared is not None:
                fields = set(QualityRecord.__dataclass_fields__) - {"time", "elapsed_s"}
                self._record({k: v for k, v in shared.items() if k in fields}, {})
                log.info("Baseline (step 0) taken from %s, scored once for both.", self.baseline_from)
                return
            log.warning("Baseline not taken from %s: %s; scoring this run's own.", self.baseline_from, why)
        with self._phase(SCORED_EVAL):
            spoken = self.evaluator.generate(trainer.model.xtts, 0)
        self.budget.spent += spoken.loop_seconds
        record = {"step": 0, "epoch": 0, "rule": self.rule.value, "eval_loss": None, "is_best": False}
        self._score_in_background(spoken, {**record, "best_step": None, "baseline": True})

    def _score_in_background(self, spoken: Any, record: dict[str, Any]) -> None:
        def work() -> None:
            started = time.monotonic()
            try:
                quality = spoken.finish()  # never raises for a model or scoring problem: it says why
            except Exception as exc:
                log.warning("Scoring the evaluation at step %d failed: %s", spoken.step, exc, exc_info=True)
                empty = dict.fromkeys(SCORE_NAMES)
                quality = {
                    **empty,
                    "files": [],
                    "texts": [],
                    "clips": [],
                    "seconds": time.monotonic() - started,
                    "reasons": [f"scoring failed: {type(exc).__name__}: {exc}"],
                }
            seconds = time.monotonic() - started
            if self._phase_times is not None:
                self._phase_times.add_background("scoring", seconds)
            if record.get("baseline"):
                self.budget.spent += seconds  # counted, but the first evaluation is still always scored
            else:
                self.budget.add(seconds)
            self._scored = (quality, record)

        self._scoring = threading.Thread(target=work, name=f"scoring-step-{spoken.step}", daemon=True)
        self._scoring.start()

    def collect(self) -> None:
        """At a step boundary: the record of a background scoring that has finished."""
        if self._scoring is not None and not self._scoring.is_alive():
            self.wait()

    def wait(self) -> None:
        """Wait for the evaluation being scored (if any) and record it."""
        if self._scoring is None:
            return
        self._scoring.join()
        self._scoring = None
        scored, self._scored = self._scored, None
        if scored is not None:
            self._record(*scored)

    def _count(self, values: dict[str, float | None]) -> bool:
        """Feed early stopping; True when patience has run out. A missing value is not counted either way."""
        if self.stopper is None:
            return False
        value = self.rule.value_of(values)
        if value is not None:
            self.stopper.update(value)
        return self.stopper.should_stop

    def _stop(self, step: int) -> None:
        patience = self.stopper.patience
        best = self.best or {}
        self.stop_message = (
            f"Stopped early at step {step}: the {self.rule.value} did not improve for {patience} "
            f"evaluation(s) (best {_shown(best.get('value'))} at step "
            f"{best.get('step')})."
        )
        update_run(
            self.run_dir,
            early_stop=EarlyStopState(
                rule=self.rule.value,
                patience=patience,
                evals_without_improvement=self.stopper.evals_without_improvement,
                step=step,
                best_step=best.get("step"),
                message=self.stop_message,
            ),
        )
        log.info(self.stop_message)
        if distributed.world_size() > 1:
            # Only rank 0 decides; the other ranks are already in the next step. The stop goes into that step's
            # agreement (utils.training.ranks.data_parallel.StepSync), so every rank ends after the same step.
            self.stop_requested = True
            return
        raise EarlyStop(self.stop_message)


def checkpoint_choice(
    args: Any,
    report: Any,
    frontend: Any,
    run_dir: Path,
    metrics: Any,
    reference_wav: Path,
    generation_batch: int = 0,
    voices: list[Any] | None = None,
    voice_notes: list[str] | None = None,
    timings: PhaseTimes | None = None,
) -> CheckpointChoice:
    """The run's CheckpointChoice from its TrainArguments (quality_eval, best_by, early_stop_patience,
    whisper_model, quality_max_audio_tokens); the sentences it speaks are recorded in run.json `quality`;
    `generation_batch`: rows generated together (0: all; utils.training.loop.auto_batch.plan_generation_batch)."""
    from utils.quality.reference_candidates import reference_pool
    from utils.training.evaluation.evaluation_plan import run_evaluator

    evaluator, setup = run_evaluator(args, report, frontend, run_dir, reference_wav, generation_batch, voices or [])
    for note in voice_notes or []:
        log.info("%s", note)
    if setup is not None:
        setup.notes = voice_notes or None
        update_run(run_dir, quality=setup)
    choice = CheckpointChoice(
        args.best_by,
        args.early_stop_patience,
        run_dir,
        metrics,
        evaluator,
        scoring_share=args.quality_eval_share,
        baseline_from=args.quality_baseline_from,
        timings=timings,
    )
    if evaluator is not None and args.reference_search and not evaluator.several_voices:
        choice.reference_pool = reference_pool(report, args.seed)
    return choice
