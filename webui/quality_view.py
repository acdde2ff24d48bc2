"""Measured quality as the page shows it (pure functions, no Gradio): the score table per evaluation, the run's
best checkpoint, the clips of an evaluation as decoded audio, the dataset check table and its edits."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from utils.audio.io import AudioError, load_audio
from utils.training.evaluation.quality_eval import EVALS_DIR
from utils.training.recording.records import QualityRecord, records_of
from utils.training.recording.run_record import load_run
from webui.shown import shown, shown_cells

SCORES = (
    ("cer", "CER"),
    ("wer", "WER"),
    ("similarity", "similarity"),
    ("naturalness", "naturalness"),
    ("babble_rate", "babble"),
    ("duration_ratio", "duration ratio"),
    ("combined", "combined"),
)
QUALITY_COLUMNS = ["step", *(label for _, label in SCORES), "best", "notes"]
# Short headers on one line, numbers at a glance; the notes take the rest.
QUALITY_COLUMN_WIDTHS = ["56px", "72px", "72px", "140px", "120px", "72px", "140px", "120px", "56px", "360px"]
CHECK_COLUMNS = [
    "exclude",
    "text",
    "audio_file",
    "line",
    "CER",
    "MOS",
    "transcript",
    "problems",
    "measures",
]
CHECK_DATATYPES = ["bool", "str", "str", "number", "number", "number", "str", "str", "str"]
# The texts share most of the width, the short numbers a fixed one: the table fits a 1400 px window.
CHECK_COLUMN_WIDTHS = ["112px", "18%", "11%", "80px", "80px", "80px", "14%", "14%", "13%"]
COMPARISON_COLUMNS = ("model", "cer", "wer", "similarity", "seconds", "transcript", "note")
COMPARISON_COLUMN_WIDTHS = ["120px", "80px", "80px", "112px", "96px", "30%", "30%"]
PLAYED_SECONDS = 15  # what a player gets of a clip


def short_reason(reason: str) -> str:
    """'cer: Whisper model 'small' is not available: download failed...' -> 'Whisper model 'small' is not available'."""
    text = reason.split(":", 1)[1].strip() if ":" in reason else reason.strip()
    return text.split(": ", 1)[0][:90]


def _cell(value: float | None, name: str, reasons: list[str]) -> str:
    if value is not None and math.isfinite(value):
        return f"{value:.3f}"
    if name == "combined":
        return "— needs CER and similarity"
    if name == "babble_rate":
        return "—"
    # The WER comes from the same transcript as the CER: the same reason.
    why = next((r for r in reasons if r.startswith(f"{'cer' if name == 'wer' else name}:")), "")
    return f"— {short_reason(why)}" if why else "—"


def quality_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per evaluation, newest first: the scores (an empty score says why), the best one (the newest that
    became the best: an earlier best was overtaken), "base" on the baseline (the starting weights at step 0), and
    the reasons in full."""
    rows = []
    records = records_of(records, QualityRecord)
    best = next((r for r in reversed(records) if r.is_best), None)
    for record in reversed(records):  # newest first; each evaluation's voices and retention languages under it
        reasons = list(record.reasons or [])
        over = f"over the voices ({record.speaker_rule}); " if record.voices else ""
        rows.append(
            {
                "step": int(record.step),
                **{label: _cell(getattr(record, key), key, reasons) for key, label in SCORES},
                "best": "★" if record is best else ("base" if record.baseline else ""),
                "notes": over + "; ".join(reasons),
            }
        )
        rows += _part_rows(record)
    return shown_cells(pd.DataFrame(rows, columns=QUALITY_COLUMNS))


PART_PREFIXES = ("voice ", "retention ")  # the notes of a row that is a part of the evaluation above it


def evaluation_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of quality_frame that are evaluations (not a voice's or a retention language's row under one)."""
    return frame[~frame["notes"].astype(str).str.startswith(PART_PREFIXES)]


def _part_rows(record: QualityRecord) -> list[dict[str, Any]]:
    """Below an evaluation's row: each voice's own scores, and each language the run does not train (its retention
    probe)."""
    parts = [(f"voice {name}", scores) for name, scores in (record.voices or {}).items()]
    parts += [(f"retention {language}", scores) for language, scores in (record.retention or {}).items()]
    rows = []
    for label, scores in parts:
        reasons = list(scores.get("reasons") or [])
        rows.append(
            {
                "step": int(record.step),
                **{name: _cell(scores.get(key), key, reasons) if key in scores else "" for key, name in SCORES},
                "best": "",
                "notes": f"{label}: " + "; ".join(reasons),
            }
        )
    return rows


def best_markdown(run_dir: str | Path | None) -> str:
    """The run's rule, its best checkpoint and why; the early stop when there was one."""
    record = load_run(run_dir) if run_dir else None
    best = record.best if record else None
    if best is None:
        rule = ((record.arguments if record else None) or {}).get("best_by")
        return f"**Best checkpoint** by {rule}: no evaluation yet." if rule else ""
    value_text = f"{best.by} {best.value:.4g}" if best.value is not None else f"{best.by} (provisional)"
    text = (
        f"**Best checkpoint** by **{shown(best.rule)}**: step {best.step} ({shown(value_text)}). "
        f"{shown(best.why or '')}"
    )
    stop = record.early_stop  # its count while the run goes; its message once it stopped the run
    return text + (f"\n\n⏹ {shown(stop.message)}" if stop and stop.stopped else "")


