"""The Runs tab in a real browser, as a person uses it: a sweep of the Fine-tune form's settings started from the
page and followed to its end, its trials in the runs table (readable, best first), "Use these settings" filling
the Fine-tune form from a trial, and a blind A/B choice recorded and revealed."""

from __future__ import annotations

import time

import pytest

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
    readable_table,
    start_chromium,
    type_text,
    wait_for,
    wait_text,
)
from tests.webui.test_client import absolute_path_csv
from utils.sweep.listening import listening_tally

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def table_rows(driver) -> list[list[str]]:
    """The rows a gr.Dataframe shows (its body is a virtual list of role=row elements), as their cells' text."""
    return driver.execute_script(
        """
        const rows = [...document.querySelectorAll('#runs-table [role=row]')].filter(r => !r.closest('thead'));
        return rows.map(r => [...r.children].map(c => c.innerText.trim()));
        """
    )


def table_headers(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [h.text.strip() for h in driver.find_elements(By.CSS_SELECTOR, "#runs-table thead th")]


def test_a_sweep_from_the_page_lists_its_trials_and_a_blind_choice_is_kept(tmp_path_factory, tiny_base):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and ChromeDriver are not installed (./run_tests.sh installs them)")
    folder = tmp_path_factory.mktemp("runs-page")
    csv = absolute_path_csv(folder / "data", n=8)
    server = app_with_tiny_model(folder, tiny_base)
    driver = None
    try:
        server.wait_ready()
        driver = start_chromium(folder / "chrome-profile", 1400, 2400)
        driver.get(server.url)
        wait_text(driver, "XTTS fine-tuning studio")
        check_dataset(driver, csv)
        wait_text(driver, "Ready to train", 90, "#dataset-summary")
        open_tab(driver, "Fine-tune")
        wait_text(driver, "What will be applied")
        type_text(driver, "Epochs", "2", "input", exact=True)
        type_text(driver, "Learning rate", "0.001", "input", exact=True)
        open_accordion(driver, "Measured quality")
        type_text(driver, "Sentences scored per evaluation", "0", "input", exact=True)

        open_tab(driver, "Runs")
        wait_text(driver, "Every run of this output folder")
        open_accordion(driver, "Sweep")
        type_text(driver, "Search space", "learning_rate=1e-7:1e-3")
        type_text(driver, "Trials in the study, in all", "2", "input", exact=True)
        choose(driver, "sweep-rule", "eval_loss")
        time.sleep(1)  # the typed values reach the page's state before the click reads them
        click_button(driver, "Start sweep")
        wait_text(driver, "Trial 0 training", 120, "#sweep-status")
        status = wait_text(driver, "Best: trial", 300, "#sweep-status")
        assert "2 trials (" in status and "learning_rate=0.001" in status
        # The table follows the trials by itself: both listed, each with its sweep trial, and it reads well.
        rows = wait_for(driver, lambda d: len(table_rows(d)) == 2 and table_rows(d), 60, "both trials in the table")
        headers = table_headers(driver)
        trial_column = headers.index("sweep trial")
        assert sorted(row[trial_column].split(" ")[1] for row in rows) == ["#0", "#1"]
        assert readable_table(driver, "runs-table") == []
        assert "sim." not in headers, "a measure no run has is left out"

        # Use these settings: the Fine-tune form holds trial 1's drawn learning rate and the fixed epochs.
        second = next(row[0] for row in rows if "#1" in row[trial_column])
        choose(driver, "runs-pick", second)
        click_button(driver, "Use these settings")
        wait_text(driver, "now holds the settings of", 30, "#runs-used")
        open_tab(driver, "Fine-tune")
        rate = float(input_value(driver, "form-learning_rate"))
        assert rate != pytest.approx(1e-3) and 1e-7 <= rate <= 1e-3
        assert input_value(driver, "form-num_epochs") == "2"

        # Blind A/B: trial 0's voice against the base model, the choice recorded, then revealed.
        open_tab(driver, "Runs")
        open_accordion(driver, "Blind A/B")
        choose(driver, "listening-first", "t000")
        click_button(driver, "Make a blind pair")
        wait_text(driver, "Listen to A and B", 240, "#listening-said")
        click_button(driver, "A is better")
        reveal = wait_text(driver, "A was", 60, "#listening-reveal")
        assert "base model" in reveal
        listening = wait_for(
            driver, lambda d: "A/B" in table_headers(d) and table_headers(d).index("A/B"), 60, "the A/B column"
        )
        t000 = next(row for row in table_rows(driver) if "#0" in row[trial_column])
        assert t000[listening] in ("1-0", "0-1")
        driver.save_screenshot(str(folder / "runs-tab.png"))
        tally = listening_tally(folder / "output")
        assert sorted(sum(v.values()) for v in tally.values()) == [1, 1] and "base" in tally
    finally:
        if driver is not None:
            driver.quit()
        server.close()
