"""A real browser (headless Chromium through Selenium) uses the studio as a person does, and the tests assert on
what that person sees: tab labels, texts, and the coloured pixels of the plots in screenshots. One app server
and one browser serve every test of the module; one tiny run is trained from the page."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import write_clip
from tests.webui.app_server import AppServer
from tests.webui.browser import (
    CHROMEDRIVER,
    CHROMIUM,
    EVERY_ORDER,
    TAB_NAMES,
    click_button,
    field,
    open_accordion,
    open_tab,
    plot_parts,
    plot_series_pixels,
    readable_table,
    selected_tab,
    start_chromium,
    tab_labels,
    wait_for,
    wait_text,
)
from tests.webui.test_client import absolute_path_csv
from utils.files import read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EPOCHS = 4
LINE_PIXELS = 150  # a drawn line across a plot a few hundred pixels wide covers far more; an undrawn one none
LEGEND_PIXELS = 8  # the legend's coloured symbol


@pytest.fixture(scope="module")
def studio(tmp_path_factory, tiny_base):
    """(app server, browser, data folder): the app as `./run_app.sh --data-dir data` starts it, at 1400 px."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and ChromeDriver are not installed (./run_tests.sh installs them)")
    folder = tmp_path_factory.mktemp("browser")
    data = folder / "data"
    absolute_path_csv(data)
    ljspeech = data / "ljspeech"
    for i, text in enumerate(("hello there", "the quick brown fox", "one two three four")):
        write_clip(ljspeech / "wavs" / f"LJ{i:03d}.wav", 1.5, i)
        with open(ljspeech / "metadata.csv", "a", encoding="utf-8") as handle:
            handle.write(f"LJ{i:03d}|{text}|{text}\n")
    server = AppServer(folder / "output", folder / "app.log", data_dirs=(data,))
    driver = None
    try:
        server.wait_ready()
        driver = start_chromium(folder / "chrome-profile", 1400, 2200)
        driver.get(server.url)
        wait_text(driver, "XTTS fine-tuning studio")
        field(driver, "train CSV path on this machine")
        yield server, driver, data
    finally:
        if driver is not None:
            driver.quit()
        server.close()


def check_dataset(driver, csv_path) -> None:
    open_tab(driver, "Dataset")
    typed = field(driver, "train CSV path on this machine")
    typed.clear()
    typed.send_keys(str(csv_path))
    time.sleep(1)
    click_button(driver, "Check dataset")


def test_the_tab_bar_keeps_four_tabs_whatever_the_order_of_visits(studio):
    _, driver, _ = studio
    expected = [f"{i}. {name}" for i, name in enumerate(TAB_NAMES, 1)]
    assert tab_labels(driver) == expected
    for digit in EVERY_ORDER:  # every order of the four tabs, as consecutive visits
        name = TAB_NAMES[int(digit) - 1]
        open_tab(driver, name)
        wait_for(driver, lambda d, name=name: name in selected_tab(d), 10, f"the {name} tab to open")
        assert tab_labels(driver) == expected, f"after opening {name}: {tab_labels(driver)}"


def test_the_ljspeech_summary_shows_its_full_text(studio):
    _, driver, data = studio
    check_dataset(driver, data / "ljspeech" / "metadata.csv")
    summary = wait_text(driver, "Ready to train", 90, "#dataset-summary")
    assert "LJSpeech format detected (id|text|normalized text, audio in wavs/<id>.wav)." in summary
    assert "held out for evaluation" in summary, "the summary goes on after <id>"


def assert_plot_drawn(driver, elem_id: str) -> dict:
    parts = plot_parts(driver, elem_id)
    series = parts["labels"]
    assert len(series) >= 2, f"{elem_id}: the legend names its series: {parts}"
    colors = dict(zip(series, parts["colors"], strict=True))
    assert len(set(colors.values())) == len(colors), f"{elem_id}: one colour per series: {colors}"
    pixels = plot_series_pixels(driver, elem_id, colors)
    for name, found in pixels.items():
        assert found["plot"] >= LINE_PIXELS, f"{elem_id}: no {name} line drawn in the plot area: {pixels}"
        assert found["legend"] >= LEGEND_PIXELS, f"{elem_id}: {name} not in the legend: {pixels}"
    return pixels


