"""Blind A/B listening (utils.sweep.listening) with real voices: a finished tiny run, a copy of it, the base model."""

from __future__ import annotations

import json
import shutil

import pytest
import soundfile as sf

from utils.sweep.listening import BASE, agreement, blind_pair, listening_tally, record_choice
from utils.sweep.runs import compare_runs


@pytest.fixture
def two_voices(tmp_path, finished_run):
    output = tmp_path / "out"
    output.mkdir()
    first = output / "voice-one"
    second = output / "voice-two"
    shutil.copytree(finished_run, first)
    shutil.copytree(finished_run, second)
    return output, first, second


def test_a_blind_pair_hides_which_voice_is_which_until_the_choice(two_voices):
    output, first, _ = two_voices
    pair = blind_pair(output, first, BASE, "Hello there, how are you today?", seed=3, max_audio_tokens=20)
    for clip in pair.clips:
        audio, rate = sf.read(clip)
        assert rate > 0 and len(audio) > rate * 0.1
    # The clips where the app serves files; which is which apart from them, never served.
    assert sorted(f.name for f in (output / "synthesized" / "listening" / pair.pair_id).iterdir()) == ["A.wav", "B.wav"]
    assert sorted(f.name for f in (output / "listening" / pair.pair_id).iterdir()) == ["pair.json"]
    sides = json.loads((output / "listening" / pair.pair_id / "pair.json").read_text())["sides"]
    assert sorted(sides) == sorted([str(first.resolve()), BASE])
    record = record_choice(output, pair.pair_id, "B")
    assert record["preferred"] == sides[1]
    assert "A was " in record["reveal"] and "B was " in record["reveal"] and "base model" in record["reveal"]
    tally = listening_tally(output)
    assert tally[sides[1]] == {"won": 1, "lost": 0, "same": 0}
    assert tally[sides[0]] == {"won": 0, "lost": 1, "same": 0}
    with pytest.raises(ValueError, match="already recorded"):
        record_choice(output, pair.pair_id, "A")


def test_two_runs_compared_blind_show_in_the_runs_table(two_voices):
    output, first, second = two_voices
    pair = blind_pair(output, first, second, "One two three.", max_audio_tokens=20)
    record_choice(output, pair.pair_id, "same")
    frame = compare_runs(output, "run").set_index("run")
    assert frame.loc["voice-one", "listening"] == "0-0 (1 same)"
    assert frame.loc["voice-two", "listening"] == "0-0 (1 same)"
    assert agreement(output) == (0, 0)  # no combined score on either side (quality_eval=0): nothing to agree with


def test_bad_listening_input_is_refused(two_voices):
    output, first, _ = two_voices
    with pytest.raises(ValueError, match="same voice"):
        blind_pair(output, first, first / "ready", "Hello.")
    with pytest.raises(ValueError, match="Text is empty"):
        blind_pair(output, first, BASE, "   ")
    with pytest.raises(ValueError, match="A, B or same"):
        record_choice(output, "20261128-000000-abcdef", "C")
    with pytest.raises(ValueError, match="No such listening pair"):
        record_choice(output, "../../etc", "A")
    with pytest.raises(ValueError, match="No such listening pair"):
        record_choice(output, "20261128-000000-abcdef", "A")
