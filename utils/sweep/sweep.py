"""`sweep_gpt`: which settings make the voice better than the base model, found by a scored sweep (Optuna TPE).

Read top to bottom, a sweep:
1. checks what it is given (the fixed settings as train_gpt checks them, the space, the budget, the rule) and the
   dataset once, before any trial;
2. opens its study (utils.sweep.study: SQLite in the output folder by default) and, when new, queues the given
   settings as its first trial so the sweep always measures where the user stood;
3. runs trials until the budget is spent, one per device slot (one per GPU on a machine with several; one on a
   CPU), each an ordinary run (its own folder, records and ready/) launched and followed as the page launches a run
   (utils.sweep.trial), with the first trial's step-0 evaluation of the base model shared by every later trial
   (TrainArguments.quality_baseline_from: scored once), and never a trial the memory plan says will not fit;
4. adopts, first, any trial of the study whose process died (kill -9, a crash, Stop): its run resumes from its
   checkpoint and reports to the same trial;
5. returns the trials and the best, against the base model.

The objective is the rule's value of each trial's best evaluation (combined by default; the same rule picks the
checkpoint its ready/ holds); every later trial shares the first one's baseline, so the value against the base
model orders trials as the value does, and is reported beside it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.files import read_json, read_jsonl, write_json_atomic
from utils.options.arguments import RUN_NAME_PATTERN, TrainArguments
from utils.options.input_files import check_input_files
from utils.quality.selection import BestRule
from utils.sweep.space import TRIAL_DEFAULTS, SearchSpace
from utils.sweep.study import (
    TRIAL_FILE,
    TrialLock,
    default_storage,
    definition_of,
    open_storage,
    open_study,
    redacted,
    study_lock,
)
from utils.sweep.trial import TrialFollower, TrialOutcome
from utils.training.process.runner import TrainingRunner
from utils.training.recording.run_record import METRICS_FILE, RUN_FILE
from utils.training.recording.spec import worker_alive

log = logging.getLogger(__name__)
GIB = 1024**3
NOT_COUNTED = "not_counted"  # a trial stopped before its run began: its settings are queued again


@dataclass(frozen=True)
class Budget:
    """When a sweep ends: the study has `trials` finished trials (every process's, so a resumed or shared study
    continues to the same count), or this process has run `minutes`, or the study's trials have used `gpu_hours`
    of device time (a CPU slot counts as a device)."""

    trials: int | None = 8
    minutes: float | None = None
    gpu_hours: float | None = None

    def __post_init__(self) -> None:
        given = {"trials": self.trials, "minutes": self.minutes, "gpu_hours": self.gpu_hours}
        for name, value in given.items():
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
            ):
                raise ValueError(f"The sweep's budget {name} must be above 0 (or None for no limit); got {value!r}.")
        if all(v is None for v in given.values()):
            raise ValueError("The sweep needs a budget: a number of trials, minutes or GPU hours.")
        if self.trials is not None and (not isinstance(self.trials, int) or self.trials > 10_000):
            raise ValueError(f"The sweep's trials must be a whole number from 1 to 10000; got {self.trials!r}.")


@dataclass
class SweepProgress:
    """What a sweep has done so far, for a page or a notebook to show; updated by the sweep's threads."""

    study_name: str = ""
    storage: str = ""
    budget: str = ""
    trials_budget: int | None = None  # the study's trials in all, when the budget counts them
    estimate: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    running: dict[int, dict[str, Any]] = field(default_factory=dict)  # trial -> {run_dir, epoch, value, params}
    done: bool = False
    message: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.events.append({**event, "time": time.time()})
            number = event.get("trial")
            if number is None:
                return
            kind = event.get("event")
            if kind in ("started", "resumed"):
                self.running[number] = {"run_dir": event.get("run_dir"), "params": event.get("params"), "epoch": 0}
            elif kind == "evaluated" and number in self.running:
                self.running[number].update(epoch=event.get("epoch"), value=event.get("value"))
            elif kind in ("ended", "paused"):
                self.running.pop(number, None)