def test_a_run_started_from_the_page_draws_its_plots_and_reads_well(studio, tmp_path):
    from selenium.webdriver.common.by import By

    server, driver, data = studio
    check_dataset(driver, data / "metadata.csv")
    wait_text(driver, "Ready to train", 90, "#dataset-summary")
    # The transcript check works offline (the bundled Whisper tiny.en) and its table reads well at 1400 px.
    open_accordion(driver, "Check transcripts and audio (")
    click_button(driver, "Check transcripts and audio")
    wait_text(driver, "rows flagged", 240, "#dataset-check-summary")
    time.sleep(1)
    assert readable_table(driver, "check-table") == []

    open_tab(driver, "Fine-tune")
    wait_text(driver, "What will be applied")
    epochs = field(driver, "Epochs", "input", exact=True)
    epochs.clear()
    epochs.send_keys(str(EPOCHS))
    # One scored sentence per evaluation (the default is 3): the score table below needs only one.
    open_accordion(driver, "Measured quality")
    sentences = field(driver, "Sentences scored per evaluation", "input", exact=True)
    sentences.clear()
    sentences.send_keys("1")
    time.sleep(1)
    click_button(driver, "Start training")

    # Before its first step the run speaks its base weights (the step-0 baseline, sentences and probes): on a loaded
    # 2-core CPU the first generation of a process takes tens of seconds, and its scoring then shares the cores.
    status = wait_text(driver, "Step ", 600)
    assert "Running" in status or "Finished" in status
    first_memory = wait_text(driver, "training process", 60, "#memory-panel")
    deadline, changed = time.time() + 60, False
    while time.time() < deadline and not changed:
        time.sleep(1.5)
        changed = driver.find_element(By.CSS_SELECTOR, "#memory-panel").text != first_memory
    assert changed, "the memory panel did not update"

    # Reloading the page re-attaches to the run: its progress comes back without starting anything, and the
    # form shows the run's own settings, not the defaults (10 epochs).
    driver.refresh()
    wait_text(driver, "XTTS fine-tuning studio")
    open_tab(driver, "Fine-tune")
    wait_text(driver, "Step ", 60)
    epochs = field(driver, "Epochs", "input", exact=True)
    wait_for(driver, lambda d: epochs.get_attribute("value") == str(EPOCHS), 20, "the run's epochs in the form")
    # The scored evaluations speak four probes besides the sentence, and the base weights are scored at step 0: on
    # a loaded 2-core CPU the tiny model's babble (every probe to its cap, the long one ~20 s) takes minutes to score.
    wait_text(driver, "Training finished", 900)
    time.sleep(2 * 1.5 + 1)  # two refreshes: the plots' data, then their series

    # What a person sees: both plots draw a coloured line for each series inside their plot area, with a legend.
    driver.save_screenshot(str(tmp_path / "finished.png"))
    loss = assert_plot_drawn(driver, "loss-plot")
    assert set(loss) == {"train", "eval"}
    assert_plot_drawn(driver, "memory-plot")

    # The log, folded, ends on its last lines when opened.
    open_accordion(driver, "Log (last lines)")
    log = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#training-log textarea"), 10, "the log")
    time.sleep(1.5)
    at_end = driver.execute_script(
        "const e = arguments[0]; return e.scrollTop + e.clientHeight >= e.scrollHeight - 4;", log
    )
    assert at_end, "the log shows its last lines"

    # Measured quality: one row per evaluation, newest first, readable at 1400 px.
    run_dir = next((server.log_path.parent / "output").glob("*/metrics.jsonl")).parent
    steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "quality"]
    table = wait_text(driver, str(steps[-1]), 30, "#quality-table")
    rows = [line.split()[0] for line in table.splitlines() if line.split() and line.split()[0].isdigit()]
    assert rows == [str(step) for step in steps[::-1]], table
    assert readable_table(driver, "quality-table") == []
    best = json.loads((run_dir / "run.json").read_text())["best"]
    assert f"by eval_loss: step {best['step']}" in driver.find_element(By.CSS_SELECTOR, "#quality-best").text
    clip = driver.find_element(By.ID, "quality-clip-0")
    assert clip.is_displayed() and f"step {steps[-1]}" in clip.text
    assert "Training started." not in driver.find_element(By.CSS_SELECTOR, "body").text, "cleared at the end"

    # The Test tab lists the finished run by itself, already chosen, and Generate works with the tab's defaults.
    open_tab(driver, "Test")
    chosen = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#test-run input"), 20, "the run picker")
    wait_for(driver, lambda d: "(finished)" in chosen.get_attribute("value"), 20, "the finished run chosen")
    assert chosen.get_attribute("value").startswith(run_dir.name), chosen.get_attribute("value")
    deadline, option = time.time() + 20, []
    while not option and time.time() < deadline:
        driver.find_element(By.CSS_SELECTOR, "#test-run input").click()
        time.sleep(1)
        option = [o for o in driver.find_elements(By.CSS_SELECTOR, "ul[role=listbox] li") if "finished" in o.text]
    assert option, "the finished run is offered without pressing a refresh button"
    assert option[0].text.split("\n")[-1].startswith(run_dir.name), option[0].text  # the chosen one is ticked
    option[0].click()
    time.sleep(1)
    click_button(driver, "Generate")
    wait_text(driver, f"{run_dir.name}-", 120, "#test-download")
    assert "Error" not in driver.find_element(By.CSS_SELECTOR, "body").text
    assert tab_labels(driver) == [f"{i}. {name}" for i, name in enumerate(TAB_NAMES, 1)]
