"""Hostile metadata CSVs (built here): each gets an exact, clear outcome, and the user's files stay byte-identical."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import digests, write_clip
from utils.data.validation import validate_dataset

N = 8


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """N short clips under wavs/, as a user's dataset folder."""
    for i in range(N):
        write_clip(tmp_path / "wavs" / f"c{i}.wav", 1.5, i)
    return tmp_path


def check(folder: Path, content: str | bytes, name: str = "m.csv", **options):
    """Write the CSV, validate it, prove nothing of the user's changed; the report."""
    path = folder / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    before = digests(folder)
    report = validate_dataset(path, **options)
    assert digests(folder) == before, "validation changed the user's files"
    assert report.ok or report.file_errors, "a dataset that is not ready must say why"
    return report


def by_line(report) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for p in report.problems:
        found.setdefault(p.line, []).append(f"{p.severity}: {p.reason}")
    return found


def texts(report) -> dict[int, str]:
    return {row.line: row.text for split in ("train", "eval") for row, _ in report.iter_usable(split)}


def rows(lines: list[str], header: str = "audio_file|text|speaker_name", end: str = "\n") -> str:
    return end.join([header, *lines]) + end


# --- more fields than the layout ------------------------------------------------------------------------------


def test_extra_trailing_columns_in_a_pipe_file_are_errors_not_merged_into_the_text(folder):
    report = check(folder, rows([f"wavs/c{i}.wav|TEXT {i}|spk|extra|more" for i in range(N)]))
    assert (report.rows_read, report.rows_usable) == (N, 0)
    assert by_line(report)[2] == [
        "error: Row has 5 fields, the header has 3 (audio_file|text|speaker_name). Remove the "
        "extra | separators: the coqui format has no quoting, so a | cannot be part of the "
        "text."
    ]
    assert sorted(by_line(report)) == [0, *range(2, N + 2)]
    assert report.file_errors[0].reason == "None of the 8 rows is usable: each one's reason is listed by line."


def test_pipe_file_with_a_two_column_header_and_a_third_field_says_to_name_the_speaker(folder):
    report = check(folder, rows(["wavs/c0.wav|one|spk", "wavs/c1.wav|two", "wavs/c2.wav|three"], "audio_file|text"))
    assert report.rows_usable == 2
    assert by_line(report)[2] == [
        "error: Row has 3 fields, the header has 2 (audio_file|text). Remove the extra | "
        "separators: the coqui format has no quoting, so a | cannot be part of the text; if "
        "the last field is the speaker, add speaker_name to the header."
    ]


def test_headerless_pipe_row_with_four_fields_is_an_error(folder):
    report = check(folder, "wavs/c0.wav|one|a\nwavs/c1.wav|two|a|b\nwavs/c2.wav|three|a\n")
    assert report.rows_usable == 2 and report.rows_read == 3
    assert by_line(report)[2] == [
        "error: Row has 4 fields, the format has audio_file|text|speaker_name. Remove the "
        "extra | separators: the coqui format has no quoting, so a | cannot be part of the "
        "text."
    ]


def test_unquoted_commas_in_text_are_rejoined_and_counted_once_per_row(folder):
    report = check(
        folder, rows([f"wavs/c{i}.wav,Hello, there {i},spk" for i in range(N)], "audio_file,text,speaker_name")
    )
    assert (report.rows_read, report.rows_usable) == (N, N)
    assert report.summary().startswith("8 of 8 rows usable") and "will not be used" not in report.summary()
    assert texts(report)[2] == "Hello, there 0"
    assert by_line(report)[2] == [
        "warning: More comma (,) separators than columns (4 fields, 3 columns): the text was "
        "read as 'Hello, there 0'. Put the text in double quotes if that is wrong."
    ]
    assert "Warnings (the rows are used): 8 × More comma (,) separators than columns" in report.summary()


def test_quoted_text_followed_by_extra_fields_is_an_error(folder):
    report = check(
        folder,
        rows(
            ['wavs/c0.wav,"Hello, world",spk,extra', "wavs/c1.wav,two,spk", "wavs/c2.wav,3,spk"],
            "audio_file,text,speaker_name",
        ),
    )
    assert report.rows_usable == 2
    assert by_line(report)[2] == [
        "error: Row has 4 fields, the header has 3 (audio_file|text|speaker_name). Remove "
        "the fields after the last column, or name them in the header."
    ]


