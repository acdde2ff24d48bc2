"""The schema of a run folder's records: `run.json` (`RunRecord`) and each line of `metrics.jsonl`
(`TrainRecord`, `EvalRecord`, `QualityRecord`, `StatusRecord`) and the web runner's `MemoryRecord`.

Every field a run writes is declared here once, with its type and a one-line meaning (`fields.metadata["doc"]`).
Writers build a record (or name its fields in `update_run`, which refuses a name not declared here); readers
parse with `from_json` and read attributes.

How a record is declared, read and written (checked, with the names older runs wrote) is
utils.training.recording.record_schema; the fields are declared here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from utils.training.recording.record_schema import R, Record, RecordError


def _field(doc: str, *, required: bool = False, page: bool = False) -> Any:
    """A record field: `doc` its meaning; `required` always written; `page` the web page reads it from the
    records it follows (the rest of a metrics record, per-step memory, stays in the file)."""
    return field(default=None, metadata={"doc": doc, "required": required, "page": page})


# --- parts of run.json ----------------------------------------------------------------------------------


@dataclass(kw_only=True)
class BestChoice(Record):
    """run.json `best`: the checkpoint best_model.pth holds, and why (utils.training.evaluation.best_checkpoint)."""

    rule: str | None = _field("the run's rule (best_by): eval_loss, cer, similarity or combined", required=True)
    step: int | None = _field("steps done when this checkpoint was taken", required=True)
    value: float | None = _field("its value under the rule; None for a provisional best by eval loss", required=True)
    by: str | None = _field("the rule it won by: the run's, or eval_loss while the rule has no value", required=True)
    why: str | None = _field("the reason in words, shown on the page", required=True)
    metrics: dict[str, float | None] | None = _field("eval_loss and the scores of that evaluation", required=True)
    checkpoint: str | None = _field("path of best_model.pth", required=True)


@dataclass(kw_only=True)
class EarlyStopState(Record):
    """run.json `early_stop`: early stopping's count and, once it ended the run, when and why. Older runs kept
    the count in `early_stopping`; `RunRecord.from_json` reads it into this."""

    rule: str | None = _field("the rule whose value must improve", required=True)
    patience: int | None = _field("evaluations without improvement that end the run")
    evals_without_improvement: int | None = _field("evaluations since the last improvement")
    step: int | None = _field("the step at which early stopping ended the run (absent while it runs)")
    best_step: int | None = _field("the best checkpoint's step when the run stopped")
    message: str | None = _field("why the run stopped, in words (also run.json `message`)")

    @property
    def stopped(self) -> bool:
        return self.step is not None

    def count_only(self) -> EarlyStopState:
        """The count without the stop: what a resume continues from."""
        return EarlyStopState(
            rule=self.rule, patience=self.patience, evals_without_improvement=self.evals_without_improvement
        )


@dataclass(kw_only=True)
class QualitySetup(Record):
    """run.json `quality`: what each scored evaluation speaks (utils.training.evaluation.quality_eval)."""

    sentences: list[str] | None = _field("the texts spoken at every evaluation", required=True)
    real_clips: list[str | None] | None = _field("each text's real clip, for similarity", required=True)
    whisper_model: str | None = _field("the Whisper model that transcribes them (name or folder)", required=True)
    seed: int | None = _field("the seed of the generation", required=True)
    probes: list[str] | None = _field("the probe texts spoken beside them (utils.quality.probes)")
    pace: dict[str, float] | None = _field("the speaker's pace (training rows): chars_per_second, overhead_seconds")
    generation_batch: int | None = _field("rows generated together, planned on a GPU (absent: all at once)")
    voices: dict[str, Any] | None = _field("several speakers: each voice's language, sentences and reference clip")
    speaker_rule: str | None = _field("the scores over the voices: their mean or the worst voice's")
    retention: dict[str, list[str]] | None = _field("per language the run does not train: the sentences it speaks")
    notes: list[str] | None = _field("speakers left without a voice of their own, and why")


@dataclass(kw_only=True)
class RunRecord(Record):
    """run.json: the one source of truth about a run (utils.training.recording.run_record reads and writes it)."""

    LEGACY: ClassVar[dict[str, str]] = {"early_stopping": "early_stop"}
    OMIT_NONE: ClassVar[bool] = True  # a run in progress has no value yet for most fields

    # written when the run folder is created (utils.training.run.TrainingRun._write_record)
    status: str | None = _field(
        "RunStatus value: starting, running, finished, stopped, interrupted, failed", required=True
    )
    started: str | None = _field("when this session of the run started (ISO 8601)", required=True)
    arguments: dict[str, Any] | None = _field(
        "TrainArguments.to_dict() as the run trains (auto batch settled)", required=True
    )
    run_dir: str | None = _field("the run folder", required=True)
    base_model: dict[str, Any] | None = _field("{version, folder} of the base model", required=True)
    language: str | None = _field("canonical language code of the dataset", required=True)
    text_frontend: dict[str, Any] | None = _field("TextFrontEnd.to_dict(): how text becomes tokens", required=True)
    device: dict[str, Any] | None = _field(
        "the GPU (detect_gpu) with a one-line summary, and the CPU threads torch used", required=True
    )
    versions: dict[str, str] | None = _field("python and library versions", required=True)
    command: list[str] | None = _field("sys.argv[:1] of the process that trained", required=True)
    pid: int | None = _field("the process that runs it (the launcher in a multi-device run)", required=True)
    pid_started: float | None = _field("that process's start time (a pid alone is reused)", required=True)
    host: str | None = _field("that process's host name", required=True)
    world_size: int | None = _field("number of training processes", required=True)
    devices: list[str] | None = _field("each rank's device: cpu or cuda:<n>", required=True)
    distributed: dict[str, Any] | None = _field("several ranks: {backend, ranks: [{rank, pid, host, device, name}]}")
    dataset: dict[str, Any] | None = _field(
        "DatasetReport.to_dict() without problems, with its fingerprint", required=True
    )
    history: list[dict[str, Any]] | None = _field(
        "earlier sessions of a resumed run: started, finished, status, ...", required=True
    )
    changed_on_resume: dict[str, list[Any]] | None = _field("{option: [before, now]} a resume changed", required=True)
    # checkpoints (kept across a resume)
    last_checkpoint: str | None = _field("newest periodic or stop checkpoint")
    last_checkpoint_step: int | None = _field("its steps done")
    best_checkpoint: str | None = _field("newest best_model.pth write")
    best_checkpoint_step: int | None = _field("its steps done")
    best: BestChoice | None = _field("the best checkpoint by the run's rule, and why")
    early_stop: EarlyStopState | None = _field("early stopping's count, and its stop when it ended the run")
    # the run's setup, once the trainer is built
    steps_per_epoch: int | None = _field("steps (batches) per epoch")
    optimizer_steps_per_epoch: int | None = _field("optimizer steps per epoch (with gradient accumulation)")
    total_steps: int | None = _field("steps the run will take in all epochs")
    effective_batch_size: int | None = _field("batch x gradient accumulation x ranks")
    lr_milestones_optimizer_steps: list[int] | None = _field("optimizer steps where the learning rate drops")
    vocab: dict[str, Any] | None = _field("the vocabulary used (and whether it was extended for a new language)")
    reference: dict[str, Any] | None = _field("reference.wav: {sources: the clips it joins, seconds}")
    voices: dict[str, Any] | None = _field(
        "several speakers: each voice's reference clip (file, relative to the run), language, training seconds and rows"
    )
    named_voices_error: str | None = _field("why the named voices could not be written into ready/ (if they could not)")
    batch_size_auto: str | None = _field("how batch_size='auto' was settled")
    micro_batch_size: int | None = _field(
        "clips per forward/backward once out-of-memory errors halved it (below batch_size; a resume continues at it)"
    )
    out_of_memory: list[dict[str, Any]] | None = _field(
        "each out-of-memory error of a step: {step, batch_before, batch_after, grad_acumm_before, grad_acumm_after, "
        "message, error}; the last has stopped: true when it stopped the run"
    )
    quality: QualitySetup | None = _field("what the scored evaluations speak")
    verdict: dict[str, Any] | None = _field(
        "the fine-tune against the base weights (step 0): {text, better, baseline_step, step, changes}"
    )
    inference: dict[str, Any] | None = _field("the sampling settings ready/ carries and where they came from")
    step: int | None = _field("steps done when training (re)started running")
    # how it ended
    finished: str | None = _field("when it ended (ISO 8601)")
    steps_done: int | None = _field("steps done when it ended")
    message: str | None = _field("how it ended, in words")
    error: str | None = _field("why it failed")
    failed_rank: int | None = _field("the rank that failed in a multi-device run")
    stop_checkpoint: str | None = _field("the checkpoint saved when it stopped (resume from it)")
    stop_reason: str | None = _field("why the run stopped itself (out of memory at one clip: what fits instead)")
    checkpoint_path: str | None = _field("the checkpoint ready/ was exported from")
    ready_dir: str | None = _field("ready/: the voice for inference")
    adapter_dir: str | None = _field("a LoRA run's adapter/")
    clips_failed: int | None = _field("clips the data loader could not load")
    clip_failures: list[str] | None = _field("the first of those, with why")
    timings: dict[str, Any] | None = _field(
        "where the wall time went: {wall_s, phases: {name: {seconds, count, share, peak_gib on a GPU}}, background} "
        "(phase_times.py)"
    )


# --- metrics.jsonl ------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class MetricRecord(Record):
    """One line of metrics.jsonl (or a memory sample): its `type` names its class (`metric_class`)."""

    TYPE: ClassVar[str] = ""
    time: float | None = _field("Unix time of the record", required=True)
    gpu_allocated_mb: float | None = _field("torch's allocated GPU memory (None without a GPU)", required=True)
    gpu_reserved_mb: float | None = _field("torch's reserved GPU memory", required=True)
    gpu_peak_allocated_mb: float | None = _field("peak allocated since the previous record", required=True)
    gpu_used_mb: float | None = _field("the whole GPU's used memory (NVML, all processes)", required=True)
    gpu_total_mb: float | None = _field("the GPU's memory", required=True)
    process_rss_mb: float | None = _field("this process's resident memory", required=True)
    ram_used_mb: float | None = _field("system RAM in use", required=True)
    ram_total_mb: float | None = _field("system RAM", required=True)
    swap_used_mb: float | None = _field("swap in use", required=True)
    swap_total_mb: float | None = _field("swap", required=True)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, **super().to_json()}


@dataclass(kw_only=True)
class LoggedRecord(MetricRecord):
    """A record MetricsLogger writes: it adds the time since the logger started."""

    elapsed_s: float | None = _field("seconds since this session of the run started", required=True)


@dataclass(kw_only=True)
class TrainRecord(LoggedRecord):
    TYPE: ClassVar[str] = "train"
    step: int | None = _field("steps done, counting this one", required=True, page=True)
    epoch: int | None = _field("epoch of the step, from 1", required=True, page=True)
    total_steps: int | None = _field("steps of the whole run", required=True, page=True)
    loss: float | None = _field("text + mel cross-entropy (None when not finite)", required=True, page=True)
    loss_text_ce: float | None = _field("weighted text cross-entropy", required=True)
    loss_mel_ce: float | None = _field("weighted mel cross-entropy", required=True)
    lr: float | None = _field("learning rate", required=True)
    grad_norm: float | None = _field(
        "gradient norm at an optimizer step (None between accumulation steps)", required=True
    )
    amp_scale: float | None = _field("mixed precision's loss scale", required=True)
    clips_failed: int | None = _field("clips the loader could not load so far", required=True, page=True)
    step_time: float | None = _field("seconds of the step", required=True, page=True)
    loader_time: float | None = _field("seconds waiting for the batch", required=True, page=True)
    samples_per_sec: float | None = _field("clips per second of all ranks", required=True, page=True)
    world_size: int | None = _field("ranks of a multi-device run")
    ranks: list[dict[str, Any]] | None = _field("each rank's loss terms and memory at this step")


@dataclass(kw_only=True)
class EvalRecord(LoggedRecord):
    TYPE: ClassVar[str] = "eval"
    step: int | None = _field("steps done at the evaluation", required=True, page=True)
    epoch: int | None = _field("epoch evaluated, from 1", required=True, page=True)
    total_steps: int | None = _field("steps of the whole run", required=True, page=True)
    eval_loss: float | None = _field("average eval loss", required=True, page=True)
    eval_loss_text_ce: float | None = _field("average eval text cross-entropy", required=True)
    eval_loss_mel_ce: float | None = _field("average eval mel cross-entropy", required=True)


@dataclass(kw_only=True)
class QualityRecord(LoggedRecord):
    """Measured quality of one evaluation (utils.training.evaluation.quality_eval speaks and scores;
    best_checkpoint logs)."""

    TYPE: ClassVar[str] = "quality"
    step: int | None = _field("steps done at the evaluation", required=True, page=True)
    epoch: int | None = _field("epoch evaluated, from 1", required=True, page=True)
    rule: str | None = _field("the run's best-checkpoint rule", required=True, page=True)
    eval_loss: float | None = _field(
        "eval loss of the evaluation (or the train loss without an eval set)", required=True, page=True
    )
    files: list[str] | None = _field("the spoken clips, relative to the run folder", required=True, page=True)
    texts: list[str] | None = _field("the sentences spoken", required=True, page=True)
    cer: float | None = _field("character error rate of Whisper's transcripts", required=True, page=True)
    wer: float | None = _field("word error rate", required=True, page=True)
    similarity: float | None = _field("speaker similarity to the real clips", required=True, page=True)
    duration_ratio: float | None = _field("spoken length / real length", required=True, page=True)
    combined: float | None = _field(
        "the combined score of CER, similarity, naturalness and babble rate", required=True, page=True
    )
    naturalness: float | None = _field("mean predicted MOS (1-5) of the clips, sentences and probes", page=True)
    naturalness_real: float | None = _field("mean predicted MOS of the speaker's real clips (the ceiling)", page=True)
    babble_rate: float | None = _field("share of clips that did not stop or ran over 1.5x their length", page=True)
    probes: list[dict[str, Any]] | None = _field(
        "per probe: kind, text, file, stopped, duration_ratio, words_beyond, repeats, naturalness, ...", page=True
    )
    baseline: bool | None = _field("the base weights before any training (step 0), the run's baseline", page=True)
    baseline_from: str | None = _field("the run whose step-0 evaluation this baseline is (a shared one: a sweep's)")
    clips: list[dict[str, Any]] | None = _field("per clip: file, text, transcript and scores", required=True)
    reasons: list[str] | None = _field("why a score is missing ('cer: ...')", required=True, page=True)
    seconds: float | None = _field("seconds the evaluation took", required=True)
    loop_seconds: float | None = _field("of those, the seconds the training loop waited (generation)")
    generation_batch: int | None = _field("sentences generated together (halved after an out-of-memory error)")
    is_best: bool | None = _field("whether it became the best checkpoint", required=True, page=True)
    best_step: int | None = _field("the best checkpoint's step after it", required=True, page=True)
    voices: dict[str, Any] | None = _field(
        "several speakers: each voice's own scores, files, probes and reasons (the scores above are over them)",
        page=True,
    )
    speaker_rule: str | None = _field("how the scores above are taken over the voices: mean | worst", page=True)
    retention: dict[str, Any] | None = _field(
        "per language the run does not train: cer, wer, similarity, naturalness, babble_rate, stopped of clips, files",
        page=True,
    )


@dataclass(kw_only=True)
class StatusRecord(LoggedRecord):
    """A run-level event; its fields are also written to run.json (same names, same meaning)."""

    TYPE: ClassVar[str] = "status"
    status: str | None = _field("RunStatus value", required=True, page=True)
    run_dir: str | None = _field("the run folder", required=True, page=True)
    step: int | None = _field("steps done when it started running", page=True)
    total_steps: int | None = _field("steps of the whole run", page=True)
    finished: str | None = _field("when it ended (ISO 8601)")
    steps_done: int | None = _field("steps done when it ended")
    message: str | None = _field("how it ended, in words", page=True)
    error: str | None = _field("why it failed", page=True)
    failed_rank: int | None = _field("the rank that failed in a multi-device run")
    last_checkpoint: str | None = _field("newest checkpoint when a multi-device run failed")
    stop_checkpoint: str | None = _field("the checkpoint saved when it stopped")
    stop_reason: str | None = _field("why the run stopped itself (out of memory at one clip: what fits instead)")
    micro_batch_size: int | None = _field("clips per forward/backward after an out-of-memory error halved it")
    checkpoint_path: str | None = _field("the checkpoint ready/ was exported from")
    ready_dir: str | None = _field("ready/: the voice for inference")
    adapter_dir: str | None = _field("a LoRA run's adapter/")
    clips_failed: int | None = _field("clips the data loader could not load", page=True)
    clip_failures: list[str] | None = _field("the first of those, with why")
    timings: dict[str, Any] | None = _field("where the wall time went (as run.json's timings)")


@dataclass(kw_only=True)
class MemoryRecord(MetricRecord):
    """The training process's memory every second, in memory.jsonl beside metrics.jsonl (the page's live plot)."""

    TYPE: ClassVar[str] = "memory"
    ranks: list[dict[str, Any]] | None = _field("each rank's memory at its last step (multi-device run)")


METRIC_RECORDS: tuple[type[MetricRecord], ...] = (TrainRecord, EvalRecord, QualityRecord, StatusRecord)
_BY_TYPE = {cls.TYPE: cls for cls in (*METRIC_RECORDS, MemoryRecord)}


def metric_class(data: Mapping[str, Any]) -> type[MetricRecord] | None:
    """The class of a metrics record by its `type` (None for a type this version does not know)."""
    return _BY_TYPE.get(data.get("type")) if isinstance(data, Mapping) else None


def metric_from_json(data: Mapping[str, Any], *, strict: bool = False) -> MetricRecord | None:
    """A metrics line as its record; an unknown `type` is None (strict: RecordError)."""
    cls = metric_class(data)
    if cls is None:
        if strict:
            raise RecordError(f"unknown metrics record type {data.get('type')!r}")
        return None
    return cls.from_json(data, strict=strict)


def records_of(records: Iterable[Mapping[str, Any]], cls: type[R]) -> list[R]:
    """The records of one type among metrics lines (as JSON, e.g. followed from the file), parsed."""
    return [cls.from_json(r) for r in records if isinstance(r, Mapping) and r.get("type") == cls.TYPE]


def page_fields() -> tuple[str, ...]:
    """The fields of a metrics record the web page reads (`type` first): what the runner keeps of each line."""
    names = ["type"]
    for cls in METRIC_RECORDS:
        names += [f.name for f in cls.json_fields() if f.metadata["page"] and f.name not in names]
    return tuple(names)
