"""The memory model shipped with the repository: traced fits for the published architecture, answered at once.

A full-size trace takes 30-60 s on a CPU, and Fit my GPU needs ten fits. For the published XTTS v2 architecture
(every known version: the planner uses it for each, see `architecture`) and the option sets that Fit my GPU and the
page's defaults plan (in BF16 or FP16), the fits are made once and kept in `memory_model.json` beside this file.
For each option set, each kept run end of the trace (the training step's and the eval-loss pass's, see `trace`)
holds, per tracker category, its bytes as

    (f0 + f1 s + f2 s^2) + batch x (g0 + g1 s + g2 s^2),    s = the longest clip in seconds,

fitted from six traces (batch 2 and 3, at three lengths): exact where a run end's bytes are linear in the batch
and at most quadratic in the length (attention matrices without SDPA are). A run end is kept where it is the peak
somewhere on a grid of batches and lengths; the peak of a plan is the largest kept run end at its batch and
length. Anything else (another architecture, option set or length) is traced as before.

Regenerate after a change to what a step allocates (tests/memory_plan/test_memory_model.py compares the file
with fresh traces, within 3%): `python -m utils.memory_plan.regenerate` (`utils.memory_plan.regenerate`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from utils.constants import XTTS_SAMPLE_RATE
from utils.memory_plan import tracker as t
from utils.memory_plan.trace import BatchModel, StepSettings

TABLE = Path(__file__).with_name("memory_model.json")
FORMAT = 1
# Traced lengths (seconds of the longest clip) and the range the fit answers: up to what XTTS v2's GPT can place
# (605 audio positions of 1024 samples: 28.1 s).
LENGTHS_S = (1.0, 14.0, 28.0)
RANGE_S = (0.5, 28.0)
SIZES = (2, 3)
# Where a run end must be the peak to be kept: batches and lengths a plan asks for.
BATCH_GRID = (*range(1, 17), 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 448, 512)
LENGTH_GRID = tuple(np.round(np.linspace(RANGE_S[0], RANGE_S[1], 56), 3))
# What does not change the memory, left out of an option set's key.
_NOT_MEMORY = ("batch_size", "audio_samples", "grad_accum_steps", "weight_decay", "lora_alpha", "architecture")
_NOT_SHAPE = ("gpt_start_text_token", "gpt_stop_text_token")  # token ids, not sizes


def option_key(settings: StepSettings) -> dict[str, Any]:
    """What shapes a step's memory, as plain data: the architecture's sizes and the memory-relevant options."""
    options = {k: v for k, v in asdict(replace(settings, lora_targets=())).items() if k not in _NOT_MEMORY}
    options["lora_targets"] = list(settings.lora_targets)
    options["grad_clip"] = settings.grad_clip > 0  # clipping or not; the threshold allocates nothing
    # BF16 and FP16 autocast keep the same tensors (2 bytes, the same op lists; FP16's GradScaler is scalars):
    # their traces have the same peaks, so one fit serves both.
    options["precision"] = "half" if settings.precision in ("bf16", "fp16") else settings.precision
    arch = settings.architecture
    shape = {k: v for k, v in arch.model_args if k not in _NOT_SHAPE}
    return {"model_args": shape, "audio": dict(arch.audio), **options}


def _canonical(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True)


def _quadratic(values: np.ndarray, lengths: tuple[float, ...]) -> np.ndarray:
    """Coefficients (c0, c1, c2) along a new last axis of the quadratic through `values` (first axis: lengths)."""
    vandermonde = np.vander(np.asarray(lengths, dtype=float), 3, increasing=True)
    return np.einsum("kl,l...->...k", np.linalg.inv(vandermonde), values)


def fit_option_set(settings: StepSettings, lengths: tuple[float, ...] = LENGTHS_S, progress: Any = None) -> dict:
    """One option set's entry: six traces (batch 2 and 3 at each length), fitted and reduced to the run ends that
    are the peak somewhere. Raises PlanningError when the traces at two lengths do not line up."""
    fits = []
    for seconds in lengths:
        if progress is not None:
            progress(f"tracing {seconds:g} s clips")
        fits.append(BatchModel.calibrate(replace(settings, audio_samples=round(seconds * XTTS_SAMPLE_RATE)), SIZES))
    first = fits[0]
    if any(f.phases != first.phases or f.eval_from != first.eval_from for f in fits[1:]):
        raise t.PlanningError("The traces at two lengths differ in their run ends; no length fit.")
    fixed = _quadratic(np.stack([f.fixed for f in fits]), lengths)  # (ends, categories, 3)
    per_sample = _quadratic(np.stack([f.per_sample for f in fits]), lengths)
    coefficients = np.concatenate([fixed, per_sample], axis=-1)  # (ends, categories, 6)
    eval_from = first.eval_from if first.eval_from is not None else len(first.phases)
    segments = {"train": range(eval_from), "eval": range(eval_from, len(first.phases))}
    entry: dict[str, Any] = {"checkpoint_copy_bytes": int(first.checkpoint_copy_bytes)}
    for name, rows in segments.items():
        kept = _peak_rows(coefficients[rows.start : rows.stop]) if len(rows) else []
        entry[name] = [
            {"phase": first.phases[rows.start + i], "bytes": np.rint(coefficients[rows.start + i]).astype(int).tolist()}
            for i in kept
        ]
    entry["trace_seconds"] = round(sum(f.seconds for f in fits), 1)
    return entry


def _peak_rows(coefficients: np.ndarray) -> list[int]:
    """Indices of the rows that are the largest total somewhere on BATCH_GRID x LENGTH_GRID."""
    totals = coefficients.sum(axis=1)  # (rows, 6)
    kept: set[int] = set()
    for seconds in LENGTH_GRID:
        powers = np.array([1.0, seconds, seconds**2])
        fixed, per_sample = totals[:, :3] @ powers, totals[:, 3:] @ powers
        for batch in BATCH_GRID:
            kept.add(int(np.argmax(fixed + batch * per_sample)))
    return sorted(kept)


class ShippedFit:
    """A plan's step and eval pass from the shipped table, at one length: the interface of `BatchModel`."""

    seconds = 0.0

    def __init__(self, entry: dict[str, Any], audio_samples: int) -> None:
        self.checkpoint_copy_bytes = int(entry["checkpoint_copy_bytes"])
        s = audio_samples / XTTS_SAMPLE_RATE
        powers = np.array([1.0, s, s * s])
        self._rows = {}
        for segment in ("train", "eval"):
            rows = entry.get(segment) or []
            shape = (len(rows), len(t.CATEGORIES), 6)
            coefficients = np.array([row["bytes"] for row in rows], dtype=float).reshape(shape)
            phases = [row["phase"] for row in rows]
            self._rows[segment] = (phases, coefficients[..., :3] @ powers, coefficients[..., 3:] @ powers)

    def _at(self, segment: str, batch_size: int) -> tuple[str, dict[str, int]] | None:
        phases, fixed, per_sample = self._rows[segment]
        if not phases:
            return None
        series = fixed + batch_size * per_sample
        index = int(series.sum(axis=1).argmax())
        return phases[index], dict(zip(t.CATEGORIES, (max(0, round(v)) for v in series[index]), strict=True))

    def at(self, batch_size: int) -> tuple[str, dict[str, int]]:
        found = self._at("train", batch_size)
        assert found is not None
        return found

    def at_eval(self, batch_size: int) -> dict[str, int] | None:
        found = self._at("eval", batch_size)
        return None if found is None else found[1]


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, Any]]:
    if not TABLE.is_file():
        return {}
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        return {}
    return {_canonical(item["key"]): item for item in data.get("option_sets", [])}


def reload() -> None:
    """Read the file again at the next lookup (after a regeneration)."""
    _table.cache_clear()
    _architectures.cache_clear()


@functools.lru_cache(maxsize=1)
def _architectures() -> dict[str, dict[str, Any]]:
    data = json.loads(TABLE.read_text(encoding="utf-8")) if TABLE.is_file() else {}
    if data.get("format") != FORMAT:
        return {}
    return {_canonical(item["model_args"]): item for item in data.get("architectures", [])}


def shipped_inference_parts(settings: StepSettings) -> dict[str, Any] | None:
    """The scored evaluation's traced parts of this architecture (see run_phases.inference_parts), or None."""
    return _architectures().get(_canonical(option_key(settings)["model_args"]))


def lookup(settings: StepSettings) -> ShippedFit | None:
    """The shipped fit for these settings, or None (not shipped, or a length outside the fitted range)."""
    seconds = settings.audio_samples / XTTS_SAMPLE_RATE
    if not RANGE_S[0] <= seconds <= RANGE_S[1]:
        return None
    item = _table().get(_canonical(option_key(settings)))
    return None if item is None else ShippedFit(item, settings.audio_samples)