def test_tab_file_with_a_quoted_tab_inside_the_text(folder):
    report = check(
        folder, rows(['wavs/c0.wav\t"one\ttwo"\tspk', "wavs/c1.wav\tplain\tspk"], "audio_file\ttext\tspeaker_name")
    )
    assert report.rows_usable == 2 and not report.problems
    assert texts(report) == {2: "one\ttwo", 3: "plain"}


# --- quoting ------------------------------------------------------------------------------------------------


def test_unclosed_quote_on_every_row_of_a_comma_file_is_reported_row_by_row(folder):
    report = check(folder, rows([f'wavs/c{i}.wav,"Hello {i},spk' for i in range(N)], "audio_file,text,speaker_name"))
    assert (report.rows_read, report.rows_usable) == (N, 0)
    found = by_line(report)
    assert found[2] == [
        "error: A double quote opened on line 2 is never closed (still open at line 3, which starts a "
        'new row). Close it, or write a quote inside a quoted text as "".'
    ]
    assert "still open at the end of the file" in found[9][0]
    assert [p.audio_file for p in report.problems if p.line] == [f"wavs/c{i}.wav" for i in range(N)]


def test_one_unclosed_quote_does_not_swallow_the_rows_after_it(folder):
    lines = ["wavs/c0.wav,fine,spk", 'wavs/c1.wav,"oops,spk', "wavs/c2.wav,after,spk", "wavs/c3.wav,last,spk"]
    report = check(folder, rows(lines, "audio_file,text,speaker_name"))
    assert (report.rows_read, report.rows_usable) == (4, 3)
    assert sorted(by_line(report)) == [3] and "opened on line 3 is never closed" in by_line(report)[3][0]
    assert texts(report) == {2: "fine", 4: "after", 5: "last"}


def test_a_quoted_cell_open_for_too_many_lines_is_an_unclosed_quote(folder):
    prose = "\n".join(f"words {k}" for k in range(25))
    report = check(
        folder,
        rows([f'wavs/c0.wav,"{prose}', "wavs/c1.wav,ok,spk", "wavs/c2.wav,ok too,spk"], "audio_file,text,speaker_name"),
    )
    assert "still open 20 lines later" in by_line(report)[2][0]
    assert report.rows_usable == 2 and texts(report) == {2 + 25: "ok", 3 + 25: "ok too"}


def test_text_after_a_closing_quote_is_an_error_not_a_silent_merge(folder):
    report = check(
        folder,
        rows(
            ['wavs/c0.wav,"Hi" she said,spk', "wavs/c1.wav,ok,spk", "wavs/c2.wav,fine,spk"],
            "audio_file,text,speaker_name",
        ),
    )
    assert by_line(report)[2] == [
        "error: Text continues after a closing double quote on line 2: a field that starts "
        'with " must end with it; write a quote inside it as "".'
    ]
    assert report.rows_usable == 2


def test_doubled_quotes_and_spaces_after_commas(folder):
    report = check(
        folder,
        rows(
            ['wavs/c0.wav, "He said ""hi, you""", spk', 'wavs/c1.wav,She said "no",spk'], "audio_file,text,speaker_name"
        ),
    )
    assert not report.problems and texts(report) == {2: 'He said "hi, you"', 3: 'She said "no"'}


def test_quotes_are_ordinary_text_in_pipe_files(folder):
    report = check(folder, rows(['wavs/c0.wav|"Hi," she said|spk', 'wavs/c1.wav|an "unclosed quote|spk']))
    assert not report.problems and texts(report) == {2: '"Hi," she said', 3: 'an "unclosed quote'}


def test_a_pipe_file_with_every_field_in_double_quotes_is_unquoted_by_the_csv_rules(folder):
    """Issue 17, silently wrong: the literal quotes stayed in every text (and the speaker)."""
    lines = [f'"wavs/c{i}.wav"|"Text ""{i}"" here"|"spk"' for i in range(N)]
    report = check(folder, rows(lines, header='"audio_file"|"text"|"speaker_name"'))
    assert report.rows_usable == N and not report.errors
    assert texts(report) == {i + 2: f'Text "{i}" here' for i in range(N)}
    speakers = {row.speaker_name for split in ("train", "eval") for row, _ in report.iter_usable(split)}
    assert speakers == {"spk"}
    assert any("read by the CSV rules" in note for note in report.notes), "the guess is said"


