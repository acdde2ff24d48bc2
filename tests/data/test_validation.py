"""Dataset validation and preparation on a corpus of the CSVs users really have (built by the tests)."""

from __future__ import annotations

import csv
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers import SAMPLE_RATE, digests, synth_speech, write_clip, write_dataset
from utils.data.prepare import EVAL_FILE, LANG_FILE, TRAIN_FILE, prepare_dataset
from utils.data.validation import MAX_LISTED_PROBLEMS, validate_dataset


def make_clips(folder: Path, n: int = 4) -> list[str]:
    return [str(write_clip(folder / "wavs" / f"c{i}.wav", 1.5 + 0.3 * i, i).relative_to(folder)) for i in range(n)]


def problems_by_line(report) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for p in report.problems:
        found.setdefault(p.line, []).append(f"{p.severity}: {p.reason}")
    return found


@pytest.mark.parametrize(
    "separator, name",
    [("|", None), (",", "comma (,)"), ("\t", "tab")],
)
def test_each_separator_is_detected_and_said(tmp_path, separator, name):
    clips = make_clips(tmp_path)
    rows = [separator.join(["audio_file", "text", "speaker_name"])]
    rows += [separator.join([c, f"sentence {i}", "spk"]) for i, c in enumerate(clips)]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    report = validate_dataset(tmp_path / "m.csv")
    assert report.rows_read == 4 and report.rows_usable == 4 and not report.errors
    notes = " ".join(report.notes)
    assert (name in notes) if name else "Separator detected" not in notes


def test_comma_file_with_quoted_and_unquoted_commas(tmp_path):
    clips = make_clips(tmp_path, 3)
    text = (
        f'audio_file,text,speaker_name\n{clips[0]},"Hello, world",a\n{clips[1]},Hi, there, friend,a\n'
        f"{clips[2]},plain,a\n"
    )
    (tmp_path / "m.csv").write_text(text)
    report = validate_dataset(tmp_path / "m.csv")
    rows = {row.line: row.text for row, _ in report.iter_usable("train")} | {
        row.line: row.text for row, _ in report.iter_usable("eval")
    }
    assert rows[2] == "Hello, world" and rows[3] == "Hi, there, friend"
    assert any("separators than columns" in r for r in problems_by_line(report)[3])


def test_bom_crlf_blank_lines_and_line_numbers_as_an_editor_shows(tmp_path):
    clips = make_clips(tmp_path, 3)
    body = "audio_file|text|speaker_name\r\n\r\n" + f"{clips[0]}|one|a\r\n" + "\r\n" + f"{clips[1]}|two|a\r\n"
    body += "wavs/missing.wav|three|a\r\n"
    (tmp_path / "m.csv").write_bytes(b"\xef\xbb\xbf" + body.encode())
    report = validate_dataset(tmp_path / "m.csv")
    assert report.rows_read == 3 and report.rows_usable == 2
    assert list(problems_by_line(report)) == [6]  # header 1, blank 2, row 3, blank 4, row 5, missing row 6
    assert any("byte order mark" in n for n in report.notes)


def test_missing_header_is_reported_but_rows_are_kept(tmp_path):
    clips = make_clips(tmp_path, 3)
    (tmp_path / "m.csv").write_text("\n".join(f"{c}|text {i}|a" for i, c in enumerate(clips)) + "\n")
    report = validate_dataset(tmp_path / "m.csv")
    assert report.rows_usable == 3
    assert any("No header line" in r for r in problems_by_line(report)[1])


def test_headerless_first_line_that_is_not_a_row_is_an_error(tmp_path):
    (tmp_path / "m.csv").write_text("name;words\nfoo;bar\n")
    report = validate_dataset(tmp_path / "m.csv")
    assert not report.ok and report.rows_usable == 0
    assert "neither the header" in report.errors[0].reason


