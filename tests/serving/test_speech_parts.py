"""The speech server's parts that need no model: each response format read back whole from its streamed bytes, long
sentences cut for XTTS, and the credentials of a request."""

from __future__ import annotations

import asyncio
import base64
import io
import wave

import numpy as np
import pytest
import soundfile as sf

from utils.serving.auth import ApiKey, credentials
from utils.serving.encoding import available_formats
from utils.text.split import sentence_pieces

RATE = 24000


def tone(seconds: float, start: float = 0.0) -> np.ndarray:
    t = start + np.arange(int(seconds * RATE)) / RATE
    return (0.4 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.mark.parametrize("name", ["wav", "pcm", "mp3", "opus", "flac"])
def test_each_format_streamed_in_chunks_reads_back_whole(name):
    form = available_formats()[name]
    encoder = form.make(RATE)
    chunks = [encoder.header()]
    for n in range(6):  # 3 s in half-second chunks, as a generation gives them
        chunks.append(encoder.add(tone(0.5, n * 0.5)))
    chunks.append(encoder.finish())
    data = b"".join(chunks)
    if name == "pcm":
        audio = np.frombuffer(data, "<i2").astype(np.float32) / 32767
    else:
        audio, rate = sf.read(io.BytesIO(data), dtype="float32")
        assert rate == RATE
    # Lossy codecs add a little at the ends (encoder delay, padding); none loses the speech.
    assert 3.0 * RATE <= audio.size <= 3.1 * RATE, (name, audio.size)
    if name in ("wav", "pcm", "flac"):
        assert np.abs(audio[: 3 * RATE] - tone(3.0)).max() < 1e-3
    if form.streamed:  # bytes left before the end: more than the header came with the chunks
        assert sum(len(c) for c in chunks[:-1]) > len(data) // 2, [len(c) for c in chunks]


def test_the_streamed_wav_header_says_read_to_the_end():
    form = available_formats()["wav"]
    encoder = form.make(RATE)
    data = encoder.header() + encoder.add(tone(0.25)) + encoder.finish()
    assert data[4:8] == b"\xff\xff\xff\xff" and data[40:44] == b"\xff\xff\xff\xff"
    with wave.open(io.BytesIO(data)) as reader:
        assert reader.getframerate() == RATE and len(reader.readframes(10**9)) == 2 * int(0.25 * RATE)


def test_a_sentence_over_the_character_limit_is_cut_at_clauses_then_words():
    sentence = "one two three, four five six seven, " + "word " * 30 + "end"
    pieces = sentence_pieces(sentence, 40)
    assert all(len(piece) <= 40 for piece in pieces) and len(pieces) > 3
    assert pieces[0] == "one two three, four five six seven,"
    assert " ".join(pieces).split() == sentence.split(), "nothing lost or reordered"
    assert sentence_pieces("x" * 95, 40) == ["x" * 40, "x" * 40, "x" * 15]
    assert sentence_pieces("  short  ", 40) == ["short"] and sentence_pieces(" ", 40) == []


def test_credentials_of_bearer_and_basic():
    def scope(value: str) -> dict:
        return {"headers": [(b"authorization", value.encode())]}

    assert credentials(scope("Bearer alice:pa:ss")) == ("alice", "pa:ss")
    assert credentials(scope("Bearer sk-key")) == ("", "sk-key")
    assert credentials(scope("Basic " + base64.b64encode(b"alice:secret").decode())) == ("alice", "secret")
    assert credentials(scope("Basic not-base64!")) is None
    assert credentials(scope("Digest x")) is None and credentials({"headers": []}) is None


def test_an_api_key_locks_out_an_address_that_guesses():
    now = [0.0]
    key = ApiKey("k:1", max_failures=2, lockout_s=30, delay_s=0, clock=lambda: now[0])
    check = lambda user, password, address: asyncio.run(key.check(user, password, address))
    assert check("k", "1", "a") is True, "Bearer k:1 is the whole key"
    assert check("", "guess", "a") is False and check("", "guess", "a") is False
    with pytest.raises(Exception, match="refused for 30 more seconds") as locked:
        check("k", "1", "a")
    assert locked.value.seconds == 30
    assert check("k", "1", "b") is True, "another address is not affected"
    now[0] = 31
    assert check("k", "1", "a") is True


def test_the_standalone_options_want_a_key_beyond_this_machine_and_never_show_it(monkeypatch, capsys):
    import argparse

    from utils.serving.options import add_serve_options, check_serve_options

    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_serve_options(parser)
    monkeypatch.delenv("XTTS_API_KEY", raising=False)
    with pytest.raises(ValueError, match="needs --api-key"):
        check_serve_options(parser.parse_args(["out", "--host", "0.0.0.0"]))
    assert check_serve_options(parser.parse_args(["out", "--host", "0.0.0.0", "--insecure-open"])).api_key == ""
    with pytest.raises(ValueError, match="max_audio_tokens must be"):
        check_serve_options(parser.parse_args(["out", "--max-audio-tokens", "0"]))
    monkeypatch.setenv("XTTS_API_KEY", "from-the-environment")
    args = check_serve_options(parser.parse_args(["out", "--host", "0.0.0.0"]))
    assert args.host == "0.0.0.0" and args.api_key == "from-the-environment" and args.port == 8000
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    assert "from-the-environment" not in capsys.readouterr().out
