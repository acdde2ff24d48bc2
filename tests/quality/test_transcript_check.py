"""Dataset transcript check: rows whose text belongs to another clip are flagged, worst first."""

from tests.quality.speech import SENTENCES, VOICE_B
from utils.data.transcription import FasterWhisperTranscriber
from utils.quality.transcript_check import check_transcripts


def test_swapped_transcripts_are_flagged_worst_first(whisper, espeak_clips, tmp_path):
    rows = [(10 + i, espeak_clips[VOICE_B, i], SENTENCES[i]) for i in range(4)]
    rows[1] = (11, espeak_clips[VOICE_B, 1], SENTENCES[2])  # the text of another clip
    rows[3] = (13, espeak_clips[VOICE_B, 3], SENTENCES[3][:12])  # most of the text is missing
    rows.append((14, tmp_path / "missing.wav", "gone"))
    events = []
    result = check_transcripts(rows, whisper, language="en", progress=lambda *e: events.append(e))
    assert [r.row_id for r in result.flagged] == [13, 11]  # 13: CER about 2 (insertions), 11: about 0.7
    assert result.flagged[0].cer >= result.flagged[1].cer > 0.3
    assert all(r.transcript and r.text for r in result.flagged)
    assert result.checked == 4 and result.n_flagged == 2
    assert [s[0] for s in result.skipped] == [14] and result.n_skipped == 1
    assert [e[:2] for e in events] == [(i, 5) for i in range(1, 6)]


def test_memory_bound_keeps_the_worst(whisper, espeak_clips):
    rows = (
        i
        for i in [
            (0, espeak_clips[VOICE_B, 0], SENTENCES[1]),
            (1, espeak_clips[VOICE_B, 1], "xyz"),
            (2, espeak_clips[VOICE_B, 2], SENTENCES[0]),
        ]
    )  # a generator: no len()
    result = check_transcripts(rows, whisper, language="en", max_flagged=1)
    assert result.n_flagged == 3 and [r.row_id for r in result.flagged] == [1]  # "xyz": CER about 1


def test_without_a_transcriber_the_reason_is_given(espeak_clips):
    result = check_transcripts([(0, espeak_clips[VOICE_B, 0], SENTENCES[0])], None, language="en")
    assert result.flagged == [] and result.checked == 0 and "no transcription model" in result.reason


def test_a_model_that_cannot_load_gives_its_reason(espeak_clips, tmp_path):
    absent = FasterWhisperTranscriber(str(tmp_path / "whisper" / "absent"), device="cpu")
    events = []
    result = check_transcripts(
        [(0, espeak_clips[VOICE_B, 0], SENTENCES[0])] * 3, absent, language="en", progress=lambda *e: events.append(e)
    )
    assert result.checked == 0 and result.flagged == [] and "absent" in result.reason
    assert events == []  # stopped at the first row, which was not checked
