"""The Dataset tab with hostile uploads: the same zip twice, a bomb, a zip without a CSV, a bad option, an hour-long
clip in the preview. Errors are readable messages and nothing a failed upload extracted stays on disk."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
import soundfile as sf

from tests.helpers import SENTENCES, digests, page_text, synth_speech, write_dataset
from utils.training.process.runner import TrainingRunner
from webui.context import UIContext
from webui.dataset_handlers import UPLOADS_FOLDER, validate_handler, zip_handler


@pytest.fixture
def ctx(tmp_path: Path) -> UIContext:
    # As launched with --data-dir tmp_path: the test's zips stand where an operator's data would.
    return UIContext(
        output_dir=tmp_path / "output", runner=TrainingRunner(tmp_path / "output"), data_dirs=(tmp_path.resolve(),)
    )


def voice_zip(tmp_path: Path) -> Path:
    write_dataset(tmp_path / "data", n=5)
    path = tmp_path / "voice.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted((tmp_path / "data").rglob("*")):
            archive.write(file, f"voice/{file.relative_to(tmp_path / 'data')}")
    return path


def uploads(ctx: UIContext) -> list[str]:
    folder = ctx.datasets_dir / UPLOADS_FOLDER
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_extract_and_check_twice_reuses_the_first_extraction(ctx, tmp_path):
    upload = voice_zip(tmp_path)
    before = hashlib.sha256(upload.read_bytes()).hexdigest()
    first = zip_handler(ctx, str(upload), "en", 11.6)
    second = zip_handler(ctx, str(upload), "en", 11.6)
    assert "Ready to train" in first[0] and first[-4] == second[-4], "the same train CSV both times"
    assert len(uploads(ctx)) == 1, "one copy of the upload, not two"
    assert hashlib.sha256(upload.read_bytes()).hexdigest() == before


def test_a_bomb_is_refused_with_a_message_and_leaves_nothing(ctx, tmp_path):
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("voice/metadata.csv", "audio_file|text|speaker_name\n")
        archive.writestr("voice/zeros.wav", bytes(64 * 1024**2))
    with pytest.raises(gr.Error, match=r"The zip was refused: entry 'voice/zeros.wav': .*a ratio over the limit"):
        zip_handler(ctx, str(bomb), "en", 11.6)
    assert uploads(ctx) == []


def test_a_zip_without_a_metadata_csv_says_so_and_leaves_nothing(ctx, tmp_path):
    empty = tmp_path / "clips.zip"
    with zipfile.ZipFile(empty, "w") as archive:
        for i in range(3):
            archive.writestr(f"clips/{i}.wav", b"RIFF")
    with pytest.raises(gr.Error, match=r"The zip holds no metadata CSV .* It holds 3 file\(s\) and no .csv or .txt."):
        zip_handler(ctx, str(empty), "en", 11.6)
    assert uploads(ctx) == []


def test_a_bad_option_is_reported_before_anything_is_extracted(ctx, tmp_path):
    upload = voice_zip(tmp_path)
    with pytest.raises(gr.Error, match="Language code 'klingon' is not a language code"):
        zip_handler(ctx, str(upload), "klingon", 11.6)
    assert not (ctx.datasets_dir / UPLOADS_FOLDER).exists()


def test_preview_of_a_long_recording_plays_its_beginning_only(ctx, tmp_path):
    data = tmp_path / "data"
    csv_path = write_dataset(data, n=3)
    sf.write(
        str(data / "wavs" / "long.wav"), np.stack([synth_speech(40.0, 1, 44100)] * 2, axis=1), 44100, subtype="FLOAT"
    )
    lines = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join([lines[0], "wavs/long.wav|a long recording|speaker_a", *lines[1:]]) + "\n")
    before = digests(data)
    result = validate_handler(ctx, None, str(csv_path), None, "", "en", 11.6, "tiny", False)
    first_player = result[4]
    assert first_player["visible"] and len(first_player["value"][1]) == 12 * 22050
    assert "longer than the 11.60 s limit" in result[1]["reason"][0]
    assert digests(data) == before


# --- issue 17: recordings that are not audio, or not numbers -----------------------------------------------------


@pytest.fixture
def whisper_models(tmp_path_factory, monkeypatch):
    """models/whisper/tiny.en: the bundled test model where the page looks a Whisper model up by name."""
    import shutil

    from utils.quality.asr import bundled_whisper_dir

    models = tmp_path_factory.mktemp("models")
    shutil.copytree(bundled_whisper_dir(), models / "whisper" / "tiny.en")
    monkeypatch.setenv("XTTS_MODELS_DIR", str(models))
    return models


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"empty\.wav cannot be read as audio .*upload a WAV"),
        (b"this is not audio, only text\n" * 20, r"empty\.wav cannot be read as audio"),
        ("nan", r"empty\.wav: 22050 of 22050 samples are not numbers \(NaN or infinite\).*export the recording again"),
        ("silence", r"No speech found in empty\.wav.*nothing was written"),
    ],
)
def test_a_recording_that_is_not_audio_is_named_with_what_to_do(ctx, tmp_path, whisper_models, content, message):
    """Issue 17, unclear (Gradio's generic "upstream app has raised an exception") or silently wrong ("success"
    with 0 clips for NaN samples or silence)."""
    from webui.dataset_handlers import transcribe_handler

    recording = tmp_path / "empty.wav"
    if content == "nan":
        sf.write(recording, np.full(22050, np.nan, dtype=np.float32), 22050, subtype="FLOAT")
    elif content == "silence":
        sf.write(recording, np.zeros(22050 * 3, dtype=np.float32), 22050)
    else:
        recording.write_bytes(content)
    before = digests(tmp_path)
    with pytest.raises(gr.Error, match=message):
        transcribe_handler(ctx, [str(recording)], "tiny.en", "en", "me", progress=lambda *a, **k: None)
    assert not list(ctx.datasets_dir.glob("transcribed-*")), "a failed transcription leaves no dataset folder"
    assert digests(tmp_path) == before


def test_an_edited_check_table_from_a_client_that_never_ran_the_check_is_applied(ctx, tmp_path):
    """Issue 17, silently wrong: /prepare_dataset with an edited table but no originals (no /check_dataset) dropped
    the edits."""
    from webui.dataset_handlers import prepare_handler

    csv_path = write_dataset(tmp_path / "voice", n=6)
    table = [
        {"exclude": False, "text": "a corrected transcript", "audio_file": "wavs/clip_001.wav"},
        {"exclude": True, "text": "whatever", "audio_file": "wavs/clip_004.wav"},
        {"exclude": False, "text": SENTENCES[3], "audio_file": "wavs/clip_003.wav"},  # unchanged,
    ]
    quiet = dict(progress=lambda *a, **k: None)
    message, train_csv, eval_csv, rows, *_players = prepare_handler(
        ctx, str(csv_path), "", "en", 11.6, "edited", "tiny", False, table, None, **quiet
    )
    message = page_text(message)
    assert "1 transcript(s) corrected" in message and "1 row(s) excluded on request: wavs/clip_004.wav" in message
    prepared = [line for name in (train_csv, eval_csv) for line in Path(name).read_text().splitlines()[1:]]
    assert rows == 4 and any("|a corrected transcript|" in line for line in prepared)
    # A row the dataset does not have: refused, saying so, and nothing prepared.
    table.append({"exclude": True, "text": "x", "audio_file": "wavs/not_in_this_dataset.wav"})
    with pytest.raises(gr.Error, match=r"names 1 row\(s\) this dataset does not have .*not_in_this_dataset"):
        prepare_handler(ctx, str(csv_path), "", "en", 11.6, "other", "tiny", False, table, {}, **quiet)
    assert not (ctx.datasets_dir / "other").exists()