def evaluation_clips(run_dir: str | Path, record: dict[str, Any], count: int) -> list[tuple[str, Any]]:
    """(label, (rate, samples)) of the first `count` clips of a quality record. Only files inside the run's
    evals/ folder are read (the record names them relative to the run folder); the page gets samples, never
    a path."""
    clips = []
    scored = QualityRecord.from_json(record)
    texts = scored.texts or []
    for index, name in enumerate((scored.files or [])[:count]):
        audio = read_eval_clip(run_dir, name)
        if audio is None:
            continue
        text = texts[index] if index < len(texts) else ""
        clips.append((shown(f"step {scored.step} · {text[:70]}", "plain"), audio))
    return clips


def read_eval_clip(run_dir: str | Path, name: Any) -> tuple[int, Any] | None:
    """(rate, samples) of the first PLAYED_SECONDS of a clip a record names (relative to the run folder), only when
    it lies inside the run's evals/ folder and decodes; None otherwise."""
    evals = (Path(run_dir) / EVALS_DIR).resolve()
    path = (Path(run_dir) / str(name)).resolve()
    if evals not in path.parents:
        return None
    try:
        wav, rate = load_audio(path, None, seconds=PLAYED_SECONDS)
    except AudioError:
        return None
    return rate, wav


def _number(value: float | None, scale: float = 1.0, digits: int = 1) -> float | None:
    return None if value is None else round(value * scale, digits)


def measures_text(m: Any) -> str:
    """A row's audio measures in one cell: '-20.1 LUFS · SNR 12.0 dB · clipped 0.000% · silence 0.10 / 0.20 s'."""

    def value(number: float | None, unit: str = "") -> str:
        return "?" if number is None else f"{number}{unit}"

    return (
        f"{value(_number(m.loudness_lufs))} LUFS · SNR {value(_number(m.snr_db))} dB · "
        f"clipped {value(_number(m.clipping_ratio, 100, 3), '%')} · silence "
        f"{value(_number(m.leading_silence_s, digits=2))} / {value(_number(m.trailing_silence_s, digits=2))} s"
    )


def check_frame(check: Any) -> pd.DataFrame:
    """The dataset check's flagged rows, worst first, as an editable table: tick `exclude` (ticked already for a
    clip under the naturalness threshold), edit `text` (an empty table for None). MOS: predicted naturalness."""
    rows = []
    for row in check.flagged if check is not None else []:
        m = row.measures
        rows.append(
            {
                "exclude": bool(getattr(row, "suggest_exclude", False)),
                "text": row.text,
                "audio_file": row.audio_file,
                "line": row.line,
                "CER": None if row.cer is None else round(row.cer, 3),
                "MOS": None if getattr(row, "naturalness", None) is None else round(row.naturalness, 2),
                "transcript": row.transcript or "",
                "problems": "; ".join(row.problems),
                "measures": measures_text(m),
            }
        )
    return shown_cells(pd.DataFrame(rows, columns=CHECK_COLUMNS))


def edits_from_table(table: Any, originals: dict[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """(exclude, corrections) for prepare_dataset from the edited check table: ticked rows are excluded, rows
    whose text differs from the CSV's (`originals`, by audio_file) are corrected."""
    if table is None or not originals:
        return [], {}
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)
    if frame.empty or "audio_file" not in frame:
        return [], {}
    exclude, corrections = [], {}
    for _, row in frame.iterrows():
        audio_file = str(row["audio_file"])
        if audio_file not in originals:
            continue  # not a row the check listed: ignore what the page sends
        if _ticked(row.get("exclude")):
            exclude.append(audio_file)
        elif str(row.get("text", "")).strip() != originals[audio_file].strip():
            corrections[audio_file] = str(row["text"]).strip()
    return exclude, corrections


def table_audio_files(table: Any) -> list[str]:
    """The audio_file of each row of a check table as a client sent it (any client, not only this page)."""
    if table is None:
        return []
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)
    if frame.empty or "audio_file" not in frame:
        return []
    return [str(value) for value in frame["audio_file"] if str(value).strip()]


def _ticked(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "x")
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


def comparison_frame(comparison: Any) -> pd.DataFrame:
    """The Test tab's two generations side by side: model, CER, WER, similarity, seconds, transcript, note."""
    rows = []
    for row in comparison.table():
        rows.append({**row, **{k: None if row[k] is None else round(row[k], 3) for k in ("cer", "wer", "similarity")}})
    return shown_cells(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)))
