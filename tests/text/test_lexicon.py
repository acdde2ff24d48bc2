"""A voice's pronunciation lexicon: the file format and its refusals, what the text becomes, and that an entry changes
what the tiny voice is given (its tokens and its audio) from synthesize, the page, a resumed run's ready/ and the
export's notes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from utils.model.inference import current_frontend, load_voice, synthesize
from utils.model.ready import FINETUNE_FILE, LEXICON_EDITED, READY_DIR, export_ready, set_voice_lexicon
from utils.options.arguments import TrainArguments
from utils.options.input_files import check_input_files
from utils.text.frontend import TextFrontEnd
from utils.text.lexicon import Lexicon, lexicon_to_text, parse_lexicon_text, read_lexicon_file

NAMES = "# names\nSQL\tsequel\nNguyen\tWin\nUS\tU S\tcase\n[es]\nSQL\tese cu ele\n"


def test_terms_are_replaced_whole_by_case_and_language_in_one_pass():
    lexicon = parse_lexicon_text(NAMES + "[en]\nsequel server\tmy server\n", "en")
    english = TextFrontEnd("en", False, lexicon)
    assert english.apply("SQL, sql and MySQL for Mr  Nguyen in the US and us") == (
        "sequel, sequel and MySQL for Mr  Win in the U S and us"
    ), "whole terms, any case but a 'case' entry; the rest of the text as it was"
    assert english.apply("sequel server") == "my server", "the longest term first"
    assert english.apply("SQL server") == "sequel server", "a respelling is not looked up again"
    assert english.for_language("es").apply("el SQL") == "el ese cu ele", "another language: its own entries"
    again = parse_lexicon_text(lexicon_to_text(lexicon, "en"), "en")
    assert sorted(map(str, again.to_records())) == sorted(map(str, lexicon.to_records())), "reads back"
    arrows = parse_lexicon_text(lexicon_to_text(lexicon, "en", " -> "), "en")
    assert arrows.to_records() == again.to_records(), "the page's arrows are the same entries"
    assert TextFrontEnd.from_dict(english.to_dict()) == english, "finetune.json keeps it whole"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("A\tB\nB\tA\n", "a loop: 'A' -> 'B' -> 'A'"),
        ("x\tx y\n", "holds its own term 'x'"),
        ("SQL\t\n", "line 1: empty respelling"),
        ("Big Data\tdata\ndata\tBig Data\n", "a loop"),
        ("ok\tfine\nSQL sequel\n", "line 2: no tab or -> in 'SQL sequel'"),
        ("[not a code]\n", "not a language section"),
        ("a\tb\tmaybe\n", "3 fields"),
        ("a -> b -> c -> d\n", "4 fields; an entry is term -> respelling"),
        ("zero\u200bwidth\tz\n", "U+200B"),
    ],
)
def test_a_bad_lexicon_is_refused_with_its_line(text, said):
    with pytest.raises(ValueError, match="lexicon") as refused:
        parse_lexicon_text(text, "en")
    assert said in str(refused.value)


def test_amharic_terms_are_found_after_normalisation_and_phoneme_respellings_kept(tmp_path):
    lexicon = parse_lexicon_text("ኢትዮጵያ\tʔitjopʼja\n", "amh")
    amharic = TextFrontEnd("amh", True, lexicon)
    spoken = amharic.apply("ኢትዮጵያ 12 ሰላም")
    assert spoken.startswith("ʔitjopʼja ") and spoken != TextFrontEnd("amh", True).apply("ኢትዮጵያ 12 ሰላም")
    assert "ʔitjopʼja" not in TextFrontEnd("amh", True).apply("ኢትዮጵያ")


def test_a_run_refuses_a_bad_lexicon_file_before_anything_starts(tmp_path):
    bad = tmp_path / "names.tsv"
    bad.write_text("SQL\tsequel\nIEEE\n", encoding="utf-8")
    arguments = TrainArguments(version="tiny", train_csv=str(tmp_path / "m.csv"), lexicon_file=str(bad))
    with pytest.raises(ValueError, match=r"names.tsv line 2: no tab or ->"):
        check_input_files(arguments)
    bad.write_bytes(b"SQL\tseq\xffuel\n")
    with pytest.raises(ValueError, match="line 1: not UTF-8"):
        read_lexicon_file(bad, "en")
    with pytest.raises(ValueError, match="lexicon_file not found"):
        check_input_files(TrainArguments(version="tiny", lexicon_file=str(tmp_path / "none.tsv")))


@pytest.fixture
def voice_copy(finished_run, tmp_path) -> Path:
    run = tmp_path / "output" / "en-lexicon"
    shutil.copytree(finished_run, run, ignore=shutil.ignore_patterns("checkpoint_*", "tensorboard"))
    return run


def test_an_entry_changes_the_tokens_and_the_audio_and_a_bad_one_changes_nothing(voice_copy):
    text = "Mister Nguyen reads."
    before = synthesize(voice_copy, text, seed=3, max_audio_tokens=12, top_k=1)
    finetune = voice_copy / READY_DIR / FINETUNE_FILE
    set_voice_lexicon(voice_copy, {"Nguyen": "Win"})
    voice = load_voice(voice_copy)
    prepared = current_frontend(voice).apply(text)
    assert prepared == "Mister Win reads.", "a saved edit applies to the loaded voice's next text"
    tokens = voice.model.tokenizer.encode
    assert tokens(prepared.lower(), "en") != tokens(text.lower(), "en")
    after = synthesize(voice_copy, text, seed=3, max_audio_tokens=12, top_k=1)
    assert before.wav.shape != after.wav.shape or not np.array_equal(before.wav, after.wav)
    saved = finetune.read_bytes()
    with pytest.raises(ValueError, match="a loop"):
        set_voice_lexicon(voice_copy, {"Win": "Nguyen", "Nguyen": "Win"})
    assert finetune.read_bytes() == saved, "a refused lexicon writes nothing"
    assert set_voice_lexicon(voice_copy, None) == Lexicon()
    assert "lexicon" not in json.loads(finetune.read_text())["text_frontend"]


def test_a_lexicon_set_on_the_voice_survives_its_run_rewriting_ready(voice_copy):
    set_voice_lexicon(voice_copy, {"SQL": "sequel"})
    ready = voice_copy / READY_DIR
    run_info = {**json.loads((ready / FINETUNE_FILE).read_text()), "text_frontend": {"language": "en"}}
    run_info.pop(LEXICON_EDITED)
    export_ready(
        voice_copy,
        voice_copy / "best_model.pth",
        config=json.loads((ready / "config.json").read_text()),
        vocab_path=voice_copy / "vocab.json",
        speakers_path=None,
        reference_wav=voice_copy / "reference.wav",
        finetune_info=run_info,  # what a resumed run writes: the run's own front end, without the edit
    )
    info = json.loads((ready / FINETUNE_FILE).read_text())
    assert info["text_frontend"]["lexicon"] == [{"term": "SQL", "respelling": "sequel", "language": "en"}]
    assert info[LEXICON_EDITED]


def test_the_page_saves_previews_and_refuses_with_the_line(voice_copy):
    import gradio as gr

    from utils.training.process.runner import TrainingRunner
    from webui.context import UIContext
    from webui.lexicon_view import lexicon_loaded, lexicon_preview, lexicon_saved

    output = voice_copy.parent
    ctx = UIContext(output_dir=output, runner=TrainingRunner(output), data_dirs=())
    lines, summary = lexicon_saved(ctx, voice_copy.name, "", "SQL -> sequel\n<b>x</b>\tex\n")
    assert lines["value"] == "SQL -> sequel\n<b>x</b> -> ex\n" and "2 entries" in summary, "as typed, tabs too"
    assert lexicon_loaded(ctx, voice_copy.name, "")[0]["value"] == lines["value"]
    preview = lexicon_preview(ctx, voice_copy.name, "", lines["value"], "SQL and <b>x</b>", "en")
    assert preview == "**The model reads**: sequel and ex"
    assert "&lt;b&gt;" in lexicon_preview(ctx, voice_copy.name, "", "", "<b>x</b>", "en"), "shown escaped"
    with pytest.raises(gr.Error, match="lexicon line 1: empty respelling"):
        lexicon_saved(ctx, voice_copy.name, "", "SQL\t \n")
    with pytest.raises(gr.Error, match="outside"):
        lexicon_saved(ctx, "/etc", "", "SQL\tsequel\n")
    assert len(read_lexicon_from(voice_copy)) == 2, "refusals changed nothing"


def read_lexicon_from(run: Path) -> Lexicon:
    from utils.model.ready import read_voice_frontend

    return read_voice_frontend(run / READY_DIR).lexicon


def test_the_export_says_the_lexicon_does_not_carry_over(voice_copy, tmp_path):
    from utils.model.export_profiles import export_voice

    set_voice_lexicon(voice_copy, {"SQL": "sequel"})
    exported = export_voice(voice_copy, "coqui", tmp_path / "dest", name="Lex")
    (note,) = [n for n in exported.not_carried if "lexicon" in n]
    assert "1 entries: SQL -> sequel" in note and "write the respellings into the text" in note
