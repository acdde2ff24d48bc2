"""Scoring a folder of "generated" clips (espeak-ng speech) against texts and real clips."""

import hashlib
import json
import shutil

import pytest
import soundfile as sf

from tests.quality.speech import SENTENCES, VOICE_A, VOICE_B, speak
from utils.data.transcription import FasterWhisperTranscriber
from utils.quality.scoring import ClipToScore, score_clips, score_folder
from utils.quality.selection import BestRule, combined_score, is_better


@pytest.fixture(scope="module")
def generated(tmp_path_factory, espeak_clips):
    """Two folders of "generated" clips of sentences 0-1, one per voice; real clips of the same texts
    spoken more slowly by voice A; and voice A's other sentences as the speaker's reference clips."""
    root = tmp_path_factory.mktemp("generated")
    folders = {}
    for voice in (VOICE_A, VOICE_B):
        folders[voice] = root / voice
        folders[voice].mkdir()
        for i in (0, 1):
            shutil.copy(espeak_clips[voice, i], folders[voice] / f"{i:04d}.wav")
    real = {f"{i:04d}": speak(SENTENCES[i], root / "real" / f"{i}.wav", VOICE_A, speed=100) for i in (0, 1)}
    texts = {f"{i:04d}.wav": SENTENCES[i] for i in (0, 1)}
    references = [espeak_clips[VOICE_A, i] for i in (2, 3, 4)]
    return folders, texts, real, references


def test_score_folder_measures_each_clip(whisper, generated):
    folders, texts, real, references = generated
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folders[VOICE_A].iterdir()}
    progress = []
    report = score_folder(
        folders[VOICE_A],
        texts,
        references,
        "en",
        transcriber=whisper,
        real_clips=real,
        progress=lambda *a: progress.append(a),
    )
    assert [c.text for c in report.clips] == SENTENCES[:2]
    for clip in report.clips:
        assert clip.cer < 0.3 and clip.wer is not None and clip.transcript
        assert clip.similarity > 0.75
        expected = sf.info(clip.file).duration / sf.info(real[clip.file[-8:-4]]).duration
        assert clip.duration_ratio == pytest.approx(expected, rel=1e-3) and clip.duration_ratio < 1  # faster speech
        assert clip.reason == ""
    assert report.cer < 0.2 and report.reason == ""
    assert report.combined == pytest.approx(combined_score(report.cer, report.similarity))
    assert [p[:2] for p in progress] == [(1, 2), (2, 2)]
    assert json.loads(json.dumps(report.to_dict()))["clips"][0]["text"] == SENTENCES[0]
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folders[VOICE_A].iterdir()} == digests


def test_another_voice_scores_lower_similarity(whisper, generated):
    folders, texts, _, references = generated
    same = score_folder(folders[VOICE_A], texts, references, "en", transcriber=whisper)
    other = score_folder(folders[VOICE_B], texts, references, "en", transcriber=whisper)
    assert same.similarity > other.similarity + 0.15
    assert is_better(BestRule.SIMILARITY, same.similarity, other.similarity)
    assert is_better(BestRule.COMBINED, same.combined, other.combined)
    assert "duration_ratio: no real clip" in same.reason and same.duration_ratio is None


def test_without_models_the_values_say_why(generated, tmp_path):
    folders, texts, _, references = generated
    report = score_folder(folders[VOICE_A], texts, None, "en")
    assert all(c.cer is None and c.similarity is None and c.duration for c in report.clips)
    assert "cer: no transcription model given" in report.clips[0].reason
    assert "similarity: no reference clips" in report.clips[0].reason
    assert report.cer is None and report.combined is None and "no transcription model" in report.reason
    # A model that cannot be loaded: its reason, once per clip, and the other measures still work.
    absent = FasterWhisperTranscriber(str(tmp_path / "whisper" / "absent"), device="cpu")
    report = score_folder(folders[VOICE_A], texts, references, "en", transcriber=absent)
    assert all(c.cer is None and "absent" in c.reason and c.similarity > 0.75 for c in report.clips)
    assert report.cer is None and "absent" in report.reason and report.similarity is not None
    # A clip that cannot be read gets a record saying so; the others are still scored.
    (tmp_path / "bad.wav").write_bytes(b"not audio")
    mixed = score_clips(
        [(tmp_path / "bad.wav", "x"), ClipToScore(folders[VOICE_A] / "0000.wav", SENTENCES[0])], language="en"
    )
    assert mixed.clips[0].duration is None and "bad.wav" in mixed.clips[0].reason
    assert mixed.clips[1].duration > 1


def test_folder_and_texts_must_match(generated, tmp_path):
    folders, texts, _, _ = generated
    with pytest.raises(ValueError, match="no text for 1 file"):
        score_folder(folders[VOICE_A], {"0000": SENTENCES[0]}, None, "en")  # stems work, 0001 has none
    with pytest.raises(ValueError, match="'0002.wav'"):
        score_folder(folders[VOICE_A], {**texts, "0002.wav": "extra"}, None, "en")
    with pytest.raises(ValueError, match="not a folder"):
        score_folder(tmp_path / "nope", texts, None, "en")