def test_ljspeech_layout(tmp_path):
    for i in range(3):
        write_clip(tmp_path / "wavs" / f"LJ001-000{i}.wav", 2.0, i)
    (tmp_path / "metadata.csv").write_text(
        "LJ001-0000|Printing, in 1820.|Printing, in eighteen twenty.\n"
        "LJ001-0001|Text two|Text two\nLJ001-0002|Text three|\n"
    )
    report = validate_dataset(tmp_path / "metadata.csv")
    assert report.rows_usable == 3 and any("LJSpeech" in n for n in report.notes)
    texts = sorted(row.text for split in ("train", "eval") for row, _ in report.iter_usable(split))
    assert texts == ["Printing, in eighteen twenty.", "Text three", "Text two"]


def test_absolute_windows_style_and_windows_drive_paths(tmp_path):
    clips = make_clips(tmp_path, 2)
    absolute = tmp_path / clips[0]
    rows = [
        "audio_file|text|speaker_name",
        f"{absolute}|absolute|a",
        f"{clips[1].replace('/', chr(92))}|backslashes|a",
        r"C:\Users\me\voice\c9.wav|drive|a",
        f"{tmp_path.name}/{clips[1]}|doubled folder|a",
    ]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    report = validate_dataset(tmp_path / "m.csv")
    found = problems_by_line(report)
    assert report.rows_usable == 2 and sorted(found) == [4, 5]
    assert "Windows path" in found[4][0]
    assert "repeats the CSV's folder name" in found[5][0]


def test_every_kind_of_bad_row_gets_its_reason_and_good_rows_survive(tmp_path):
    folder = tmp_path / "data"
    good = make_clips(folder, 3)
    write_clip(folder / "wavs" / "short.wav", 0.5, 10)
    write_clip(folder / "wavs" / "long.wav", 12.5, 11)
    sf.write(str(folder / "wavs" / "silent.wav"), np.zeros(SAMPLE_RATE * 2, dtype=np.float32), SAMPLE_RATE)
    (folder / "wavs" / "broken.wav").write_bytes(b"RIFF\x00\x00garbage" * 50)
    rows = [
        "audio_file|text|speaker_name",
        f"{good[0]}|fine one|a",  # 2
        f"{good[1]}|fine two|a",  # 3
        "wavs/short.wav|too short|a",  # 4
        "wavs/long.wav|too long|a",  # 5
        "wavs/silent.wav|silence|a",  # 6
        "wavs/broken.wav|undecodable|a",  # 7
        "wavs/none.wav|missing|a",  # 8
        f"{good[2]}||a",  # 9 empty text
        f"{good[2]}|{'word ' * 60}|a",  # 10 over the 250-character limit for en
        f"{good[0]}|fine one again|a",  # 11 duplicate audio
    ]
    (folder / "m.csv").write_text("\n".join(rows) + "\n")
    before = digests(folder)
    report = validate_dataset(folder / "m.csv", language="en")
    found = problems_by_line(report)
    expected = {
        4: "shorter than 1 s",
        5: "longer than the 11.61 s limit",
        6: "silent",
        7: "cannot be decoded",
        8: "not found",
        9: "Text is empty",
        10: "over the 250-character limit",
        11: "Same audio file as line 2",
    }
    for line, reason in expected.items():
        assert any(reason in r for r in found.get(line, [])), (line, found.get(line))
    assert report.rows_read == 10 and report.rows_usable == 2
    assert sorted(found) == sorted(expected)
    assert digests(folder) == before, "validation wrote to the user's folder"


def test_language_codes(tmp_path):
    csv_path = write_dataset(tmp_path / "d", n=3)
    assert not validate_dataset(csv_path, language="en").problems
    new = validate_dataset(csv_path, language="sw")
    assert new.ok and "not one of the 17 languages" in new.problems[0].reason and new.problems[0].severity == "warning"
    with pytest.raises(ValueError, match="not a language code"):  # an option error: raised before any reading
        validate_dataset(csv_path, language="english!")


def test_vocab_check_flags_unknown_characters_and_token_overflow(tmp_path, tiny_base):
    clips = make_clips(tmp_path, 3)
    rows = [
        "audio_file|text|speaker_name",
        f"{clips[0]}|plain english|a",
        f"{clips[1]}|english 漢字 mixed|a",
        f"{clips[2]}|{'x, ' * 80}|a",
    ]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    report = validate_dataset(tmp_path / "m.csv", language="en", vocab_path=tiny_base.vocab)
    found = problems_by_line(report)
    assert "vocabulary lacks (字 漢)" in found[3][0] or "vocabulary lacks (漢 字)" in found[3][0]
    assert any("200-token limit" in r for r in found[4])
    assert report.rows_usable == 1