def test_a_one_column_csv_of_audio_paths_says_it_has_no_texts(folder):
    """Issue 17, unclear: reported as one row "spanning lines 2-9", which misleads."""
    paths = [f"wavs/c{i}.wav" for i in range(N)]
    report = check(folder, rows(paths))
    assert report.rows_usable == 0 and "spanning" not in report.summary() and "spans" not in report.summary()
    assert sorted(line for line in by_line(report) if line) == list(range(2, N + 2)), "one row per line"
    assert by_line(report)[2] == [
        "error: Only an audio path, no text: write the row as audio_file|text|speaker_name with the clip's transcript."
    ]
    for header in ([], ["audio_file"]):
        report = check(folder, "\n".join([*header, *paths]) + "\n", name="paths.csv")
        assert [p.reason for p in report.file_errors][0].startswith(
            "The CSV has one column: audio paths without their texts (guessed from its first lines)."
        )


# --- rows across lines --------------------------------------------------------------------------------------


def test_excel_multi_line_cells_keep_their_whole_text(folder):
    content = (
        'audio_file,text,speaker_name\r\nwavs/c0.wav,"first line\r\nsecond line",spk\r\n'
        'wavs/c1.wav,"one\r\ntwo\r\nthree",spk\r\nwavs/c2.wav,plain,spk\r\nwavs/none.wav,gone,spk\r\n'
    )
    report = check(folder, content)
    assert (report.rows_read, report.rows_usable) == (4, 3)
    assert texts(report) == {2: "first line second line", 4: "one two three", 7: "plain"}
    found = by_line(report)
    assert found[2] == [
        "warning: Text spans lines 2-3 (a line break inside a quoted cell): read with the line breaks as spaces."
    ]
    assert "Text spans lines 4-6" in found[4][0] and "Audio not found" in found[8][0]


def test_pipe_text_broken_onto_a_line_without_separator_is_one_error_row(folder):
    report = check(folder, rows(["wavs/c0.wav|one and", "the rest|a", "wavs/c1.wav|two|a", "wavs/c2.wav|three|a"]))
    assert (report.rows_read, report.rows_usable) == (3, 2)
    assert by_line(report)[2] == [
        "error: Row spans lines 2-3: line 3 does not start with an audio file, so the text "
        "holds a line break. Put each row on one line."
    ]


def test_pipe_text_broken_onto_lines_without_any_separator(folder):
    report = check(folder, rows(["wavs/c0.wav|one|a", "continued", "and more", "wavs/c1.wav|two|a", "wavs/c2.wav|3|a"]))
    assert (report.rows_read, report.rows_usable) == (3, 2)
    assert by_line(report)[2] == [
        "error: Row spans lines 2-4: line 3 has no pipe (|) separator, so the text holds a "
        "line break. Put each row on one line."
    ]


def test_rows_of_only_commas_are_blank_lines(folder):
    report = check(
        folder, rows(["wavs/c0.wav,one,a", ",,", "wavs/c1.wav,two,a", " , , "], "audio_file,text,speaker_name")
    )
    assert (report.rows_read, report.rows_usable) == (2, 2) and not report.problems


# --- encodings ----------------------------------------------------------------------------------------------


def test_one_cp1252_line_in_a_utf8_file_is_an_error_and_nothing_is_mojibaked(folder):
    content = (
        rows(["wavs/c0.wav|Café|a"]).encode()
        + "wavs/c1.wav|Crème|a\n".encode("cp1252")
        + "wavs/c2.wav|naïve|a\nwavs/c3.wav|plain|a\n".encode()
    )
    report = check(folder, content)
    assert texts(report) == {2: "Café", 4: "naïve", 5: "plain"}
    assert by_line(report)[3] == [
        "error: Text is not UTF-8: line 3 has byte 0xE8 after 'wavs/c1.wav|Cr' (it looks "
        "like Windows-1252 while the rest of the file is UTF-8). Re-type the accented "
        "characters or save the whole file as UTF-8; the line was not guessed at."
    ]
    assert any(
        "1 line(s) are not valid UTF-8 although the rest of the file is (the first is line 3)" in n
        for n in report.notes
    )


