"""The Test tab speaks a long text sentence by sentence (webui/test_tab.py over utils.model.long_text): Generate's
handler on the finished tiny run plays one clip and shows a row per piece with its tries, the text escaped."""

from __future__ import annotations

import html
import os
import re
import shutil

import soundfile as sf
from markdown_it import MarkdownIt

from tests.webui.test_handlers import make_context
from webui.test_tab import synthesize_handler

SAMPLING = dict(temperature=0.75, length_penalty=1.0, repetition_penalty=5.0, top_k=50, top_p=0.85, speed=1.0)


def test_generate_speaks_each_sentence_with_its_tries_and_shows_them_escaped(finished_run, tmp_path):
    ctx = make_context(tmp_path)
    shutil.copytree(finished_run / "ready", ctx.output_dir / "voice" / "ready", copy_function=os.link)
    text = "A <b>bold</b> | claim, made *twice*. " + "And then the road went on past every field " * 6 + "to the end."
    audio, download, report = synthesize_handler(
        ctx, "voice", "", None, text, "en", **SAMPLING, max_tokens=2, tries=2, progress=lambda *a, **k: None
    )
    wav, rate = sf.read(audio)
    assert audio == download and rate == 24000 and len(wav) > 0
    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(report)
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)[1:]  # after the header
    cells = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)] for row in rows]
    assert len(cells) == 3, "the first sentence, then the second cut in two (over 250 characters)"
    assert "<b>" not in page and cells[0][1] == "1: A <b>bold</b> | claim, made *twice*."
    assert cells[1][1].startswith("2 (1/2): And then") and "cut between words" in cells[1][1]
    assert all(row[2] == "2" and row[9] != "-" for row in cells), "the tiny model babbles: each piece tried twice"
    assert "CER with Whisper tiny.en" in html.unescape(page) and "3 retried; 3 still failing" in html.unescape(page)


def test_the_table_names_each_failed_check_in_a_word_and_the_legend_says_what_it_means():
    from utils.quality.sentence_check import failures
    from webui.long_text_view import LEGEND, SHORT, _short

    assert _short(failures(False, 1.9, 0.9, 2, 3)) == "no stop, too long, CER, repeats, words after"
    assert _short(failures(True, 0.2, None, None, None)) == "too short" and _short(()) == ""
    assert all(name in LEGEND for _, name in SHORT), "every short name explained"
