"""A voice's reference clips (utils/model/references.py, utils.model.inference): several clips condition XTTS as
coqui's own get_conditioning_latents combines them, synthesize speaks with a list, a silent, too short or non-audio
clip is refused by name, and ready/ changes its clips only by whole new files (the finished tiny run's voice)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from tests.helpers import digests, write_clip
from utils.model.inference import check_reference, conditioning_latents, load_voice, synthesize
from utils.model.references import reference_paths, voice_references, write_voice_references


def test_several_clips_condition_as_coquis_own_and_synthesize_speaks_with_a_list(finished_run, tmp_path):
    clips = [write_clip(tmp_path / "a.wav", 2.0, seed=3), write_clip(tmp_path / "b.wav", 2.6, seed=41)]
    model = load_voice(finished_run).model
    one_latent, one_speaker = conditioning_latents(model, clips[0])
    listed = conditioning_latents(model, [clips[0]])
    torch.testing.assert_close(listed[0], one_latent)
    torch.testing.assert_close(listed[1], one_speaker)
    both_latent, both_speaker = conditioning_latents(model, clips)
    assert both_latent.shape != one_latent.shape or not torch.allclose(both_latent, one_latent)
    assert not torch.allclose(both_speaker, one_speaker), "two speakers' clips make another voice"
    # coqui's Xtts.get_conditioning_latents with the settings conditioning_latents declares: the same tensors.
    with torch.inference_mode():
        coqui = model.get_conditioning_latents(
            audio_path=[str(c) for c in clips], max_ref_length=30, gpt_cond_len=30, gpt_cond_chunk_len=4
        )
    torch.testing.assert_close(both_latent, coqui[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(both_speaker, coqui[1], atol=1e-4, rtol=1e-4)

    _, alone = synthesize(finished_run, "hello there", reference_wav=clips[0], seed=3, max_audio_tokens=12)
    _, together = synthesize(finished_run, "hello there", reference_wav=clips, seed=3, max_audio_tokens=12)
    assert alone.shape != together.shape or not np.allclose(alone, together), "the list is spoken with"


def _bad_reference(kind: str, folder: Path) -> Path:
    if kind == "silent":
        path = folder / "silent.wav"
        sf.write(str(path), np.zeros(22050 * 3, dtype=np.float32), 22050)
    elif kind == "short":
        path = write_clip(folder / "short.wav", 0.2, seed=5)
    else:
        path = folder / "notes.wav"
        path.write_text("not audio at all\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("kind", "said"),
    [("silent", "is silent"), ("short", "shorter than 0.5 s"), ("text", "not audio this app can read")],
)
def test_a_silent_short_or_non_audio_reference_is_refused_by_name_and_nothing_changes(
    finished_run, tmp_path, kind, said
):
    bad = _bad_reference(kind, tmp_path)
    good = write_clip(tmp_path / "good.wav", 2.0, seed=7)
    before = digests(finished_run / "ready")
    with pytest.raises(ValueError, match=said) as refused:
        synthesize(finished_run, "hello", reference_wav=[good, bad], seed=1, max_audio_tokens=5)
    assert bad.name in str(refused.value)
    with pytest.raises(ValueError, match=said):
        check_reference(bad)
    check_reference([good])  # a good clip alone passes
    with pytest.raises(ValueError, match="not found: .*missing.wav"):
        check_reference([good, tmp_path / "missing.wav"])
    with pytest.raises(ValueError, match="No reference clip"):
        check_reference([])
    assert digests(finished_run / "ready") == before


def test_ready_holds_several_clips_listed_in_finetune_json_reference_wav_first(finished_run, tmp_path):
    run = Path(shutil.copytree(finished_run, tmp_path / "run"))
    ready = run / "ready"
    record = json.loads((ready / "finetune.json").read_text())["reference"]
    assert record["measured"] is False and "quality_eval=0" in record["reason"], "the run's end said why"
    assert record["files"] == ["reference.wav"] and voice_references(ready) == [ready / "reference.wav"]
    before = (ready / "reference.wav").read_bytes()

    wavs = [np.full(22050, 0.1, dtype=np.float32), np.zeros((2, 10), dtype=np.float32)]  # the second: not mono
    with pytest.raises(ValueError, match="mono"):
        write_voice_references(ready, wavs, {"why": "a test"})
    assert (ready / "reference.wav").read_bytes() == before, "a failed write leaves the voice's clip"
    assert json.loads((ready / "finetune.json").read_text())["reference"] == record

    clips = [write_clip(tmp_path / f"{i}.wav", 2.0, seed=i) for i in range(3)]
    written = write_voice_references(ready, [sf.read(str(c), dtype="float32")[0] for c in clips], {"why": "a test"})
    assert [p.name for p in written] == ["reference.wav", "reference_2.wav", "reference_3.wav"]
    assert voice_references(ready) == written and json.loads((ready / "finetune.json").read_text())["language"] == "en"
    np.testing.assert_allclose(sf.read(str(written[1]), dtype="float32")[0], sf.read(str(clips[1]))[0], atol=1e-4)
    write_voice_references(ready, [sf.read(str(clips[0]), dtype="float32")[0]], {"why": "one again"})
    assert not (ready / "reference_2.wav").exists() and voice_references(ready) == [ready / "reference.wav"]

    info = json.loads((ready / "finetune.json").read_text())
    for files in (["../../outside.wav"], ["reference.wav", "/etc/passwd"], ["reference_2.wav"], "reference.wav"):
        (ready / "finetune.json").write_text(json.dumps({**info, "reference": {"files": files}}))
        assert voice_references(ready) == [ready / "reference.wav"], f"a hand-edited {files!r} names nothing else"
    assert reference_paths(None) == [] and reference_paths("a.wav") == [Path("a.wav")]
    with pytest.raises(ValueError, match="path or a list of paths"):
        reference_paths(3)
