"""Text from a file, a path or a user, made safe to show on the page: the one escaping helper.

Gradio renders Markdown (and the HTML in it) in gr.Markdown and HTML in error pop-ups, and a browser lays
text out by the Unicode bidirectional rules. So a CSV named `x<img src=x onerror=...>.csv` would become an
image, a first line `[click](https://...)` a link, a zero-width space nothing at all, and a right-to-left
override (U+202E) in a transcript would reverse the rest of the message. `shown` turns such text into what
it literally is: markup escaped, and every invisible or layout-changing character written as `[U+XXXX]`.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any, Literal

import gradio as gr
import pandas as pd

# Control, format (zero-width, bidirectional), separator, private-use and unassigned-surrogate characters.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>=:])")
_KEPT = {"\n", "\t"}


def _visible_char(char: str, keep_newlines: bool) -> str:
    if char in _KEPT and (keep_newlines or char == "\t"):
        return char
    if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
        return f"[U+{ord(char):04X}]"
    return char


def shown(value: Any, as_: Literal["markdown", "html", "plain"] = "markdown", *, keep_newlines: bool = False) -> str:
    """`value` as text to put on the page, in the markup of the place it goes to:

    - "markdown" (gr.Markdown, a message built from data): HTML escaped, every Markdown character escaped
      (no link, emphasis, table or heading can come from data), invisible characters made visible;
    - "html" (a gr.Error pop-up, an HTML component): HTML escaped, invisible characters made visible;
    - "plain" (a table cell, a label, a textbox): invisible characters made visible.

    Line breaks are kept (as Markdown line breaks) with `keep_newlines`, else shown as [U+000A]."""
    text = "".join(_visible_char(char, keep_newlines) for char in str(value))
    if as_ == "plain":
        return text
    text = html.escape(text, quote=False)
    if as_ == "html":
        return text.replace("\n", "<br>") if keep_newlines else text
    # Every ASCII punctuation Markdown gives a meaning to, ':' and '.' too (they start "https://" and "www."
    # autolinks); the entities above hold only '&', letters and ';', which need no escape.
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return text.replace("\n", "  \n") if keep_newlines else text


def shown_cells(table: pd.DataFrame) -> pd.DataFrame:
    """A table for a gr.Dataframe (which shows cells as plain text) with every text cell `shown` as plain."""
    return table.apply(lambda column: column.map(lambda v: shown(v, "plain") if isinstance(v, str) else v))


def page_error(message: Any) -> gr.Error:
    """A gr.Error whose message (an exception's text, which names files and paths) shows as text."""
    return gr.Error(shown(message, "html"))