def test_cp1252_file_is_read_with_a_warning(tmp_path):
    clips = make_clips(tmp_path, 2)
    text = f"audio_file|text|speaker_name\n{clips[0]}|café crème|a\n{clips[1]}|naïve|a\n"
    (tmp_path / "m.csv").write_bytes(text.encode("cp1252"))
    report = validate_dataset(tmp_path / "m.csv")
    assert report.rows_usable == 2 and "Windows-1252" in report.problems[0].reason
    texts = {row.text for split in ("train", "eval") for row, _ in report.iter_usable(split)}
    assert texts == {"café crème", "naïve"}


def test_eval_split_and_separate_eval_csv(tmp_path):
    train = write_dataset(tmp_path / "t", n=20)
    report = validate_dataset(train)
    assert (report.train_count, report.eval_count) == (17, 3)
    evaluation = write_dataset(tmp_path / "e", n=3, seed_offset=50)  # another folder than the train CSV
    report = validate_dataset(train, evaluation)
    assert (report.train_count, report.eval_count) == (20, 3)
    with pytest.raises(ValueError, match="same file"):
        validate_dataset(train, train)


def _write_big_csv(path: Path, rows: int) -> Path:
    with open(path, "w") as handle:
        handle.write("audio_file|text|speaker_name\n")
        for i in range(rows):
            handle.write(f"wavs/clip_{i:07d}.wav|sentence number {i} of a large corpus|speaker_{i % 7}\n")
    return path


def _traced_peak(csv_path: Path, **kwargs) -> tuple[object, int]:
    tracemalloc.start()
    report = validate_dataset(csv_path, **kwargs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return report, peak


def test_large_csv_validates_in_bounded_memory(tmp_path):
    small, big = _write_big_csv(tmp_path / "small.csv", 20_000), _write_big_csv(tmp_path / "big.csv", 60_000)
    # One untraced pass first: imports and CPython's one-time table growths (pathlib interns every
    # path part) are not the dataset's memory.
    validate_dataset(big)
    _, small_peak = _traced_peak(small)
    seen: list = []
    report, big_peak = _traced_peak(big, progress=lambda done, total, message: seen.append((done, total)))
    assert report.rows_read == 60_000 and report.rows_usable == 0 and report.audio_check == "header"
    row_problems = [p for p in report.problems if p.line]  # plus one dataset-level error saying why it is not ready
    assert len(row_problems) == MAX_LISTED_PROBLEMS and sum(report.problem_counts.values()) == 60_000
    assert [p.reason for p in report.file_errors] == [
        "None of the 60000 rows is usable: each one's reason is listed by line."
    ]
    growth = big_peak - small_peak
    assert growth < 512 * 1024, f"3x the rows took {growth / 1024:.0f} KiB more (peaks {small_peak}, {big_peak})"
    assert seen[-1] == (60_000, 60_000) and len(seen) > 10, "progress was reported as the rows were checked"


def test_a_line_of_forty_megabytes_is_read_in_bounded_memory(tmp_path):
    """A hostile CSV (or a zip that inflates to one) of one enormous line: cut and refused as a row, not read
    whole, in the header pass, the count and the row pass."""
    path = tmp_path / "huge.csv"
    with open(path, "w") as handle:
        handle.write("audio_file|text|speaker_name\n")
        handle.write("wavs/a.wav|" + "x" * 40_000_000 + "|s\n")
        handle.write("wavs/b.wav|a normal row after it|s\n")
    validate_dataset(_write_big_csv(tmp_path / "warm.csv", 10))  # imports and one-time growths, untraced
    report, peak = _traced_peak(path)
    assert report.rows_read == 2 and report.rows_usable == 0
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.0f} MiB for a 40 MB line"


