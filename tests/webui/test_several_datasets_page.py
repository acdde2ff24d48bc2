"""Several datasets in a real browser, as a person uses it: two datasets (German speaker_a, French speaker_b) checked
and added to the run's list in the Dataset tab, trained from the Fine-tune tab, each voice and the retention language
in the score table, and the Test tab offering the named voices."""

from __future__ import annotations

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
            click_button(driver, "➕ Add the checked dataset to the run")
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
        type_text(driver, "Sentences scored per evaluation", "1", "input", exact=True)
        type_text(driver, "Sampling settings tried at the end", "0", "input", exact=True)
        time.sleep(1)
        click_button(driver, "Start training")
        wait_text(driver, "Training finished", 600, "#run-status")
        table = wait_text(driver, "retention en", 60, "#quality-table")
        driver.save_screenshot(str(folder / "scores.png"))
        assert "voice speaker_a" in table and "voice speaker_b" in table and "over the voices (mean)" in table
        assert table.count("retention en") == 2, "step 0 and the last evaluation"
        voice = driver.find_element("css selector", "#quality-voice").text
        assert "Other languages" in voice and "English" in voice, voice

        open_tab(driver, "Test")
        wait_for(driver, lambda d: d.find_element("css selector", "#test-voice").is_displayed(), 60, "the Voice choice")
        assert "speaker_b" in choose(driver, "test-voice", "speaker_b")
    finally:
        if driver is not None:
            driver.quit()
        server.close()
