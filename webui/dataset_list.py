"""The Dataset tab's list of the run's datasets (utils.data.mix): each dataset checked in turn is added as a line,
`LANG[:HOW_OFTEN]=PATH`, and the Fine-tune form's Train CSV and Eval CSV become the whole list."""

from __future__ import annotations

from typing import Any

import gradio as gr

from utils.data.mix import parse_entry
from webui.form import dataset_lines
from webui.shown import page_error


def added_dataset(
    run_list: str, evals: list[str] | None, train_csv: Any, eval_csv: Any, language: str, rate: str
) -> tuple[str, list[str], str, str]:
    """The list with the checked dataset (the form's Train CSV, one path) added at `rate` ("1", "0.5", "20%"), or its
    line replaced when it is there already: (the list, its eval CSVs, the form's Train CSV and Eval CSV)."""
    checked = dataset_lines("train_csv", str(train_csv or ""))
    if not isinstance(checked, str) or not checked.strip():
        raise gr.Error("Check a dataset first: its CSV is added to the run's list.")
    rate = str(rate or "1").strip()
    try:
        entry = parse_entry(f"{language}{'' if rate == '1' else ':' + rate}={checked.strip()}", language)
    except ValueError as exc:
        raise page_error(exc) from exc
    lines = [line for line in (run_list or "").splitlines() if line.strip()]
    evals = list(evals or [])[: len(lines)] + [""] * (len(lines) - len(evals or []))
    paths = [parse_entry(line, language).csv for line in lines]
    evaluation = str(eval_csv or "").strip() if isinstance(eval_csv, str) and "\n" not in str(eval_csv) else ""
    if entry.csv in paths:
        index = paths.index(entry.csv)
        lines[index], evals[index] = entry.text(), evaluation
    else:
        lines.append(entry.text())
        evals.append(evaluation)
    text = "\n".join(lines)
    eval_text = "\n".join(e or "-" for e in evals) if any(evals) else ""
    return text, evals, text, eval_text
