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
from typing import Any, Literal

import gradio as gr
import pandas as pd

from utils.text.visible import visible

# Characters with a Markdown meaning anywhere in a line (emphasis, code, links, tables, strikethrough); '<', '>'
# and '&' are HTML-escaped first. Line-start markers (headings, lists, quotes) and autolinks are handled apart,
# so that paths and sentences keep their dots, dashes and brackets readable for scripts reading the API.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_LINE_START = re.compile(r"^(\s*)(#|[-+=]|\d+[.)])", re.MULTILINE)
_AUTOLINK = re.compile(r"(?i)(\w)(://)|\b(www)(\.)")


def shown(value: Any, as_: Literal["markdown", "html", "plain"] = "markdown", *, keep_newlines: bool = False) -> str:
    """`value` as text to put on the page, in the markup of the place it goes to:

    - "markdown" (gr.Markdown, a message built from data): HTML escaped, every Markdown character escaped
      (no link, emphasis, table or heading can come from data), invisible characters made visible;
    - "html" (a gr.Error pop-up, an HTML component): HTML escaped, invisible characters made visible;
    - "plain" (a table cell, a label, a textbox): invisible characters made visible.

    Line breaks are kept (as Markdown line breaks) with `keep_newlines`, else shown as [U+000A]."""
    text = visible(value, ("\n", "\t") if keep_newlines else ("\t",))  # the invisible-character rule, shared
    if as_ == "plain":
        return text
    text = html.escape(text, quote=False)
    if as_ == "html":
        return text.replace("\n", "<br>") if keep_newlines else text
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = _LINE_START.sub(lambda m: m.group(1) + "".join("\\" + c if not c.isdigit() else c for c in m.group(2)), text)
    # "https://x" and "www.x" would become links (GFM autolinks): an escaped ':' or '.' breaks the pattern.
    text = _AUTOLINK.sub(lambda m: f"{m.group(1)}\\:" + "//" if m.group(2) else f"{m.group(3)}\\.", text)
    return text.replace("\n", "  \n") if keep_newlines else text


def shown_cells(table: pd.DataFrame) -> pd.DataFrame:
    """A table for a gr.Dataframe (which shows cells as plain text) with every text cell `shown` as plain."""
    return table.apply(lambda column: column.map(lambda v: shown(v, "plain") if isinstance(v, str) else v))


def page_error(message: Any) -> gr.Error:
    """A gr.Error whose message (an exception's text, which names files and paths) shows as text."""
    return gr.Error(shown(message, "html"))
