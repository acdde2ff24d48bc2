"""A text of any length spoken by a voice (utils/model/long_text.py through synthesize and the CLI's `speak`), on the
finished tiny run: one clip with a report per piece, pauses that follow the punctuation (measured in the clip), an
overlong sentence cut and said so, refusals before anything is spoken, and best of N with the bundled Whisper (the tiny
model babbles, so its sentences are retried)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from utils import cli
from utils.model.inference import synthesize
from utils.model.long_text import MAX_TEXT_CHARS, PAUSE_SECONDS, voice_pace
from utils.quality.babble import SpeakingPace
from utils.quality.sentence_check import UNKNOWN_PACE, best_try
from utils.text.languages import char_limit
from utils.text.split import CLAUSE, END, PARAGRAPH, SENTENCE, WORD

# ~2,000 characters: three paragraphs; sentences under the limit with commas (spoken whole), one over it with clause
# marks (cut at them), one over it without a break (cut between words), and ends . ! ?
CLAUSES = (
    "When the rain stopped at last, the children ran out to the river, where the water was high and brown; "
    "they watched the branches float past the mill, the old bridge and the empty boats: nobody said a word, "
    "and the dogs, tired of barking, lay down in the wet grass beside them until the evening came."
)
NO_BREAK = " ".join(["the long road went on and on past every farm and field in the valley"] * 4) + "."
LONG = (  # sentences of 150-240 characters: few pieces for the characters
    "The morning was quiet, and the river ran slow beside the old mill where the miller had worked for forty years, "
    "grinding the grain that the farmers brought down from the hills in their carts. ",
    "Birds sang in the tall trees along the bank while the wind moved the reeds back and forth, and far away a dog "
    "barked at something nobody else could see or hear! ",
    "Nobody knew where the road ended, but everyone in the village had a story about it, and most of the stories "
    "were about travellers who had set out one spring and never come back. ",
    "At night the lamps were lit in every window of the village, the bells rang once from the tower on the hill, and "
    "the children were called home from the fields before the dark came down. ",
)
PARAGRAPHS = [
    LONG[0] + LONG[1] + CLAUSES,
    NO_BREAK + " Did anyone see where it ended? " + LONG[2] + LONG[0],
    LONG[3] + LONG[1] + LONG[2] + "The end!",
]
TEXT = "\n\n".join(PARAGRAPHS)
FAST = {"max_audio_tokens": 2, "seed": 1}  # the tiny model speaks noise: a tenth of a second per piece is enough


def zero_runs(wav: np.ndarray, rate: int, shortest_s: float = 0.02) -> list[float]:
    """Seconds of each run of exact silence in `wav` at least `shortest_s` long, in order (the model's noise is
    never exactly 0 for that long)."""
    silent = np.concatenate([[False], wav == 0.0, [False]])
    edges = np.flatnonzero(np.diff(silent.astype(np.int8)))
    lengths = (edges[1::2] - edges[0::2]) / rate
    return [float(s) for s in lengths if s >= shortest_s]


def check_report(speech, text: str) -> None:
    """One clip, a report per piece that accounts for every sample of it and every word of the text."""
    rate, sentences = speech.sample_rate, speech.sentences
    assert speech.wav.ndim == 1 and len(sentences) > 1
    assert [s.index for s in sentences] == list(range(1, len(sentences) + 1))
    assert " ".join(s.text for s in sentences).split() == text.split(), "every word, in order"
    position = 0.0
    for report in sentences:
        assert report.start == pytest.approx(position, abs=0.002)  # each figure rounded to the millisecond
        assert report.seconds > 0 and report.pause_after == PAUSE_SECONDS[report.after]
        position = report.start + report.seconds + report.pause_after
    assert len(speech.wav) / rate == pytest.approx(position, abs=0.002)
    assert sentences[-1].after == END and sentences[-1].pause_after == 0


def test_a_long_text_is_one_clip_with_a_report_and_pauses_that_follow_its_punctuation(finished_run, tmp_path):
    assert 1800 <= len(TEXT) <= 2300
    out = tmp_path / "long.wav"
    speech = synthesize(finished_run, TEXT, output_wav=out, **FAST)
    check_report(speech, TEXT)
    written, rate = sf.read(out, dtype="float32")
    assert rate == speech.sample_rate and len(written) == len(speech.wav)
    sentences = speech.sentences
    # One try each, nothing transcribed: as fast as one generation a piece.
    assert all(s.tries == 1 and s.kept.number == 1 and not s.retried and s.kept.transcript is None for s in sentences)
    assert "not checked" in speech.checks
    # The silences measured in the clip are the pauses of the punctuation, in order.
    expected = [s.pause_after for s in sentences[:-1]]
    assert zero_runs(speech.wav, rate) == pytest.approx(expected, abs=0.002)
    afters = {s.after for s in sentences}
    assert {PARAGRAPH, SENTENCE, CLAUSE, WORD} <= afters
    assert PAUSE_SECONDS[PARAGRAPH] > PAUSE_SECONDS[SENTENCE] > PAUSE_SECONDS[CLAUSE] > PAUSE_SECONDS[WORD] > 0
    for report in sentences:
        if report.after == SENTENCE:
            assert report.text[-1] in ".!?", report.text
        if report.after == CLAUSE:
            assert report.text[-1] in ",;:", report.text
    # The sentences over the limit were cut, and their pieces say how.
    limit = char_limit("en")
    cut = [s for s in sentences if s.parts > 1]
    assert {s.sentence for s in cut} == {s.sentence for s in sentences if s.text in CLAUSES or s.text in NO_BREAK}
    assert all(len(s.text) <= limit and f"over the {limit}-character limit" in s.cut for s in cut)
    no_break = [s for s in cut if s.text in NO_BREAK]
    assert len(no_break) >= 2 and "cut between words" in no_break[0].cut
    assert " ".join(s.text for s in no_break) == NO_BREAK


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Text is empty"),
        (" \n\t  ", "Text is empty"),
        ("x" * 1_000_000, f"1,000,000 characters, over the {MAX_TEXT_CHARS:,} one call speaks"),
        (None, "Text must be a string"),
    ],
)
def test_empty_or_oversized_text_is_refused_before_anything_is_loaded(tmp_path, text, message):
    out = tmp_path / "never.wav"
    with pytest.raises(ValueError, match=message):
        synthesize(tmp_path / "no-such-run", text, output_wav=out)  # refused before the run is even looked for
    assert not out.exists()
    with pytest.raises(ValueError, match=r"tries must be a whole number from 1 to 10 \(got 0\)"):
        synthesize(tmp_path / "no-such-run", "Hello.", tries=0)


def test_with_tries_a_failing_sentence_is_spoken_again_and_the_best_try_kept(finished_run):
    calls = []
    text = "Hello there, my friend. How are you today?"
    speech = synthesize(
        finished_run, text, tries=3, seed=40, max_audio_tokens=8, progress=lambda *call: calls.append(call)
    )
    check_report(speech, text)
    assert "CER with Whisper tiny.en" in speech.checks
    for report in speech.sentences:
        attempts = report.attempts
        assert 1 <= report.tries == len(attempts) <= 3
        assert [a.number for a in attempts] == list(range(1, report.tries + 1))
        assert [a.seed for a in attempts] == [40 + i for i in range(report.tries)], "seed, seed + 1, ..."
        assert report.kept is best_try(attempts) and report.failing == report.kept.failures
        assert all(not a.passed for a in attempts[:-1]), "only a failing try is spoken again"
        assert report.tries == 3 or attempts[-1].passed
        assert [why.split(":")[0] for why in report.retried] == [f"try {a.number}" for a in attempts[:-1]]
        assert all(a.transcript is not None and a.cer is not None for a in attempts), "each try was heard"
    assert any(report.tries > 1 for report in speech.sentences), "the tiny model babbles: something was retried"
    assert calls[-1][:2] == (len(speech.sentences), len(speech.sentences))
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)
    assert any("trying again" in message for _, _, message in calls)


def test_the_cli_speaks_a_text_file_into_one_clip_and_prints_the_report(finished_run, tmp_path, capsys):
    source = tmp_path / "chapter.txt"
    source.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "chapter.wav"
    argv = ["speak", str(finished_run), "--text-file", str(source), "--out", str(out), "--tries", "1", "--json"]
    assert cli.main([*argv, "--max-audio-tokens", "2", "--seed", "3"]) == 0
    printed = capsys.readouterr()
    report = json.loads(printed.out)
    assert "not checked" in report["checks"]
    pieces = report["sentences"]
    assert " ".join(p["text"] for p in pieces).split() == TEXT.split()
    wav, rate = sf.read(out, dtype="float32")
    last = pieces[-1]
    assert len(wav) / rate == pytest.approx(last["start"] + last["seconds"], abs=0.002)
    assert f"[{len(pieces)}/{len(pieces)}] piece {len(pieces)} of {len(pieces)}" in printed.err
    assert source.read_text(encoding="utf-8") == TEXT, "the text file is only read"
    assert cli.main(["speak", str(finished_run), "--text-file", str(source), "--out", str(source)]) == 2
    assert "would overwrite it" in capsys.readouterr().err and source.read_text(encoding="utf-8") == TEXT
    short = tmp_path / "short.wav"
    sf.write(short, np.full(2205, 0.1, dtype="float32"), 22050)
    own = str(finished_run / "ready" / "reference.wav")
    argv = ["speak", str(finished_run), "--text", "Hi.", "--out", str(out), "--reference", own]
    argv += ["--reference", str(short)]
    assert cli.main(argv) == 2 and "short.wav is shorter than 0.5 s" in capsys.readouterr().err, "each clip checked"


def test_the_speakers_pace_is_its_runs_else_a_slow_typical_one(tmp_path):
    ready = tmp_path / "run" / "ready"
    ready.mkdir(parents=True)
    assert voice_pace(ready)[0] == UNKNOWN_PACE, "no run.json"
    record = tmp_path / "run" / "run.json"
    record.write_text(json.dumps({"quality": {"pace": {"chars_per_second": 14.2, "overhead_seconds": 0.3}}}))
    pace, source = voice_pace(ready)
    assert pace == SpeakingPace(14.2, 0.3) and "training rows" in source
    for bad in ({"chars_per_second": "NaN"}, {"chars_per_second": -3}, {"chars_per_second": 9, "overhead_seconds": -1}):
        record.write_text(json.dumps({"quality": {"pace": bad}}))
        assert voice_pace(ready)[0] == UNKNOWN_PACE, bad
    record.write_text("{not json")
    assert voice_pace(ready) == (UNKNOWN_PACE, voice_pace(tmp_path)[1])
