"""The page's measured-quality parts as plain functions, on a real tiny run: the score table and clips of the
Fine-tune tab, the Test tab's comparison with the base model, the Dataset tab's check and its edits."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from tests.helpers import digests, page_text, write_dataset
from tests.quality.conftest import espeak_clips, whisper  # noqa: F401 - session fixtures shared with tests/quality
from tests.quality.speech import SENTENCES, VOICE_A
from utils.model.base_models import models_root
from utils.model.compare import compare_with_base
from utils.quality.asr import bundled_whisper_dir
from utils.training.process.runner import TrainingRunner
from webui import quality_view
from webui.context import UIContext
from webui.dataset_handlers import check_handler, prepare_handler, transcribe_handler
from webui.paths import PathRefused
from webui.test_tab import compare_handler, run_selected, synthesize_handler
from webui.train_tab import QUALITY_PLAYERS, quality_refresh

SAMPLING = dict(temperature=0.75, length_penalty=1.0, repetition_penalty=5.0, top_k=50, top_p=0.85, speed=1.0)


def make_context(root: Path) -> UIContext:
    (root / "data").mkdir(parents=True, exist_ok=True)
    return UIContext(
        output_dir=root / "output", runner=TrainingRunner(root / "output"), data_dirs=((root / "data").resolve(),)
    )


@pytest.fixture(scope="module")
def quality_run(tmp_path_factory, tiny_base):
    """A tiny run of this app (2 evaluations, one scored sentence each), trained hard enough to move away from
    its base model."""
    from utils.gpt_train import train_gpt

    root = tmp_path_factory.mktemp("app")
    ctx = make_context(root)
    csv_path = write_dataset(root / "data" / "voice", n=12)
    result = train_gpt(
        version="tiny",
        train_csv=str(csv_path),
        output_path=str(ctx.output_dir),
        num_epochs=2,
        batch_size=4,
        grad_acumm=1,
        learning_rate=1e-3,
        enable_mixed_precision=False,
        num_workers=0,
        quality_eval=1,
        quality_max_audio_tokens=10,
        best_by="cer",
        whisper_model=str(bundled_whisper_dir()),
    )
    return ctx, Path(result.run_dir)


@pytest.mark.slow
def test_fine_tune_tab_shows_the_scores_the_best_and_the_latest_clips(quality_run):
    ctx, run_dir = quality_run
    ctx.runner.state.run_dir = str(run_dir)  # the page attached to this run (as after a reload)
    shown_table, best, _voice, _plot, *players, seen = quality_refresh(ctx, "")
    players = players[:QUALITY_PLAYERS]  # then the probe players (test_voice_run.py)
    table = quality_view.evaluation_rows(shown_table)  # each evaluation; its retention row (English) under it
    assert list(table["step"]) == [6, 3, 0] and table.columns.tolist() == quality_view.QUALITY_COLUMNS
    assert shown_table["notes"].str.startswith("retention es").sum() == 3, "Spanish, not trained, at each evaluation"
    assert all(float(cer) > 0.5 for cer in table["CER"]), "noise is not understood"
    assert all(cell.startswith("— less than 0.3 s of speech") for cell in table["similarity"]), "says why it is empty"
    assert "Best checkpoint** by **cer**" in best and "step 3" in best
    shown = [p for p in players if p["visible"]]
    assert len(players) == QUALITY_PLAYERS and len(shown) == 1
    rate, wav = shown[0]["value"]
    assert rate == 24000 and 0.3 < len(wav) / rate < 0.6 and "step 6" in shown[0]["label"]
    assert quality_refresh(ctx, seen)[0].__class__.__name__ != "DataFrame", "unchanged: nothing is sent again"


def test_evaluation_clips_reads_only_the_runs_evals_folder(tmp_path):
    run = tmp_path / "run"
    (run / "evals" / "step_1").mkdir(parents=True)
    sf.write(str(run / "evals" / "step_1" / "0.wav"), np.zeros(2400, dtype=np.float32), 24000)
    sf.write(str(tmp_path / "secret.wav"), np.ones(2400, dtype=np.float32) * 0.5, 24000)
    record = {"step": 1, "files": ["../secret.wav", "evals/step_1/0.wav", "/etc/passwd"], "texts": ["a", "b", "c"]}
    clips = quality_view.evaluation_clips(run, record, 3)
    assert [label for label, _ in clips] == ["step 1 · b"]


def test_quality_table_says_why_a_score_is_empty():
    records = [
        {"type": "eval", "step": 3},
        {
            "type": "quality",
            "step": 3,
            "cer": None,
            "wer": None,
            "similarity": 0.81234,
            "duration_ratio": 1.1,
            "combined": None,
            "is_best": True,
            "reasons": ["cer: Whisper model 'small' is not available: download failed (no network)"],
        },
    ]
    table = quality_view.quality_frame(records)
    assert table.iloc[0]["CER"] == "— Whisper model 'small' is not available" and table.iloc[0]["similarity"] == "0.812"
    assert table.iloc[0]["best"] == "★" and "download failed" in table.iloc[0]["notes"]


@pytest.mark.slow
def test_picking_a_run_fills_its_language_and_serves_no_file_of_it(quality_run):
    ctx, run_dir = quality_run
    language, reference, *_sampling = run_selected(ctx, str(run_dir), "")
    assert language["value"] == "en"
    assert reference["value"] is None and "the run's own reference clip" in reference["label"]


@pytest.mark.slow
def test_speech_waits_while_a_training_run_holds_the_gpu(quality_run, monkeypatch, tmp_path):
    """The run trains in its own process, outside the page's GPU queue: on a GPU, Generate and Compare are refused
    while it is active (a second model there could end it with out-of-memory); Transcribe goes to the CPU."""
    import webui.context
    from utils.device.gpu import GPUInfo

    ctx, run_dir = quality_run
    monkeypatch.setattr(webui.context, "detect_gpu", lambda: GPUInfo(available=True, name="GPU", device_count=1))
    monkeypatch.setattr(ctx.runner, "is_active", lambda: True)
    with pytest.raises(Exception, match="A training run is using the GPU"):
        synthesize_handler(ctx, str(run_dir), "", None, "hello", "en", **SAMPLING, max_tokens=10)
    with pytest.raises(Exception, match="A training run is using the GPU"):
        compare_handler(ctx, str(run_dir), "", None, "hello", "en", 1, "small", **SAMPLING, max_tokens=10)
    # Transcription is not refused: it runs on the CPU, beside the run (issue 28: it never holds back Start).
    from utils.quality import asr

    recording = write_dataset(ctx.output_dir.parent / "data" / "rec", n=1).parent / "wavs" / "clip_000.wav"
    asr.clear_transcriber_cache()
    csv_path = transcribe_handler(ctx, [str(recording)], "tiny.en", "en", "me", progress=lambda *a, **k: None)
    assert Path(csv_path).is_file() and {key[1] for key in asr._CACHE} == {"cpu"}, "on the CPU, not the run's GPU"
    monkeypatch.setattr(ctx.runner, "is_active", lambda: False)
    audio, *_ = synthesize_handler(ctx, str(run_dir), "", None, "hello", "en", **SAMPLING, max_tokens=10)
    assert Path(audio).is_file()


@pytest.mark.slow
def test_compare_with_the_base_model_same_text_reference_and_seed(quality_run):
    ctx, run_dir = quality_run
    finetuned, base, scores = compare_handler(
        ctx, str(run_dir), "", None, "hello world", "en", 7, "small", **SAMPLING, max_tokens=10
    )
    assert finetuned[0] == base[0] == 24000 and len(finetuned[1]) == len(base[1])
    assert not np.allclose(finetuned[1], base[1]), "the fine-tuned weights speak differently"
    again, _, _ = compare_handler(
        ctx, str(run_dir), "", None, "hello world", "en", 7, "small", **SAMPLING, max_tokens=10
    )
    assert np.array_equal(again[1], finetuned[1]), "the same seed gives the same audio"
    other, _, _ = compare_handler(
        ctx, str(run_dir), "", None, "hello world", "en", 8, "small", **SAMPLING, max_tokens=10
    )
    assert not np.array_equal(other[1], finetuned[1])
    assert list(scores["model"]) == ["fine-tuned", "base tiny"]
    # No 'small' Whisper model on this machine: English is scored with the bundled tiny.en.
    assert scores["cer"].notna().all()
    with pytest.raises(Exception, match="outside the folders"):
        compare_handler(ctx, str(run_dir), "", None, "hello", "en", 1, "/etc", **SAMPLING, max_tokens=10)


@pytest.mark.slow
def test_compare_with_base_scores_both_sides_from_a_notebook(quality_run, whisper, tmp_path):  # noqa: F811
    _, run_dir = quality_run
    result = compare_with_base(
        run_dir, "hello world", seed=3, transcriber=whisper, output_dir=tmp_path, max_audio_tokens=10
    )
    assert result.finetuned.file.is_file() and result.base.file.is_file() and result.seed == 3
    assert result.reference == run_dir / "ready" / "reference.wav"
    for side in (result.finetuned, result.base):
        assert side.score.transcript is not None and side.score.cer is not None and side.score.duration > 0.3


def test_whisper_models_from_the_web_stay_in_the_models_folder(tmp_path):
    roots = make_context(tmp_path).roots
    assert roots.whisper_model("large-v3") == "large-v3" and roots.whisper_model("Systran/faster-whisper-small")
    inside = models_root() / "whisper" / "mine"
    assert roots.whisper_model(str(inside)) == str(inside.resolve())
    for outside in ("/etc", "./models/../output", "~/whisper", "a/b/../../../etc", ""):
        with pytest.raises(PathRefused):
            roots.whisper_model(outside)


@pytest.fixture
def checked_voice(tmp_path, espeak_clips):  # noqa: F811 - the shared session fixture
    """The app, and a dataset in its data folder: 6 rows of one voice, row 1 hard-clipped."""
    ctx = make_context(tmp_path)
    folder = tmp_path / "data" / "voice"
    (folder / "wavs").mkdir(parents=True)
    lines = ["audio_file|text|speaker_name"]
    for i, text in enumerate(SENTENCES):
        wav, rate = sf.read(str(espeak_clips[VOICE_A, i]), dtype="float32")
        sf.write(str(folder / "wavs" / f"s{i}.wav"), np.clip(wav * 8, -0.9, 0.9) if i == 1 else wav, rate)
        lines.append(f"wavs/s{i}.wav|{text}|speaker")
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n")
    return ctx, folder / "metadata.csv"


def test_dataset_check_then_prepare_with_the_edits_made_in_the_table(checked_voice):
    ctx, csv_path = checked_voice
    before = digests(csv_path.parent)
    summary, update, originals, *players = check_handler(
        ctx, str(csv_path), "", "en", 11.6, "small", 0.3, progress=lambda *a, **k: None
    )
    table = update["value"]
    assert update["row_count"] == (len(table), "fixed"), "no row can be added to the flagged rows"
    # No Whisper small here: English transcripts are checked with the bundled tiny.en, offline.
    assert "1 of 6 rows flagged" in summary and "Transcripts not checked" not in summary
    assert list(table["audio_file"]) == ["wavs/s1.wav"] and "clipped" in table.iloc[0]["problems"]
    assert float(re.search(r"clipped ([\d.]+)%", table.iloc[0]["measures"]).group(1)) > 0.1 and originals == {
        "wavs/s1.wav": SENTENCES[1]
    }
    assert players[0]["visible"] and players[0]["value"][0] == 22050 and not players[1]["visible"]

    # The user ticks nothing but corrects the text, in the page: the correction reaches the prepared copy.
    edited = table.copy()
    edited.loc[0, "text"] = "we train the model on our very own speech"
    message, train_csv, eval_csv, _, *_players = prepare_handler(
        ctx, str(csv_path), "", "en", 11.6, "fixed", "tiny", False, edited, originals, progress=lambda *a, **k: None
    )
    assert "1 transcript(s) corrected in the prepared copy" in page_text(message)
    texts = [line.split("|")[1] for name in (train_csv, eval_csv) for line in Path(name).read_text().splitlines()[1:]]
    assert "we train the model on our very own speech" in texts and SENTENCES[1] not in texts
    # Ticking exclude leaves the row out of a new prepared dataset.
    edited.loc[0, "exclude"] = True
    message, train_csv, eval_csv, rows, *_players = prepare_handler(
        ctx, str(csv_path), "", "en", 11.6, "clean", "tiny", False, edited, originals, progress=lambda *a, **k: None
    )
    assert "1 row(s) excluded on request: wavs/s1.wav" in page_text(message) and rows == 4
    assert digests(csv_path.parent) == before, "the user's files are unchanged"


def test_the_dataset_check_reads_no_audio_outside_the_csvs_own_folder(checked_voice, tmp_path):
    """A CSV may name any path: the check (transcripts, measures, players) reads only what validation may."""
    ctx, csv_path = checked_voice
    outside = tmp_path / "private"
    outside.mkdir()
    secret = outside / "memo.wav"
    secret.write_bytes((csv_path.parent / "wavs" / "s1.wav").read_bytes())  # clipped: flagged if it were read
    with csv_path.open("a") as handle:
        handle.write(f"{secret}|a private memo|speaker\n")
    summary, update, originals, *players = check_handler(
        ctx, str(csv_path), "", "en", 11.6, "small", 0.3, progress=lambda *a, **k: None
    )
    table = update["value"]
    assert update["row_count"] == (len(table), "fixed"), "no row can be added to the flagged rows"
    assert "1 of 6 rows flagged" in summary, summary
    assert str(secret) not in set(table["audio_file"]) and str(secret) not in originals
    assert sum(bool(p.get("visible")) for p in players) == 1


def test_edits_from_the_table_ignore_rows_the_check_did_not_list():
    originals = {"wavs/a.wav": "text a", "wavs/b.wav": "text b"}
    table = pd.DataFrame(
        [
            {"exclude": "true", "text": "text a", "audio_file": "wavs/a.wav"},
            {"exclude": False, "text": "new b", "audio_file": "wavs/b.wav"},
            {"exclude": True, "text": "x", "audio_file": "/etc/passwd"},
        ]
    )
    assert quality_view.edits_from_table(table, originals) == (["wavs/a.wav"], {"wavs/b.wav": "new b"})
    assert quality_view.edits_from_table(None, originals) == ([], {})


def test_an_early_stop_is_what_the_page_says_when_the_run_ends(tmp_path):
    runner = TrainingRunner(tmp_path / "output")
    early = {"step": 6, "message": "Stopped early at step 6: the cer did not improve for 1 evaluation(s)."}
    runner._apply(
        {
            "type": "result",
            "status": "stopped",
            "result": {"run_dir": str(tmp_path), "stop_checkpoint": "c.pth", "early_stop": early},
        }
    )
    assert runner.state.status == "stopped" and runner.state.message == early["message"]
    runner._apply({"type": "result", "status": "stopped", "result": {"stop_checkpoint": "c.pth", "early_stop": None}})
    assert runner.state.message.startswith("Stopped. Checkpoint saved: `c.pth`")


def test_prepare_on_the_page_denoises_on_request_and_plays_clips_before_and_after(checked_voice):
    ctx, csv_path = checked_voice
    message, train_csv, _, rows, *players = prepare_handler(
        ctx, str(csv_path), "", "en", 11.6, "denoised", "tiny", False, None, None, True, True,
        progress=lambda *a, **k: None,
    )  # fmt: skip
    text = page_text(message)
    assert rows >= 4 and "Loudness evened to -23 LUFS" in text and "Denoised with DeepFilterNet 3" in text
    visible = [p for p in players if p.get("visible")]
    assert len(visible) == 4 and [p["label"].split(":")[0] for p in visible] == ["before", "after"] * 2
    assert all(p["value"][0] > 0 and len(p["value"][1]) > 0 for p in visible)
    assert visible[0]["label"].split(": ")[1] == visible[1]["label"].split(": ")[1], "a pair is one clip"