def test_whole_cp1252_file_with_an_undefined_byte(folder):
    content = rows(["wavs/c0.wav|café|a", "wavs/c2.wav|plain|a"]).encode("cp1252") + b"wavs/c1.wav|bad \x81 byte|a\n"
    report = check(folder, content)
    assert texts(report) == {2: "café", 3: "plain"}
    assert "File is not UTF-8" in by_line(report)[2][0] and "Windows-1252" in by_line(report)[2][0]
    assert by_line(report)[4][0].startswith(
        "error: Text is not Windows-1252: line 4 has byte 0x81 after 'wavs/c1.wav|bad '"
    )


def test_utf16_file_is_refused_with_what_to_do(folder):
    report = check(folder, rows(["wavs/c0.wav|one|a", "wavs/c1.wav|two|a"]).encode("utf-16"))
    assert not report.ok and report.rows_read == 0
    assert [p.reason for p in report.file_errors] == [
        "The file is UTF-16 (Excel's 'Unicode Text'); save it as 'CSV UTF-8' or as UTF-8 text."
    ]


def test_nul_bytes_in_a_row_are_an_error(folder):
    report = check(folder, rows(["wavs/c0.wav|one|a", "wavs/c1.wav|t\x00w\x00o|a", "wavs/c2.wav|three|a"]))
    assert report.rows_usable == 2
    assert by_line(report)[3] == [
        "error: Row holds NUL bytes: the file is binary or UTF-16 in part. Save it as UTF-8 text."
    ]


def test_bom_with_comma_header_and_crlf(folder):
    report = check(
        folder,
        b"\xef\xbb\xbf"
        + rows(["wavs/c0.wav,one,a", "wavs/c1.wav,two,a"], "audio_file,text,speaker_name", "\r\n").encode(),
    )
    assert report.ok and texts(report) == {2: "one", 3: "two"} and any("byte order mark" in n for n in report.notes)


# --- line endings and empty files ---------------------------------------------------------------------------


def test_cr_only_line_endings_are_read_with_line_numbers(folder):
    report = check(folder, rows(["wavs/c0.wav|one|a", "wavs/c1.wav|two|a", "wavs/none.wav|three|a"], end="\r"))
    assert (report.rows_read, report.rows_usable) == (3, 2)
    assert sorted(by_line(report)) == [4] and "Audio not found" in by_line(report)[4][0]
    assert any("carriage return only" in n for n in report.notes)


def test_mixed_line_endings_count_lines_as_an_editor_does(folder):
    report = check(folder, "audio_file|text|speaker_name\rwavs/c0.wav|one|a\r\nwavs/c1.wav|two|a\nwavs/x.wav|x|a\r")
    assert sorted(by_line(report)) == [4] and report.rows_usable == 2


def test_header_only_file_says_it_has_no_rows(folder):
    report = check(folder, "audio_file|text|speaker_name\n")
    assert not report.ok and report.rows_read == 0
    assert report.summary().splitlines()[0] == (
        "ERROR: m.csv has a header line but no data rows: add one row per clip (audio_file|text|speaker_name)."
    )


def test_file_of_blank_lines_is_empty(folder):
    report = check(folder, "\n\r\n   \n")
    assert [p.reason for p in report.file_errors] == ["The CSV is empty."]


def test_eval_csv_without_a_usable_row_says_so(folder):
    (folder / "train.csv").write_text(rows([f"wavs/c{i}.wav|text {i}|a" for i in range(4)]))
    report = check(folder, rows(["wavs/missing.wav|gone|a"]), name="eval.csv")  # as a train CSV: nothing usable
    assert report.file_errors[0].reason.startswith("None of the 1 rows is usable")
    before = digests(folder)
    both = validate_dataset(folder / "train.csv", folder / "eval.csv")
    assert digests(folder) == before and not both.ok and both.train_count == 4
    assert [p.reason for p in both.file_errors] == [
        "No usable row in the eval CSV eval.csv: evaluation needs at least "
        "one (or leave eval_csv empty to hold out 15% of the train rows)."
    ]


