"""Several datasets in a real browser, as a person uses it: two datasets (German speaker_a, French speaker_b) checked
and added to the run's list in the Dataset tab, and trained from the Fine-tune tab into a run with a named voice per
speaker. (Without scoring, to keep the suite's time: the voices' scores and the retention rows on the page are
tested on the CLI's scored run, tests/training/test_several_datasets.py.)"""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import write_clip
from tests.webui.app_server import app_with_tiny_model
from tests.webui.browser import (
    CHROMEDRIVER,
    CHROMIUM,
    check_dataset,
    choose,
    click_button,
    input_value,
    open_accordion,
    open_tab,
    start_chromium,
    type_text,
    wait_for,
    wait_text,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

GERMAN = ["guten morgen meine freunde", "wir gehen heute in den park", "das haus ist sehr alt"]
FRENCH = ["bonjour mes amis", "nous allons au parc aujourd hui", "la maison est tres vieille"]


def _csv(folder, texts, speaker, n, seed):
    lines = ["audio_file|text|speaker_name"]
    for i in range(n):
        clip = write_clip(folder / "wavs" / f"clip_{i:02d}.wav", 2.0 + 0.5 * (i % 3), seed + i)
        lines.append(f"{clip}|{texts[i % len(texts)]}|{speaker}")
    path = folder / "metadata.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_two_datasets_train_from_the_page_with_each_voice_scored(tmp_path_factory, tiny_base):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and ChromeDriver are not installed (./run_tests.sh installs them)")
    folder = tmp_path_factory.mktemp("several-page")
    german = _csv(folder / "data" / "de", GERMAN, "speaker_a", 7, 0)
    french = _csv(folder / "data" / "fr", FRENCH, "speaker_b", 6, 30)
    server = app_with_tiny_model(folder, tiny_base)
    driver = None
    try:
        server.wait_ready()
        driver = start_chromium(folder / "chrome-profile", 1400, 2600)
        driver.get(server.url)
        wait_text(driver, "XTTS fine-tuning studio")
        for csv, language, rate in ((german, "de", "1"), (french, "fr", "2")):
            open_tab(driver, "Dataset")
            choose(driver, "dataset-language", language)
            check_dataset(driver, csv)
            wait_text(driver, "Ready to train", 90, "#dataset-summary")
            open_accordion(driver, "Several datasets in one run")
            type_text(driver, "How often its rows are drawn", rate)
            time.sleep(1)
            click_button(driver, "+ Add the checked dataset to the run")
            wait_for(driver, lambda d, c=csv: str(c) in input_value(d, "dataset-run-list"), 30, "the dataset listed")
        listed = input_value(driver, "dataset-run-list").splitlines()
        assert listed == [f"de={german}", f"fr:2={french}"], listed
        driver.save_screenshot(str(folder / "dataset-list.png"))

        open_tab(driver, "Fine-tune")
        wait_text(driver, "What will be applied")
        assert input_value(driver, "form-train_csv").splitlines() == listed
        choose(driver, "form-language", "de")
        type_text(driver, "Epochs", "1", "input", exact=True)
        type_text(driver, "Learning rate", "0.001", "input", exact=True)
        open_accordion(driver, "Measured quality")
        type_text(driver, "Sentences scored per evaluation", "0", "input", exact=True)
        time.sleep(1)
        click_button(driver, "Start training")
        wait_text(driver, "Training finished", 600, "#run-status")
        driver.save_screenshot(str(folder / "finished.png"))
        run_dir = next((folder / "output").glob("*/ready")).parent
        run = json.loads((run_dir / "run.json").read_text())
        assert run["arguments"]["train_csv"] == [f"de={german}", f"fr:2={french}"]
        assert set(run["voices"]) == {"speaker_a", "speaker_b"} and (run_dir / "ready" / "voices").is_dir()
        report = json.loads((run_dir / "dataset_report.json").read_text())
        assert [d["rows_per_epoch"] for d in report["datasets"]] == [6, 10]  # 6 of 7 rows (one held out), 2 x 5

        open_tab(driver, "Test")
        wait_for(driver, lambda d: d.find_element("css selector", "#test-voice").is_displayed(), 60, "the Voice choice")
        assert "speaker_b" in choose(driver, "test-voice", "speaker_b")
        wait_for(driver, lambda d: input_value(d, "test-language") == "fr", 30, "the voice's language chosen")
    finally:
        if driver is not None:
            driver.quit()
        server.close()
