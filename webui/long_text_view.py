"""The Test tab's report of a spoken text: one line over it (pieces, sentences cut, retried, still failing; what was
checked) and a row per piece (utils.model.long_text.SentenceReport), every text shown escaped."""

from __future__ import annotations

from typing import Any

from utils.model.long_text import summary
from utils.quality import sentence_check as check
from utils.text.visible import clipped
from webui.shown import shown

COLUMNS = ("#", "Sentence", "Tries", "Kept", "Seconds", "CER", "Stopped", "Length", "Retried because", "Still fails")
# The table names each failed check in a word or two (the measures are in its columns; the CLI's report and
# `speak --json` keep the long form), and the line under it says what each means.
SHORT = (  # the first match names a failure: "words after the text (over 1)" is not "too long"
    ("did not stop", "no stop"),
    ("CER", "CER"),
    ("repeated", "repeats"),
    ("words after", "words after"),
    ("(over", "too long"),
    ("(under", "too short"),
)
LEGEND = (
    f"no stop: the model did not end the sentence before its token cap · too long / too short: over "
    f"{check.MAX_DURATION_RATIO:g} / under {check.MIN_DURATION_RATIO:g} times the speaker's length · CER: over "
    f"{check.MAX_CER:g} · repeats: a word said again · words after: more than {check.MAX_WORDS_BEYOND} after the text"
)


def _short(failures: Any) -> str:
    """A try's failed checks, a word or two each ("no stop, too long, CER")."""
    names = []
    for failure in failures:
        names.append(next((name for start, name in SHORT if start in failure), failure))
    return ", ".join(names)


MAX_ROWS = 300  # a page of rows; the CLI's `speak --json` gives every piece
TEXT_CHARS = 80


def _row(report: Any) -> list[str]:
    kept = report.kept
    text = " ".join(report.text.split())
    where = f"{report.sentence}" if report.parts == 1 else f"{report.sentence} ({report.part}/{report.parts})"
    return [
        str(report.index),
        f"{where}: {clipped(text, TEXT_CHARS)}" + (f" [{report.cut}]" if report.cut else ""),
        str(report.tries),
        str(kept.number),
        f"{report.seconds:.2f}",
        "-" if kept.cer is None else f"{kept.cer:.2f}",
        "yes" if kept.stopped else "no",
        f"{kept.duration_ratio:.2f}x",
        "; ".join(f"{a.number}: {_short(a.failures)}" for a in report.attempts[:-1]) or "-",
        _short(report.failing) or "-",
    ]


def report_markdown(speech: Any) -> str:
    """The report of a synthesize result (a Speech) as Markdown: its summary, what was checked, and the table."""
    sentences = list(getattr(speech, "sentences", None) or [])
    if not sentences:
        return ""
    lines = [f"**{shown(summary(sentences))}**  ", shown(speech.checks), ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(shown(cell) for cell in _row(report)) + " |" for report in sentences[:MAX_ROWS]]
    lines += ["", shown(LEGEND)]
    if len(sentences) > MAX_ROWS:
        lines += ["", f"{len(sentences) - MAX_ROWS} more pieces not listed (the CLI's `speak --json` lists them all)."]
    return "\n".join(lines)