def test_ljspeech_row_with_an_extra_field_is_an_error(folder):
    for i in range(3):
        write_clip(folder / "wavs" / f"LJ{i}.wav", 1.5, i)
    report = check(folder, "LJ0|Text one|Text one\nLJ1|Text|two|Text two\nLJ2|Three|\n", name="metadata.csv")
    assert report.rows_usable == 2 and any("LJSpeech" in n for n in report.notes)
    assert by_line(report)[2] == [
        "error: Row has 4 fields; LJSpeech rows are `id|text|normalized text` and a | cannot be part of the text."
    ]


# --- option errors: ValueError before anything is read ------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        ({"language": "klingon"}, "Language code 'klingon' is not a language code"),
        ({"language": None}, "Language code None is not a language code"),
        ({"max_audio_length": 0}, "max_audio_length is 0 samples; it must be at least 22050"),
        ({"max_audio_length": float("nan")}, "max_audio_length is nan samples"),
        ({"max_audio_length": True}, "max_audio_length is True samples"),
        ({"audio_check": "deep"}, "audio_check is 'deep'; it must be 'auto', 'full' or 'header'"),
    ],
)
def test_option_errors_are_raised_before_any_file_is_read(tmp_path, options, message):
    # The CSV does not even exist: the option is what the error is about.
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        validate_dataset(tmp_path / "not-there.csv", **options)


def test_unreadable_csv_is_a_value_error(folder, monkeypatch):
    """What a file without read permission raises (injected: CI runs as root, which reads whatever the mode)."""
    import builtins
    import errno

    import utils.data.validation as validation

    path = folder / "m.csv"
    path.write_text(rows(["wavs/c0.wav|one|a"]))

    def denied(file, *args, **kwargs):
        if Path(file) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr(validation, "open", denied, raising=False)
    with pytest.raises(ValueError, match="cannot be read .*Permission denied.*check its permissions"):
        validate_dataset(path)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max-audio-length", "0"], "error: max_audio_length is 0 samples; it must be at least 22050"),
        (["--language", "klingon"], "error: Language code 'klingon' is not a language code"),
    ],
)
def test_cli_validate_prints_one_error_line(folder, capsys, argv, message):
    from utils.cli import main

    (folder / "m.csv").write_text(rows([f"wavs/c{i}.wav|text {i}|a" for i in range(3)]))
    assert main(["validate", "--train-csv", str(folder / "m.csv"), *argv]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(message) and len(err.strip().splitlines()) == 1 and not out


def test_an_undoubled_quote_inside_a_quoted_pipe_cell_is_an_error_not_trained_with_its_quotes(folder):
    """Issue 30, silent: in a pipe file that quotes its fields, a row whose quoted text holds an undoubled quote
    kept its literal outer quotes in the text that was trained."""
    lines = [f'"wavs/c{i}.wav"|"Text {i} here"|"spk"' for i in range(N)]
    lines[3] = '"wavs/c3.wav"|"He said "hi" to me"|"spk"'
    report = check(folder, rows(lines, header='"audio_file"|"text"|"speaker_name"'))
    assert report.rows_usable == N - 1
    assert by_line(report)[5] == [
        'error: The text is in double quotes with a quote inside it that is not doubled (\'"He said "hi" to me"\'), '
        'while the file writes its fields in double quotes: write a quote inside a quoted text as "" (or the text '
        "without the outer quotes). The row was not guessed at."
    ]
    assert all(not text.startswith('"') for text in texts(report).values()), texts(report)
    # Only the text quoted, the header and the other rows plain: the row itself shows the quoting.
    report = check(folder, rows(['wavs/c0.wav|"He said "hi" to me"|"spk"', "wavs/c1.wav|plain|spk"]))
    assert report.rows_usable == 1 and "not doubled" in by_line(report)[2][0]


def test_a_pipe_text_that_begins_and_ends_a_quote_in_an_unquoted_file_is_kept_with_a_word(folder):
    report = check(folder, rows(['wavs/c0.wav|"Hi," she said, "bye"|spk', "wavs/c1.wav|plain|spk"]))
    assert texts(report)[2] == '"Hi," she said, "bye"', "the coqui format has no quoting: quotes are text"
    assert by_line(report)[2][0].startswith("warning: The text starts and ends with a double quote but is not quoted")
