"""Run folders: `run.json` (the call, versions, device, status) and finding runs and their files."""

from __future__ import annotations

import json
import os
import platform

from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
OPTIMIZATIONS_FILE = "optimizations.json"
DATASET_REPORT_FILE = "dataset_report.json"
DROPPED_ROWS_FILE = "dropped_rows.csv"
_PACKAGES = ("torch", "torchaudio", "torchcodec", "transformers", "coqui-tts", "coqui-tts-trainer", "tokenizers",
             "gradio", "numpy")  # fmt: skip


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def read_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    path = Path(run_dir) / RUN_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def write_run(run_dir: str | os.PathLike, record: dict[str, Any]) -> None:
    """Replace run.json atomically (the web UI reads it while training runs)."""
    path = Path(run_dir) / RUN_FILE
    partial = path.with_name(RUN_FILE + ".part")
    partial.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(partial, path)


def update_run(run_dir: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    record = read_run(run_dir)
    record.update(fields)
    write_run(run_dir, record)
    return record


def list_runs(output_dir: str | os.PathLike) -> list[Path]:
    """Run folders (those with a run.json) under `output_dir`, newest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    runs = [p.parent for p in root.glob(f"*/{RUN_FILE}")]
    return sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)


