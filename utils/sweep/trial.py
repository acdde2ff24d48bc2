"""One trial of a sweep: an ordinary run, launched and followed the way the web page launches one
(utils.training.process.runner: a worker process per run, its folder the protocol), reported to its Optuna trial at
each evaluation, and stopped at a step boundary with its checkpoint when the pruner says it fell behind.

The trial's lock (utils.sweep.study.TrialLock) is taken as soon as its run folder exists and is released by the sweep
only after the trial is told: no other process can adopt a trial between its end and its record.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.files import JsonlFollower, read_jsonl, write_json_atomic
from utils.quality.selection import BestRule
from utils.sweep.study import TRIAL_FILE, TrialLock
from utils.training.process.runner import TrainingRunner
from utils.training.recording.run_record import METRICS_FILE, RunStatus, newest_checkpoint_on_disk, read_run
from utils.training.recording.spec import request_stop, worker_alive

log = logging.getLogger(__name__)
POLL_S = 1.0


@dataclass
class TrialOutcome:
    # complete | pruned | failed | paused (stopped by the user or the budget: resumed later) | unstarted (stopped
    # before its run began: not counted, its settings queued again)
    state: str
    value: float | None = None
    run_dir: str = ""
    reason: str = ""
    gain: float | None = None  # the rule's value against the base model's (step 0), better when positive
    verdict: str = ""


def evaluation_value(record: dict[str, Any], rule: BestRule) -> float | None:
    """The rule's value of one metrics.jsonl record (an eval record for the eval loss, a scored one otherwise)."""
    if rule is BestRule.EVAL_LOSS:
        return rule.value_of(record) if record.get("type") == "eval" else None
    if record.get("type") != "quality" or record.get("baseline"):
        return None
    return rule.value_of(record)


def baseline_value(run_dir: Path, rule: BestRule) -> float | None:
    if rule is BestRule.EVAL_LOSS:
        return None
    base = [r for r in read_jsonl(run_dir / METRICS_FILE) if r.get("type") == "quality" and r.get("baseline")]
    return rule.value_of(base[-1]) if base else None


def ended_by_itself(record: dict[str, Any]) -> bool:
    """A stopped run that stopped itself (early stopping, out of memory at one clip): its result, not a pause."""
    return bool((record.get("early_stop") or {}).get("step") is not None or record.get("stop_reason"))


