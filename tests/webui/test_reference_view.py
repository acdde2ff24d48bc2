"""The Test tab's reference clips (webui/reference_view.py): several uploads pass to synthesize as a list, each
confined to the app's folders; the label says how many clips the run's voice has; the candidates' table shows file
names as text. The choice itself is measured in tests/training/test_reference_choice.py."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import soundfile as sf

from tests.helpers import write_clip
from tests.webui.test_handlers import make_context
from utils.model.references import write_voice_references
from webui.paths import PathRefused
from webui.reference_view import choice_frame, confined_references, reference_update
from webui.test_tab import run_selected, synthesize_handler


def test_several_uploaded_clips_are_confined_and_spoken_with(tmp_path, finished_run):
    ctx = make_context(tmp_path)
    run = shutil.copytree(finished_run, ctx.output_dir / finished_run.name)
    clips = [str(write_clip(tmp_path / "data" / f"{i}.wav", 2.0, seed=i)) for i in range(2)]
    assert confined_references(ctx, clips) == [str((tmp_path / "data" / f"{i}.wav").resolve()) for i in range(2)]
    assert confined_references(ctx, None) is None and confined_references(ctx, []) is None
    outside = write_clip(tmp_path / "elsewhere" / "x.wav", 2.0, seed=9)
    with pytest.raises(PathRefused, match="reference audio: .*x.wav is outside"):
        confined_references(ctx, [clips[0], str(outside)])
    sliders = [0.75, 1.0, 5.0, 50, 0.85, 1.0, 12]
    audio = synthesize_handler(ctx, run.name, "", clips, "hello there", "en", *sliders)[0]
    assert sf.info(audio).frames > 0
    with pytest.raises(Exception, match="outside the folders"):
        synthesize_handler(ctx, run.name, "", [clips[0], str(outside)], "hello there", "en", *sliders)

    assert "the run's own reference clip (upload" in run_selected(ctx, run.name, "")[1]["label"]
    wav = sf.read(clips[0], dtype="float32")[0]
    write_voice_references(run / "ready", [wav, wav], {"why": "a test"})
    update = reference_update(run / "ready")
    assert update["value"] is None and "the run's own 2 reference clips" in update["label"]


def test_the_candidates_table_shows_file_names_as_text():
    record = {
        "chosen": 1,
        "candidates": [
            {"kind": "current", "clips": ["/d/a.wav"], "score": 0.4, "scores": {"cer": 0.5}},
            {"kind": "single", "clips": ["/d/<img src=x>\u202e.wav"], "score": 0.61234, "clip_seconds": 6.5},
        ],
    }
    frame = choice_frame(record)
    assert list(frame["clips"]) == ["a.wav", "<img src=x>[U+202E].wav"], "plain text, the RLO made visible"
    assert list(frame["chosen"]) == ["", "★"] and list(frame["score"]) == [0.4, 0.6123]
    assert pd.isna(frame["similarity"][0]) and frame["cer"][0] == 0.5
