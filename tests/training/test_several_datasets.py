"""Several datasets, speakers and languages in one run (utils.data.mix, utils.training.evaluation.voices,
utils.training.evaluation.retention): one tiny run from the CLI on two datasets (German speaker_a, French speaker_b
drawn twice an epoch), each speaker a named voice with its own reference, scores and verdict; English, which the run
does not train, spoken and scored at step 0 and at the last evaluation; the named voices loaded in coqui by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import run_watched, write_clip, write_dataset
from utils.data.mix import DatasetEntry, draw_counts, epoch_draw, normalized_csvs
from utils.data.mix_check import validate_datasets
from utils.files import read_jsonl
from utils.options.arguments import TrainArguments
from utils.quality.asr import bundled_whisper_dir
from utils.training.inputs.batching import LengthGroupedBatchSampler

GERMAN = ["guten morgen meine freunde", "wir gehen heute in den park", "das haus ist sehr alt"]
FRENCH = ["bonjour mes amis", "nous allons au parc aujourd hui", "la maison est tres vieille"]


def _datasets(root: Path) -> tuple[Path, Path]:
    german = write_dataset(root / "de", n=8, texts=GERMAN)
    french = write_dataset(root / "fr", n=6, texts=FRENCH, seed_offset=40)
    french.write_text(french.read_text().replace("speaker_a", "speaker_b"))
    return german, french


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, tiny_base):
    """The CLI's run on the two datasets; (run folder, its quality records)."""
    root = tmp_path_factory.mktemp("several")
    german, french = _datasets(root)
    command = [sys.executable, "-m", "utils.cli", "train", "--version", "tiny", "--language", "de"]
    command += ["--train-csv", f"de={german}", f"fr:2={french}", "--output-path", str(root / "out")]
    command += ["--num-epochs", "1", "--batch-size", "4", "--grad-acumm", "1", "--precision", "fp32"]
    command += ["--num-workers", "0", "--quality-eval", "1", "--quality-max-audio-tokens", "10"]
    command += ["--quality-eval-share", "1", "--inference-search", "0", "--reference-search", "0"]
    command += ["--whisper-model", str(bundled_whisper_dir()), "--learning-rate", "1e-3"]
    finished = run_watched(command, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert finished.returncode == 0, finished.stderr[-3000:]
    run_dir = Path(json.loads(finished.stdout[finished.stdout.rindex("{\n") :])["run_dir"])
    quality = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "quality"]
    return run_dir, quality