class TrialFollower:
    """Follows one trial's run through a TrainingRunner until it ends: its evaluations to the Optuna trial, the
    pruner's and the sweep's stops to its folder."""

    def __init__(
        self,
        trial: Any,
        runner: TrainingRunner,
        rule: BestRule,
        should_stop: Callable[[], bool],
        progress: Callable[[dict[str, Any]], None],
    ) -> None:
        self.trial, self.runner, self.rule = trial, runner, rule
        self.should_stop, self.progress = should_stop, progress
        self.pruned = self.paused = False
        self.epochs = 0  # the trial's, set when it starts: its last evaluation reports but is not pruned
        self.lock: TrialLock | None = None  # held from the folder's creation; the sweep releases it after the tell

    def run(self, kwargs: dict[str, Any], study_name: str, storage: str) -> TrialOutcome:
        self.epochs = int(kwargs.get("num_epochs") or 0)
        started, message = self.runner.start(kwargs)
        run_dir = Path(self.runner.state.run_dir) if self.runner.state.run_dir else None
        if not started or run_dir is None:
            return TrialOutcome("failed", reason=message)
        self.lock = TrialLock(run_dir)
        self.lock.acquire()  # a new folder: nobody else holds it
        self._announce(run_dir, kwargs, study_name, storage)
        return self._follow(run_dir)

    def resume(self, run_dir: Path, kwargs: dict[str, Any]) -> TrialOutcome:
        """A trial whose process died (its lock held by the caller): wait for its worker (it stops at the next step
        once its follower is gone), then take its result when it had ended, or continue it from its checkpoint."""
        self.epochs = int(kwargs.get("num_epochs") or 0)
        while worker_alive(run_dir):
            time.sleep(POLL_S)
        record = read_run(run_dir)  # a run whose process died is marked failed here
        status = RunStatus.parse(record.get("status"))
        pruned = bool(self.trial.user_attrs.get("pruned_at_epoch"))
        if status == RunStatus.FINISHED or (status == RunStatus.STOPPED and (pruned or ended_by_itself(record))):
            self.pruned = status == RunStatus.STOPPED and pruned
            return self._outcome(run_dir, status, "")
        checkpoint = record.get("last_checkpoint") or newest_checkpoint_on_disk(run_dir, record)
        resumable = status in (RunStatus.STOPPED, RunStatus.INTERRUPTED) or (status == RunStatus.FAILED and checkpoint)
        if not resumable:
            why = record.get("error") or "see its log"
            return TrialOutcome("failed", run_dir=str(run_dir), reason=f"its run is {status.value}: {why}")
        started, message = self.runner.start({**kwargs, "resume_from": str(run_dir)})
        if not started:
            return TrialOutcome("failed", run_dir=str(run_dir), reason=message)
        self.progress({"event": "resumed", "trial": self.trial.number, "run_dir": str(run_dir)})
        return self._follow(run_dir)

    def _announce(self, run_dir: Path, kwargs: dict[str, Any], study_name: str, storage: str) -> None:
        self.trial.set_user_attr("run_dir", str(run_dir))
        self.trial.set_user_attr("host", socket.gethostname())
        record = {"study": study_name, "storage": storage, "trial": self.trial.number, "params": self.trial.params}
        write_json_atomic(run_dir / TRIAL_FILE, record)
        self.progress(
            {"event": "started", "trial": self.trial.number, "run_dir": str(run_dir), "params": self.trial.params}
        )

    def _follow(self, run_dir: Path) -> TrialOutcome:
        follower = JsonlFollower(run_dir / METRICS_FILE)
        reported = set(self.trial.storage.get_trial(self.trial._trial_id).intermediate_values)
        while True:
            state = self.runner.poll()
            for record in follower.follow():
                self._consider(record, reported, run_dir)
            follower.records.clear()
            if not state.active:
                break
            if self.should_stop() and not (self.pruned or self.paused):
                self.paused = True
                request_stop(run_dir)
            time.sleep(POLL_S)
        status = state.status
        if self.paused and not (run_dir / "run.json").is_file():
            # Stopped while its worker checked the dataset: nothing trained, nothing to resume.
            return TrialOutcome("unstarted", reason="stopped with the sweep before it began; its settings queued again")
        if status == RunStatus.FAILED:
            return TrialOutcome("failed", run_dir=str(run_dir), reason=state.error or state.message)
        return self._outcome(run_dir, status, state.message)

    def _consider(self, record: dict[str, Any], reported: set[int], run_dir: Path) -> None:
        value = evaluation_value(record, self.rule)
        epoch = record.get("epoch")
        if value is None or not isinstance(epoch, int) or epoch in reported:
            return
        reported.add(epoch)
        self.trial.report(value, epoch)
        self.progress({"event": "evaluated", "trial": self.trial.number, "epoch": epoch, "value": value})
        if not self.pruned and epoch < self.epochs and self.trial.should_prune():
            self.pruned = True
            self.trial.set_user_attr("pruned_at_epoch", epoch)
            request_stop(run_dir)
            self.progress({"event": "pruning", "trial": self.trial.number, "epoch": epoch, "value": value})

    def _outcome(self, run_dir: Path, status: RunStatus, message: str) -> TrialOutcome:
        record = read_run(run_dir)
        values = [v for r in read_jsonl(run_dir / METRICS_FILE) if (v := evaluation_value(r, self.rule)) is not None]
        best = record.get("best") or {}
        value = best.get("value") if best.get("by") == self.rule.value else None
        if value is None and values:
            value = max(values) if self.rule.higher_is_better else min(values)
        base = baseline_value(run_dir, self.rule)
        gain = None
        if value is not None and base is not None:
            gain = value - base if self.rule.higher_is_better else base - value
        verdict = (record.get("verdict") or {}).get("text") or ""
        if self.pruned:
            return TrialOutcome("pruned", value, str(run_dir), "fell behind the other trials' median", gain, verdict)
        paused = status in (RunStatus.STOPPED, RunStatus.INTERRUPTED) and not ended_by_itself(record)
        if self.paused and paused:
            return TrialOutcome("paused", value, str(run_dir), "stopped with the sweep; resumed with it", gain, verdict)
        if value is None:
            why = "; ".join(r for r in (record.get("message"), message) if r) or "no evaluation had a value"
            return TrialOutcome("failed", None, str(run_dir), f"no {self.rule.value} measured ({why})", gain, verdict)
        return TrialOutcome("complete", value, str(run_dir), "", gain, verdict)