def test_validation_caches_the_row_index_beside_the_prepared_dataset(tmp_path):
    (tmp_path / "source").mkdir()
    csv_path = _write_big_csv(tmp_path / "source" / "big.csv", 3_000)
    index_dir = tmp_path / "prepared" / ".index"
    totals: list = []
    report = validate_dataset(csv_path, index_dir=index_dir, progress=lambda d, t, m: totals.append(t))
    cached = list(index_dir.glob("*.npy"))
    assert report.rows_read == 3_000 and set(totals) == {3_000} and len(cached) == 1
    assert sorted(p.name for p in csv_path.parent.iterdir()) == ["big.csv"], "nothing written beside the CSV"
    stamp = cached[0].stat().st_mtime_ns
    validate_dataset(csv_path, index_dir=index_dir)
    assert cached[0].stat().st_mtime_ns == stamp, "the cached index was reused"
    with open(csv_path, "a") as handle:
        handle.write("wavs/extra.wav|one more row|speaker_1\n")
    grown: list = []
    validate_dataset(csv_path, index_dir=index_dir, progress=lambda d, t, m: grown.append(t))
    assert set(grown) == {3_001}, "the index was rebuilt when the source changed"


def test_prepare_dataset_writes_a_normalised_copy_and_keeps_earlier_rows(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    lines = ["audio_file|text|speaker_name"]
    for i in range(8):  # 44.1 kHz stereo input
        stereo = np.stack([synth_speech(1.5 + 0.2 * i, i, 44100)] * 2, axis=1)
        sf.write(str(source / f"s{i}.wav"), stereo, 44100)
        lines.append(f"s{i}.wav|first batch {i}|a")
    (source / "m.csv").write_text("\n".join(lines) + "\n")
    before = digests(source)
    out = tmp_path / "prepared"

    first = prepare_dataset(source / "m.csv", out, language="en")
    train, evaluation = (out / TRAIN_FILE).read_text().splitlines(), (out / EVAL_FILE).read_text().splitlines()
    assert train[0] == evaluation[0] == "audio_file|text|speaker_name"
    assert (len(train) - 1, len(evaluation) - 1) == (7, 1) and (out / LANG_FILE).read_text().strip() == "en"
    clip = out / train[1].split("|")[0]
    info = sf.info(str(clip))
    assert (info.samplerate, info.channels) == (22050, 1)
    assert digests(source) == before

    more = write_dataset(tmp_path / "more", n=7, seed_offset=30)
    second = prepare_dataset(more, out, language="en")
    train2, eval2 = (out / TRAIN_FILE).read_text().splitlines(), (out / EVAL_FILE).read_text().splitlines()
    assert set(train[1:]) <= set(train2) and set(evaluation[1:]) <= set(eval2), "earlier rows kept"
    assert (second.added_train, second.added_eval) == (6, 1) and len(train2) - 1 == 13 and len(eval2) - 1 == 2

    again = prepare_dataset(source / "m.csv", out, language="en")
    assert again.added_train == again.added_eval == 0 and again.skipped_existing == 8
    with pytest.raises(ValueError, match="already holds a 'en' dataset"):
        prepare_dataset(more, out, language="fr")
    with pytest.raises(ValueError, match="holds your source CSV"):
        prepare_dataset(source / "m.csv", source)
    assert validate_dataset(out / TRAIN_FILE, out / EVAL_FILE).ok
    assert first.report.rows_usable == 8


@pytest.mark.slow
def test_train_gpt_lists_the_rows_it_drops_in_the_run_folder(tmp_path, tiny_base):
    from utils.gpt_train import train_gpt

    csv_path = write_dataset(tmp_path / "data", n=6)
    with open(csv_path, "a") as handle:
        handle.write("wavs/missing.wav|gone|speaker_a\n")
    result = train_gpt(
        version="tiny",
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=1,
        batch_size=4,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=0,
    )
    with open(Path(result.run_dir) / "dropped_rows.csv") as handle:
        dropped = list(csv.DictReader(handle))
    assert [(d["line"], d["audio_file"]) for d in dropped] == [("8", "wavs/missing.wav")]
    assert "not found" in dropped[0]["reason"]