@dataclass
class SweepResult:
    study_name: str
    storage: str
    rule: str
    trials: list[dict[str, Any]]
    best: dict[str, Any] | None
    message: str

    def to_markdown(self) -> str:
        lines = [
            f"Sweep {self.study_name!r} ({self.rule}): {self.message}",
            "",
            f"| trial | state | {self.rule} | against base | settings | run |",
            "|---|---|---|---|---|---|",
        ]
        for t in self.trials:
            value = "" if t.get("value") is None else f"{t['value']:.4g}"
            gain = "" if t.get("gain") is None else f"{t['gain']:+.3f}"
            params = ", ".join(f"{k}={_shown(v)}" for k, v in (t.get("params") or {}).items())
            run = Path(t["run_dir"]).name if t.get("run_dir") else t.get("reason", "")
            lines.append(f"| {t['number']} | {t['state']} | {value} | {gain} | {params} | {run} |")
        return "\n".join(lines)


def _shown(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def trial_table(study: Any) -> list[dict[str, Any]]:
    rows = []
    for t in study.get_trials(deepcopy=False):
        rows.append(
            {
                "number": t.number,
                "state": t.state.name.lower(),
                "value": t.value,
                "params": dict(t.params),
                "run_dir": t.user_attrs.get("run_dir", ""),
                "gain": t.user_attrs.get("gain"),
                "reason": t.user_attrs.get("reason", ""),
                "verdict": t.user_attrs.get("verdict", ""),
                "seconds": (t.datetime_complete - t.datetime_start).total_seconds()
                if t.datetime_complete and t.datetime_start
                else None,
            }
        )
    return rows


def check_study_name(name: str) -> None:
    """A study's name names its trials' run folders (`<name>-t000-...`) and its SQLite file."""
    if not isinstance(name, str) or not RUN_NAME_PATTERN.fullmatch(f"{name}-t000") or ".." in name:
        raise ValueError(
            f"study_name takes letters, digits, '-', '_' and '.', starting with a letter or digit, at most 75 "
            f"characters; got {name!r}."
        )


def _slots(devices: str | Sequence[str] | None) -> list[str]:
    """One device per parallel trial: the GPUs named, every GPU of the machine, else one CPU."""
    if isinstance(devices, str):
        devices = [d.strip() for d in devices.split(",") if d.strip()]
    if devices:
        named = [str(d).strip().lower() for d in devices]
        wrong = [d for d in named if d != "cpu" and not d.isdigit()]
        if wrong:
            raise ValueError(
                f"devices names GPU numbers or 'cpu', one trial at a time on each; got {', '.join(wrong)}."
            )
        return named
    try:
        import torch

        count = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no CUDA runtime: a CPU slot
        count = 0
    return [str(i) for i in range(count)] or ["cpu"]


def _fingerprint(args: TrainArguments, audio_roots: Sequence[str] | None) -> tuple[str, int]:
    """The dataset by content (what the study is of) and its training rows; checked once, cached for the trials."""
    from utils.data.check_cache import cache_folder
    from utils.data.mix_check import validate_datasets
    from utils.training.inputs.input_checks import raise_if_unusable

    report = validate_datasets(
        args.train_csv,
        args.eval_csv,
        args.language,
        args.max_audio_length,
        seed=args.seed,
        audio_roots=audio_roots,
        cache_dir=cache_folder(args.output_path),
    )
    raise_if_unusable(report, args.min_usable_rows)
    return report.fingerprint(), int(report.epoch_rows)


class Sweep:
    """One process's part in a study (see the module docstring). About 270 lines: a trial's start, its pruning and
    a killed study's adoption share the study's storage and state."""

    def __init__(
        self,
        args: TrainArguments,
        space: SearchSpace,
        rule: BestRule,
        budget: Budget,
        study: Any,
        storage_url: str,
        slots: list[str],
        progress: SweepProgress,
        callback: Callable[[dict[str, Any]], None] | None,
        should_stop: Callable[[], bool],
        audio_roots: Sequence[str] | None,
        memory_limit_gib: float | None,
        train_rows: int,
    ) -> None:
        self.args, self.space, self.rule, self.budget, self.study = args, space, rule, budget, study
        self.storage_url, self.slots, self.progress = storage_url, slots, progress
        self.callback, self.should_stop, self.audio_roots = callback, should_stop, audio_roots
        self.memory_limit_gib, self.train_rows = memory_limit_gib, train_rows
        self.started = time.monotonic()
        self._lock = threading.Lock()  # one thread asks for or adopts a trial at a time
        self.paused_here: set[int] = set()
        self.errors: list[Exception] = []

    # --- the budget ------------------------------------------------------------------------------------
    def out_of_budget(self) -> str:
        """Why no new trial starts ("" while the budget lasts)."""
        if self.should_stop():
            return "stopped"
        import optuna

        states = optuna.trial.TrialState
        counted = (states.COMPLETE, states.PRUNED, states.FAIL, states.RUNNING)  # not a queued one yet to run
        trials = [t for t in self.study.get_trials(deepcopy=False, states=counted) if not t.user_attrs.get(NOT_COUNTED)]
        if self.budget.trials is not None and len(trials) >= self.budget.trials:
            return f"{self.budget.trials} trials reached"
        if self.budget.minutes is not None and time.monotonic() - self.started >= self.budget.minutes * 60:
            return f"{self.budget.minutes:g} minutes reached"
        if self.budget.gpu_hours is not None:
            used = _device_seconds(self.study) / 3600
            if used >= self.budget.gpu_hours:
                return f"{self.budget.gpu_hours:g} device hours reached ({used:.2f} used)"
        return ""

    def past_deadline(self) -> bool:
        return self.should_stop() or (
            self.budget.minutes is not None and time.monotonic() - self.started >= self.budget.minutes * 60
        )

    def estimate(self) -> str:
        """Time per trial before starting: from the study's finished trials, else from earlier runs on this
        dataset in the output folder (their seconds per step times a trial's steps), else unknown."""
        finished = [t["seconds"] for t in trial_table(self.study) if t["state"] == "complete" and t["seconds"]]
        if finished:
            per_trial, source = sorted(finished)[len(finished) // 2], f"the median of {len(finished)} finished trial(s)"
        else:
            per_step = _seconds_per_step(Path(self.args.output_path))
            if per_step is None:
                return "Time per trial: unknown until the first trial ends (no earlier run in this output folder)."
            epochs = [d for d in self.space.dimensions if d.name == "num_epochs"]
            mean_epochs = (
                (epochs[0].low + epochs[0].high) / 2 if epochs and epochs[0].low is not None else self.args.num_epochs
            )
            batch = self.args.batch_size if isinstance(self.args.batch_size, int) else 4
            steps = mean_epochs * math.ceil(self.train_rows / batch)
            per_trial, source = per_step * steps + 30, "earlier runs' seconds per step in this output folder"
        trials = self.budget.trials or 0
        total = (
            f"; {trials} trials on {len(self.slots)} slot(s) ~{per_trial * trials / len(self.slots) / 60:.1f} min"
            if trials
            else ""
        )
        return f"Time per trial ~{per_trial / 60:.1f} min ({source}){total}."

    # --- one slot --------------------------------------------------------------------------------------
    def run_slot(self, device: str) -> None:
        """Trials on one device until the budget is spent or the sweep stops: an orphaned trial of the study first,
        else a new one. An unexpected error ends this slot with the trial told failed and the error kept."""
        runner = TrainingRunner(self.args.output_path, reattach=False)
        while not self.past_deadline():
            trial: Any = None
            lock: TrialLock | None = None
            try:
                with self._lock:
                    adopted = self._adopt(device)
                    if adopted is None:
                        with study_lock(self.storage_url, self.study.study_name):  # count and ask as one step
                            why = self.out_of_budget()
                            if why:
                                self.progress.message = self.progress.message or why
                                return
                            trial = self.study.ask()
                            trial.set_user_attr("owner", _owner())
                if adopted is not None:
                    trial, run_dir, kwargs, lock = adopted
                    outcome = self._follower(trial, runner).resume(run_dir, kwargs)
                else:
                    kwargs = self._trial_arguments(trial, device)
                    if kwargs is None:
                        continue  # refused before it ran (it would not fit): recorded, the next one is drawn
                    follower = self._follower(trial, runner)
                    try:
                        outcome = follower.run(kwargs, self.study.study_name, redacted(self.storage_url))
                    finally:
                        lock = follower.lock
                self._tell(trial, outcome)
            except Exception as exc:  # the trial is recorded as failed, the sweep says why
                log.exception("Sweep slot %s failed", device)
                self.errors.append(exc)
                if trial is not None:
                    self._tell(trial, TrialOutcome("failed", reason=f"{type(exc).__name__}: {exc}"))
                return
            finally:
                if lock is not None:
                    lock.release()
        self.progress.message = self.progress.message or "stopped"

    def _follower(self, trial: Any, runner: TrainingRunner) -> TrialFollower:
        return TrialFollower(trial, runner, self.rule, self.past_deadline, self._event)

    def _event(self, event: dict[str, Any]) -> None:
        self.progress.add(event)
        if self.callback is not None:
            self.callback(event)

    def _trial_arguments(self, trial: Any, device: str) -> dict[str, Any] | None:
        """The trial's train_gpt arguments (its drawn settings, its device, the shared baseline), or None when the
        memory plan refuses it (then told failed with the planned peak)."""
        params = self.space.suggest(trial, self.args.to_dict())
        kwargs = {**self.args.to_dict(), **params, "run_name": f"{self.study.study_name}-t{trial.number:03d}"}
        kwargs["devices"] = "" if device == "cpu" else device
        kwargs["quality_baseline_from"] = self._baseline_run() or ""
        kwargs = TrainArguments(**kwargs).to_dict()
        trial.set_user_attr("arguments", kwargs)
        too_big = self._does_not_fit(kwargs, device)
        if too_big:
            self._tell(trial, TrialOutcome("failed", reason=too_big))
            return None
        if self.audio_roots:
            kwargs["audio_roots"] = list(self.audio_roots)
        return kwargs

    def _does_not_fit(self, kwargs: dict[str, Any], device: str) -> str:
        """Why the memory plan says this trial will not fit its device ("" when it fits or nothing limits it)."""
        limit = self.memory_limit_gib
        if limit is None and device != "cpu":
            from utils.device.gpu import gpu_free_bytes

            free = gpu_free_bytes(int(device)) if device.isdigit() else None
            limit = free / GIB if free else None
        if limit is None or kwargs.get("batch_size") == "auto":
            return ""
        from utils.memory_plan.planner import estimate_gpt_memory

        plan_keys = set(TrainArguments.__dataclass_fields__) - {
            "train_csv",
            "eval_csv",
            "output_path",
            "devices",
            "resume_from",
            "quality_baseline_from",
            "run_name",
        }
        peak = estimate_gpt_memory(**{k: v for k, v in kwargs.items() if k in plan_keys}).peak_gib
        if peak > limit:
            return f"the memory plan needs {peak:.2f} GiB, above the {limit:.2f} GiB it may use (not run)"
        return ""

    def _baseline_run(self) -> str | None:
        """The first trial's run folder with a scored baseline of the base model (shared by every later trial)."""
        if self.rule is BestRule.EVAL_LOSS and not self.args.quality_eval:
            return None
        for t in self.study.get_trials(deepcopy=False):
            folder = t.user_attrs.get("run_dir")
            if folder and _scored_own_baseline(Path(folder)):
                return folder
        return None

    def _adopt(self, device: str) -> tuple[Any, Path, dict[str, Any], TrialLock] | None:
        """A RUNNING trial of the study whose process is gone (its run folder here, its lock free, still RUNNING once
        the lock is held), with its arguments moved to this slot's device. A trial asked by a process that died
        before its run began, or whose run folder is gone or never began, is told failed with the reason."""
        import optuna

        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            if frozen.number in self.paused_here:
                continue
            folder = frozen.user_attrs.get("run_dir")
            owner_gone = _owner_gone(frozen.user_attrs.get("owner"))
            if not folder or not Path(folder).is_dir():
                if owner_gone:
                    why = "its run folder is gone" if folder else "its sweep process ended before the run started"
                    self._fail_frozen(frozen, why)
                continue
            run_dir = Path(folder)
            lock = TrialLock(run_dir)
            if not lock.acquire():
                continue
            current = self.study._storage.get_trial(frozen._trial_id)
            if current.state != optuna.trial.TrialState.RUNNING:  # told while we looked
                lock.release()
                continue
            if not (run_dir / RUN_FILE).is_file():
                if not worker_alive(run_dir):
                    self._fail_frozen(frozen, "its run never began (no run.json; its worker is gone: see the log)")
                lock.release()
                continue
            kwargs = {**(current.user_attrs.get("arguments") or {}), "devices": "" if device == "cpu" else device}
            if self._does_not_fit(kwargs, device):
                lock.release()  # another slot's device may take it
                continue
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            trial.set_user_attr("owner", _owner())
            self._event({"event": "adopted", "trial": frozen.number, "run_dir": str(run_dir)})
            if self.audio_roots:
                kwargs["audio_roots"] = list(self.audio_roots)
            return trial, run_dir, kwargs, lock
        return None

    def _fail_frozen(self, frozen: Any, why: str) -> None:
        import optuna

        try:
            self.study._storage.set_trial_user_attr(frozen._trial_id, "reason", why)
            self.study.tell(frozen.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another process told it first

    def _tell(self, trial: Any, outcome: TrialOutcome) -> None:
        import optuna

        if self.study._storage.get_trial(trial._trial_id).state.is_finished():
            return  # told by another process (it cannot be while we hold the lock; a trial without a folder can)
        for name, value in (
            ("run_dir", outcome.run_dir),
            ("gain", outcome.gain),
            ("verdict", outcome.verdict),
            ("reason", outcome.reason),
        ):
            if value not in (None, ""):
                trial.set_user_attr(name, value)
        if outcome.run_dir:  # the Runs view reads how the trial ended from its run folder
            trial_file = Path(outcome.run_dir) / TRIAL_FILE
            record = read_json(trial_file, {}) or {}
            ended = {"state": outcome.state, "value": outcome.value, "gain": outcome.gain, "reason": outcome.reason}
            write_json_atomic(trial_file, {**record, **ended})
        if outcome.state == "paused":
            self.paused_here.add(trial.number)  # not adopted again by this sweep: it stopped on purpose
            self._event({"event": "paused", "trial": trial.number, "run_dir": outcome.run_dir})
            return  # stays RUNNING: the next sweep of the study adopts and resumes it
        if outcome.state == "unstarted":
            trial.set_user_attr(NOT_COUNTED, True)
            self.study.enqueue_trial(dict(trial.params), skip_if_exists=True)
        state = {"complete": optuna.trial.TrialState.COMPLETE, "pruned": optuna.trial.TrialState.PRUNED}.get(
            outcome.state, optuna.trial.TrialState.FAIL
        )
        self.study.tell(
            trial, outcome.value if outcome.state == "complete" else None, state=state, skip_if_finished=True
        )
        self._event(
            {
                "event": "ended",
                "trial": trial.number,
                "state": outcome.state,
                "value": outcome.value,
                "gain": outcome.gain,
                "reason": outcome.reason,
                "run_dir": outcome.run_dir,
            }
        )


def _device_seconds(study: Any) -> float:
    """The device time the study's trials have trained: each trial run's own wall time (run.json timings, written at
    every evaluation), so a trial paused overnight counts its training, not the night."""
    total = 0.0
    for t in study.get_trials(deepcopy=False):
        folder = t.user_attrs.get("run_dir")
        record = read_json(Path(folder) / RUN_FILE, {}) if folder else {}
        total += float(((record or {}).get("timings") or {}).get("wall_s") or 0.0)
    return total


def _scored_own_baseline(run_dir: Path) -> bool:
    records = read_jsonl(run_dir / METRICS_FILE)
    return any(r.get("type") == "quality" and r.get("baseline") and not r.get("baseline_from") for r in records)


def _owner() -> dict[str, Any]:
    from utils.training.recording.run_record import process_identity

    return process_identity()


def _owner_gone(owner: Any) -> bool:
    from utils.training.recording.run_record import process_alive

    return isinstance(owner, dict) and process_alive(owner) is False


def _seconds_per_step(output_dir: Path) -> float | None:
    """Wall seconds per step of the newest finished run in the folder (its timings), or None."""
    from utils.training.recording.run_record import list_runs

    for run_dir in list_runs(output_dir):
        record = read_json(run_dir / RUN_FILE, {}) or {}
        wall = (record.get("timings") or {}).get("wall_s")
        steps = record.get("steps_done")
        if wall and steps:
            return float(wall) / float(steps)
    return None


def _first_trial(args: TrainArguments, space: SearchSpace) -> dict[str, Any]:
    """The user's own settings, where the space holds them: the sweep starts from where the user stood."""
    values = args.to_dict()
    first = {}
    for d in space.dimensions:
        value = values.get(d.name)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        inside = value in d.choices if d.choices is not None else number and d.low <= value <= d.high
        if inside:
            first[d.name] = value
    if not values.get("lora_rank") and "lora_rank" not in first:
        first = {k: v for k, v in first.items() if not k.startswith("lora_")}
    return first


def sweep_gpt(
    *,
    space: Mapping[str, Any] | Sequence[str] | str | None = None,
    trials: int | None = 8,
    minutes: float | None = None,
    gpu_hours: float | None = None,
    rule: str = "combined",
    study_name: str = "sweep",
    storage: str = "",
    first_trials: Sequence[Mapping[str, Any]] | None = None,
    devices: str | Sequence[str] | None = None,
    memory_limit_gib: float | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop_event: Any = None,
    audio_roots: Sequence[str] | None = None,
    state: SweepProgress | None = None,
    **train_options: Any,
) -> SweepResult:
    """A scored sweep of train_gpt's settings (see the module docstring); returns every trial of the study.

    train_options: train_gpt's keywords, fixed for every trial (train_csv, language, version, batch_size, ...).
    space: {name: (low, high) | [choices]} or "name=low:high" items (utils.sweep.space); None: learning rate,
    epochs and full vs LoRA. trials / minutes / gpu_hours: the budget (trials counts the whole study's). rule: the
    objective and each trial's best_by (combined, cer, similarity, naturalness, eval_loss). storage: an Optuna URL
    (default SQLite at <output_path>/sweeps/<study_name>.db) shared by every process of the study. first_trials:
    settings to try first (default: the given ones, where the space holds them). devices: one trial per device at a
    time ("0,1"; default every GPU, else one CPU). memory_limit_gib: refuse trials planned above it (default on a GPU:
    its free memory). stop_event (an Event or a callable): the running trials stop with a checkpoint and stay in
    the study, resumed by the next sweep of it.
    """
    rule_value = BestRule.parse(rule)
    budget = Budget(trials, minutes, gpu_hours)
    unknown = sorted(set(train_options) - set(TrainArguments.__dataclass_fields__))
    if unknown:
        raise ValueError(f"Unknown option(s) {', '.join(unknown)}: see utils.options.arguments.TrainArguments.")
    for name in ("resume_from", "quality_baseline_from", "devices"):
        if train_options.get(name):
            raise ValueError(f"{name} is the sweep's to set for each trial; leave it out.")
    args = TrainArguments(**{**TRIAL_DEFAULTS, **train_options, "best_by": rule_value.value})
    check_input_files(args)
    search = SearchSpace.of(space, num_epochs=args.num_epochs)
    search.check_with(args.to_dict())
    if budget.trials and budget.trials > 1 and search.size() == 1:
        raise ValueError(
            f"The sweep's space holds one setting ({search.text()}): {budget.trials} trials would repeat one run."
        )
    if memory_limit_gib is not None and not (isinstance(memory_limit_gib, (int, float)) and memory_limit_gib > 0):
        raise ValueError(f"memory_limit_gib must be above 0; got {memory_limit_gib!r}.")
    check_study_name(study_name)
    slots = _slots(devices)
    queued = [search.checked_settings(settings) for settings in first_trials or ()]
    fingerprint, train_rows = _fingerprint(args, audio_roots)
    url = storage or default_storage(args.output_path, study_name)
    study = open_study(
        open_storage(url),
        study_name,
        definition_of(args.to_dict(), fingerprint, search.to_json(), rule_value.value),
        "maximize" if rule_value.higher_is_better else "minimize",
    )
    if not study.get_trials(deepcopy=False):
        for settings in queued if first_trials is not None else [_first_trial(args, search)]:
            if settings:
                study.enqueue_trial(dict(settings), skip_if_exists=True)
    state = state or SweepProgress()
    state.study_name, state.storage, state.message = study_name, redacted(url), ""
    interrupted = threading.Event()
    asked = _stop_check(stop_event)
    should_stop = lambda: interrupted.is_set() or asked()
    sweep = Sweep(
        args,
        search,
        rule_value,
        budget,
        study,
        url,
        slots,
        state,
        progress,
        should_stop,
        audio_roots,
        memory_limit_gib,
        train_rows,
    )
    state.budget = ", ".join(
        f"{k} {v:g}"
        for k, v in (("trials", budget.trials), ("minutes", budget.minutes), ("GPU hours", budget.gpu_hours))
        if v is not None
    )
    state.trials_budget = budget.trials
    state.estimate = sweep.estimate()
    log.info("Sweep %s: %s; %s", study_name, search.text(), state.estimate)
    sweep._event({"event": "estimate", "text": state.estimate, "slots": sweep.slots})
    threads = [
        threading.Thread(target=sweep.run_slot, args=(d,), name=f"sweep-slot-{d}", daemon=True) for d in sweep.slots
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.5)
    except KeyboardInterrupt:  # Ctrl-C: the running trials stop with a checkpoint and stay in the study
        interrupted.set()
        state.message = "stopped (Ctrl-C): the running trials resume with the next sweep of this study"
        for t in threads:
            t.join()
    rows = trial_table(study)
    complete = [r for r in rows if r["state"] == "complete" and r["value"] is not None]
    best = None
    if complete:
        best = (max if rule_value.higher_is_better else min)(complete, key=lambda r: r["value"])
    message = _summary(rows, best, rule_value, state.message)
    state.done, state.message = True, message
    if sweep.errors:  # recorded on its trial; said here, not lost in a thread's log
        error = sweep.errors[0]
        raise error if isinstance(error, ValueError) else RuntimeError(f"The sweep stopped: {error}") from error
    return SweepResult(study_name, redacted(url), rule_value.value, rows, best, message)


def _summary(rows: list[dict[str, Any]], best: dict[str, Any] | None, rule: BestRule, why: str) -> str:
    counts = {s: sum(r["state"] == s for r in rows) for s in ("complete", "pruned", "fail", "running")}
    text = (
        f"{len(rows)} trials ({counts['complete']} complete, {counts['pruned']} pruned, {counts['fail']} failed"
        + (f", {counts['running']} to resume" if counts["running"] else "")
        + ")"
    )
    if why:
        text += f"; ended: {why}"
    if best is None:
        return text + ". No trial finished with a value yet."
    params = ", ".join(f"{k}={_shown(v)}" for k, v in best["params"].items())
    against = ""
    if best.get("gain") is not None:
        against = f", {best['gain']:+.3f} against the base model" + (
            " (better)" if best["gain"] > 0.01 else " (no better)"
        )
    return f"{text}. Best: trial {best['number']}, {rule.value} {best['value']:.4g}{against}, with {params}."


def _stop_check(stop_event: Any) -> Callable[[], bool]:
    if stop_event is None:
        return lambda: False
    if callable(stop_event):
        return lambda: bool(stop_event())
    return stop_event.is_set
