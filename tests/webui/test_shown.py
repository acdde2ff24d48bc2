"""Text from files, paths and users shows on the page as what it is: rendered as the page renders Markdown
(CommonMark with HTML, as Gradio's gr.Markdown), no tag, no link, no invisible or reordering character."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.helpers import write_clip, write_dataset
from tests.webui.test_handlers import FORM, make_context
from utils.device.gpu import detect_gpu
from webui.dataset_handlers import validate_handler
from webui.plan_view import memory_plan_markdown
from webui.shown import shown

INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\x00-\x08\x0b-\x1f]")


def rendered(markdown: str) -> tuple[str, str]:
    """(the HTML the page gets, the text a person reads) of a Markdown message."""
    page = MarkdownIt("commonmark", {"html": True}).render(markdown)
    return page, html.unescape(re.sub(r"<[^>]+>", "", page)).strip()


def assert_shown_as_text(markdown: str) -> str:
    page, text = rendered(markdown)
    assert not re.search(r"<(img|a|script|iframe|id)\b", page), f"markup from data rendered: {page}"
    assert not INVISIBLE.search(text), f"an invisible character reached the page: {text!r}"
    return text


def check(tmp_path: Path, csv: Path, **changes):
    ctx = make_context(tmp_path)
    values = {**FORM, **changes}
    return validate_handler(
        ctx, None, str(csv), None, "", "en", values["max_seconds"], "tiny", False, progress=lambda *a, **k: None
    )


def ljspeech(folder: Path, name: str = "metadata.csv", texts: tuple[str, ...] = ("hello there", "the quick fox")):
    for i, _ in enumerate(texts):
        write_clip(folder / "wavs" / f"LJ{i:03d}.wav", 1.5, i)
    (folder / name).write_text("".join(f"LJ{i:03d}|{t}|{t}\n" for i, t in enumerate(texts)), encoding="utf-8")
    return folder / name


def test_the_helper_escapes_markup_and_shows_invisible_characters():
    _, text = rendered(shown("a <b>bold</b> [link](https://x.example) *em* | pipe\u200b\u202eend"))
    assert text == "a <b>bold</b> [link](https://x.example) *em* | pipe[U+200B][U+202E]end"
    page, text = rendered(shown("line one\nline two", keep_newlines=True))
    assert "<br" in page and text == "line one\nline two"
    assert shown("a\u200bb<", "plain") == "a[U+200B]b<" and shown("<i>", "html") == "&lt;i&gt;"


def test_ljspeech_summary_shows_wavs_id_wav_in_full(tmp_path, tiny_base):
    csv = ljspeech(tmp_path / "data")
    summary = check(tmp_path, csv)[0]
    text = assert_shown_as_text(summary)
    assert "LJSpeech format detected (id|text|normalized text, audio in wavs/<id>.wav)." in text
    assert "held out for evaluation" in text, "the rest of the summary after <id> is shown too"


def test_a_csv_named_like_an_img_tag_is_shown_as_its_name(tmp_path, tiny_base):
    name = "x<img src=x onerror=alert(1)>.csv"
    summary = check(tmp_path, ljspeech(tmp_path / "data", name))[0]
    assert f"{name}: LJSpeech format detected" in assert_shown_as_text(summary)


def test_a_markdown_link_in_a_csv_is_not_a_link(tmp_path, tiny_base):
    folder = tmp_path / "data"
    write_clip(folder / "wavs" / "c1.wav", 1.5, 1)
    (folder / "metadata.csv").write_text("[click here](https://evil.example)|x|y\nwavs/c1.wav|hello there|s\n")
    summary, problems = check(tmp_path, folder / "metadata.csv")[:2]
    text = assert_shown_as_text(summary)
    assert "Got: '[click here](https://evil.example)|x|y'" in text
    assert "[click here](https://evil.example)" in " ".join(problems["reason"])


@pytest.mark.parametrize(
    ("text", "visible"),
    [("hello there\u200b friend", "[U+200B]"), ("we train \u202ethe model on our own speech", "[U+202E]")],
)
def test_zero_width_and_bidi_characters_are_made_visible(tmp_path, tiny_base, text, visible):
    csv = write_dataset(tmp_path / "data", 4, texts=[text, "bring the book back to the library"])
    summary, problems = check(tmp_path, csv)[:2]
    shown_summary = assert_shown_as_text(summary)
    cells = " ".join(str(v) for v in problems.to_numpy().ravel())
    assert visible in shown_summary + cells, "the reader sees which character it is"
    assert not INVISIBLE.search(cells), f"an invisible character in the problems table: {cells!r}"


@pytest.mark.skipif(detect_gpu().available, reason="with a GPU, batch 'auto' is measured")
def test_estimate_with_auto_batch_shows_the_whole_message(tmp_path):
    message = memory_plan_markdown(make_context(tmp_path), {**FORM, "batch_size": "auto"})
    assert "free_bytes=<free GPU memory in bytes>" in assert_shown_as_text(message)


def test_fit_my_gpu_and_what_will_be_applied_show_a_refused_value_as_text(tmp_path):
    """Issue 19 x 21: the Fit my GPU panel and "What will be applied" echo a refused value from the form or the API."""
    from tests.webui.test_handlers import FORM
    from webui.fit_gpu_view import fit_for_form
    from webui.plan_view import plan_markdown

    hostile = "[click](https://evil.example)<img src=x onerror=alert(1)>"
    message = fit_for_form(make_context(tmp_path), {**FORM, "lora_targets": hostile}, "8 GB card")[0]
    assert_shown_as_text(message)
    assert "not known" in rendered(message)[1]
    assert_shown_as_text(plan_markdown(True, True, True, hostile, True, "adamw", False, 0))
