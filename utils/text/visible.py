"""Text from a file, a path or a user made visible for what it is: the one rule, for the page and the API alike.

A terminal, a log and a browser lay text out by the Unicode bidirectional rules and draw nothing for invisible
characters, so a right-to-left override (U+202E) in a file name reverses the rest of a message, a zero-width space
hides, and an escape sequence (U+001B) recolours a terminal. `visible` writes every control, format (zero-width,
bidirectional), line/paragraph separator, surrogate and private-use character as `[U+XXXX]`. The page escapes
markup on top of it (webui/shown.py); the Python API's messages pass through it where they leave the product:
every dataset problem (utils.data.csv_reader.Problem), a report's notes, and the errors of the public functions
(`with_visible_errors`, on utils.gpt_train and validate_dataset).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from typing import Any, TypeVar

INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
KEPT = ("\n", "\t")

F = TypeVar("F", bound=Callable[..., Any])


def visible_char(char: str, keep: tuple[str, ...] = KEPT) -> str:
    if char in keep:
        return char
    if unicodedata.category(char) in INVISIBLE_CATEGORIES:
        return f"[U+{ord(char):04X}]"
    return char


def clipped(text: Any, limit: int = 120) -> str:
    """`text` as a message may echo it: at most `limit` characters, a longer one cut with its length said (a name
    or value sent by a script can be a million characters)."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def visible(text: Any, keep: tuple[str, ...] = KEPT) -> str:
    """`text` with every invisible or layout-changing character written as [U+XXXX]; `keep` stays as it is."""
    text = str(text)
    if text.isascii() and text.isprintable():
        return text  # the common case, at no cost
    return "".join(visible_char(char, keep) for char in text)


def with_visible_errors(function: F) -> F:
    """`function`, whose exceptions leave with their message made `visible` (same exception, same traceback)."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            if len(exc.args) == 1 and isinstance(exc.args[0], str):
                exc.args = (visible(exc.args[0]),)
            raise

    return call  # type: ignore[return-value]