def test_the_run_trains_each_dataset_in_its_language_at_its_rate(mixed_run):
    run_dir, _ = mixed_run
    report = json.loads((run_dir / "dataset_report.json").read_text())
    german, french = report["datasets"]
    assert (german["language"], german["rate"], german["speakers"]) == ("de", "x1", ["speaker_a"])
    assert (french["language"], french["rate"], french["speakers"]) == ("fr", "x2", ["speaker_b"])
    assert french["rows_per_epoch"] == 2 * french["rows_train"] and german["rows_per_epoch"] == german["rows_train"]
    assert report["rows_per_epoch"] == german["rows_per_epoch"] + french["rows_per_epoch"]
    run = json.loads((run_dir / "run.json").read_text())
    steps = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "train"]
    assert steps[-1]["total_steps"] == -(-report["rows_per_epoch"] // 4)  # the epoch is the drawn rows
    assert run["arguments"]["train_csv"] == [f"de={german['csv']}", f"fr:2={french['csv']}"]


def test_each_speaker_is_a_voice_with_its_own_reference_scores_and_verdict(mixed_run):
    run_dir, quality = mixed_run
    assert [r["step"] for r in quality][0] == 0 and quality[0]["baseline"] and len(quality) >= 2
    for record in quality:
        assert set(record["voices"]) == {"speaker_a", "speaker_b"} and record["speaker_rule"] == "mean"
        files = {name: voice["files"] for name, voice in record["voices"].items()}
        assert all(f.startswith(f"evals/step_{record['step']}/voices/{name}/") for name in files for f in files[name])
        texts = {name: voice["texts"][0] for name, voice in record["voices"].items()}
        assert texts["speaker_a"] in GERMAN and texts["speaker_b"] in FRENCH
        naturalness = [v["naturalness"] for v in record["voices"].values()]
        assert record["naturalness"] == pytest.approx(sum(naturalness) / 2, abs=1e-3)  # the mean over the voices
    run = json.loads((run_dir / "run.json").read_text())
    voices = run["voices"]
    assert voices["speaker_a"]["language"] == "de" and voices["speaker_b"]["language"] == "fr"
    french_folder = Path(run["arguments"]["train_csv"][1].split("=", 1)[1]).parent
    assert voices["speaker_b"]["reference"]["sources"][0].startswith(str(french_folder))
    assert set(run["verdict"]["voices"]) == {"speaker_a", "speaker_b"}
    assert "speaker_a: " in run["verdict"]["text"] and "speaker_b: " in run["verdict"]["text"]


def test_a_language_the_run_does_not_train_is_scored_at_step_0_and_at_each_evaluation(mixed_run):
    run_dir, quality = mixed_run
    for record in quality:
        english = record["retention"]["en"]
        assert english["cer"] is not None and english["naturalness"] is not None and english["clips"] == 2
        assert all((run_dir / f).is_file() for f in english["files"])
        # German and French are not transcribed by an English-only Whisper: no CER, and the reason says so.
        assert record["voices"]["speaker_a"]["cer"] is None
        assert any("English only" in r for r in record["voices"]["speaker_a"]["reasons"])
    verdict = json.loads((run_dir / "run.json").read_text())["verdict"]
    (english,) = verdict["retention"]
    before, after = quality[0]["retention"]["en"]["cer"], quality[-1]["retention"]["en"]["cer"]
    assert english["text"].startswith(f"English CER {before:.0%} -> {after:.0%}") and "since step 0" in english["text"]
    assert "Other languages: English CER" in verdict["text"]


def test_the_named_voices_load_in_coqui_by_name_and_speak_through_synthesize(mixed_run):
    from utils.model.inference import synthesize
    from utils.model.speaker_latents import coqui_xtts

    run_dir, _ = mixed_run
    ready = run_dir / "ready"
    info = json.loads((ready / "finetune.json").read_text())
    assert info["voices"]["speaker_b"] == {"files": ["voices/speaker_b.wav"], "language": "fr"}
    assert (ready / "voices" / "speaker_a.wav").is_file() and (ready / "voices" / "speaker_b.wav").is_file()
    xtts, config = coqui_xtts(ready)
    xtts.load_checkpoint(config, checkpoint_dir=str(ready), speaker_file_path=str(ready / "speakers_xtts.pth"))
    assert {"speaker_a", "speaker_b"} <= set(xtts.speaker_manager.speakers)
    a, b = (xtts.speaker_manager.speakers[name]["speaker_embedding"] for name in ("speaker_a", "speaker_b"))
    assert not torch.equal(a, b)
    spoken = xtts.synthesize("bonjour", speaker_wav=None, language="fr", speaker="speaker_b")
    assert np.asarray(spoken["wav"]).size > 0
    speech = synthesize(ready / "model.pth", "bonjour mes amis", voice="speaker_b", max_audio_tokens=20, seed=1)
    assert speech.wav.size > 0
    with pytest.raises(ValueError, match="'nobody' is not a voice of .*'speaker_a', 'speaker_b'"):
        synthesize(ready / "model.pth", "hallo", voice="nobody")


def test_the_page_table_shows_each_voice_and_the_retention_rows(mixed_run):
    from webui.quality_view import quality_frame

    _, quality = mixed_run
    notes = quality_frame(quality)["notes"].tolist()
    assert any(n.startswith("voice speaker_a") for n in notes) and any(n.startswith("voice speaker_b") for n in notes)
    assert sum(n.startswith("retention en") for n in notes) == len(quality)
    assert any(n.startswith("over the voices (mean)") for n in notes)


def test_a_resume_with_another_list_of_datasets_is_refused_naming_the_difference(mixed_run):
    from utils.gpt_train import train_gpt

    run_dir, _ = mixed_run
    arguments = json.loads((run_dir / "run.json").read_text())["arguments"]
    changed = [arguments["train_csv"][0], arguments["train_csv"][1].replace("fr:2=", "fr:3=")]
    with pytest.raises(ValueError, match=r"the datasets .*x3.* \(the run trained on .*x2"):
        train_gpt(**{**arguments, "train_csv": changed, "resume_from": str(run_dir), "num_epochs": 2})


def test_entries_are_read_checked_and_refused_with_the_reason(tmp_path):
    assert normalized_csvs(["a.csv", {"csv": "b.csv", "language": "fr", "share": 0.2}], "", "de") == (
        ("de=a.csv", "fr:20%=b.csv"),
        ("", ""),
    )
    refusals = {
        "weight": (["de:0=a.csv"], ""),
        "unknown keys": ([{"csv": "a.csv", "lang": "de"}], ""),
        "2 files for 1 datasets": (["de=a.csv"], ["x.csv", "y.csv"]),
        "every dataset is a share": (["de:20%=a.csv"], ""),
        "shares add up to more than 90%": (["de=a.csv", "fr:50%=b.csv", "en:45%=c.csv"], ""),
    }
    for why, (train, evaluation) in refusals.items():
        with pytest.raises(ValueError, match=why):
            normalized_csvs(train, evaluation, "de")
    with pytest.raises(ValueError, match="is listed twice"):
        normalized_csvs(["de=a.csv", "fr=b.csv"], ["b.csv", ""], "de")
    with pytest.raises(ValueError, match="language 'en' is none of the datasets' \\(de, fr\\)"):
        TrainArguments(train_csv=["de=a.csv", "fr=b.csv"], language="en")
    # One dataset in the run's language at weight 1 is the plain form (the same run, the same fingerprint).
    assert TrainArguments(train_csv=["de=a.csv"], language="de").train_csv == "a.csv"
    assert TrainArguments(train_csv=["de=a.csv", "fr=b.csv", "es=c.csv"], language="de").retention_languages == "auto"
    from utils.quality.retention_languages import retention_languages

    assert retention_languages("auto", ["de"]) == ["en"] and retention_languages("auto", ["en", "es"]) == ["fr"]
    with pytest.raises(ValueError, match="only the run's own language .* may be new"):
        TrainArguments(train_csv=["de=a.csv", "xx=b.csv"], language="de")
    with pytest.raises(ValueError, match="retention_languages: 'de' is trained by this run"):
        TrainArguments(train_csv=["en=a.csv", "de=b.csv"], language="en", retention_languages="de")


def test_weights_and_shares_set_the_rows_each_epoch_draws():
    entries = [DatasetEntry("a", "en", 1.0), DatasetEntry("b", "de", 0.5), DatasetEntry("c", "fr", share=0.2)]
    counts = draw_counts([10, 6, 50], entries)
    assert counts == [10, 3, 3]  # c: 20% of the epoch = 0.25 x the 13 weighted rows
    groups = [list(range(10)), list(range(10, 16)), list(range(16, 66))]
    sampler = LengthGroupedBatchSampler([1.0] * 66, 4, seed=3, draws=(groups, counts))
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        rows = [i for batch in sampler.epoch_batches() for i in batch]
        assert len(rows) == 16 == len(sampler) * 4 and sorted(r for r in rows if r < 10) == list(range(10))
        assert len([r for r in rows if 10 <= r < 16]) == 3 and len([r for r in rows if r >= 16]) == 3
        epochs.append(sorted(r for r in rows if r >= 16))
    assert len({tuple(e) for e in epochs}) > 1, "a share draws other rows each epoch"
    assert epoch_draw([[7, 8]], [5], lambda n: list(range(n))) == [7, 8, 7, 8, 7]
    # Two shares of 30%: each is 30% of the epoch (40 weighted rows are the other 40%).
    two = [DatasetEntry("a", "en"), DatasetEntry("b", "de", share=0.3), DatasetEntry("c", "fr", share=0.3)]
    assert draw_counts([40, 100, 100], two) == [40, 30, 30]


def test_the_same_clip_in_two_datasets_is_used_once_and_said(tmp_path):
    shared = write_clip(tmp_path / "shared.wav", 2.0, 5)
    first = write_dataset(tmp_path / "one", n=4)
    second = write_dataset(tmp_path / "two", n=4, seed_offset=20)
    for csv in (first, second):
        csv.write_text(csv.read_text() + f"{shared}|a clip in both datasets|speaker_a\n")
    report = validate_datasets([f"en={first}", f"en:2={second}"], "", "en", 22050 * 11)
    assert report.rows_usable == 9 and report.datasets[1]["rows_usable"] == 5
    assert any("the same clip in two datasets is used once" in p.reason for p in report.problems)
    assert "1 rows name a clip an earlier dataset already has" in report.summary()


def test_the_form_takes_one_dataset_per_line_inside_the_app_folders(tmp_path):
    from webui.form import arguments_from_form, form_values
    from webui.paths import AppRoots, PathRefused

    data = tmp_path / "data"
    german, french = write_dataset(data / "de", n=3), write_dataset(data / "fr", n=3, seed_offset=9)
    roots = AppRoots(tmp_path / "out", data_dirs=(data,))
    values = form_values(TrainArguments())
    values.update({"train_csv": f"de={german}\nfr:20%={french}\n", "eval_csv": "", "language": "de"})
    arguments = arguments_from_form(values, str(tmp_path / "out"), roots)
    assert arguments.train_csv == (f"de={german.resolve()}", f"fr:20%={french.resolve()}")
    assert form_values(arguments)["train_csv"] == f"de={german.resolve()}\nfr:20%={french.resolve()}"
    outside = write_dataset(tmp_path / "elsewhere", n=3)
    values["train_csv"] = f"de={german}\nfr={outside}"
    with pytest.raises(PathRefused):
        arguments_from_form(values, str(tmp_path / "out"), roots)


def test_the_cli_help_says_how_to_give_several_datasets():
    shown = subprocess.run(
        [sys.executable, "-m", "utils.cli", "train", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "LANG[:HOW_OFTEN]=PATH" in " ".join(shown.split())


def test_one_voice_in_two_languages_is_scored_and_cloned_in_the_run_language(tmp_path):
    from utils.training.evaluation.evaluation_plan import own_language_rows
    from utils.training.evaluation.voices import dataset_voices

    german, french = _datasets(tmp_path)
    french.write_text(french.read_text().replace("speaker_b", "speaker_a"))  # one speaker in both
    report = validate_datasets([f"de={german}", f"fr={french}"], "", "de", 22050 * 11)
    assert dataset_voices(report) == ([], [])
    rows = list(own_language_rows(report, "eval"))
    assert rows and all(row.text in GERMAN for row, _ in rows)
    assert {row.text for row, _ in report.iter_usable("eval")} & set(FRENCH), "French rows are held out too"


def test_each_evaluation_row_has_its_voices_and_retention_rows_under_it(mixed_run):
    from webui.quality_view import quality_frame

    _, quality = mixed_run
    table = quality_frame(quality)
    labels = [n.split(":")[0] if n.startswith(("voice ", "retention ")) else "evaluation" for n in table["notes"]]
    block = ["evaluation", "voice speaker_a", "voice speaker_b", "retention en"]
    assert labels == block * len(quality)
    assert list(table["step"]) == [s for r in reversed(quality) for s in [r["step"]] * len(block)], "newest first"
