"""A real browser (headless Chromium through Selenium) uses the studio: upload, check, train, watch."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tests.webui.app_server import AppServer
from tests.webui.test_client import absolute_path_csv
from utils.files import read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and ChromeDriver are not installed (./run_tests.sh installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--window-size=1400,2200",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait_text(driver, text: str, timeout: float = 60.0, css: str = "body") -> str:
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    while time.time() < deadline:
        content = driver.find_element(By.CSS_SELECTOR, css).text
        if text in content:
            return content
        time.sleep(0.5)
    raise AssertionError(f"{text!r} did not appear in {css} within {timeout}s")


def click_button(driver, label: str) -> None:
    from selenium.webdriver.common.by import By

    buttons = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == label and b.is_displayed()]
    assert buttons, f"no visible button {label!r}"
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", buttons[0])
    buttons[0].click()


def test_upload_check_train_and_watch_progress_and_memory(tmp_path, tiny_base, browser):
    from selenium.webdriver.common.by import By

    csv_path = absolute_path_csv(tmp_path / "data")
    server = AppServer(tmp_path / "output", tmp_path / "app.log", data_dirs=(tmp_path / "data",))
    try:
        server.wait_ready()
        browser.get(server.url)
        wait_text(browser, "XTTS fine-tuning studio")

        from selenium.webdriver.support.ui import WebDriverWait

        # The title renders before the tabs' components: wait for the field itself (a loaded machine is slow).
        typed = WebDriverWait(browser, 60).until(
            lambda d: d.find_element(
                By.XPATH, "//*[contains(text(), 'train CSV path on this machine')]/ancestor::label//textarea"
            )
        )
        typed.send_keys(str(csv_path))
        time.sleep(1)
        click_button(browser, "Check dataset")
        wait_text(browser, "Ready to train", 90)
        browser.save_screenshot(str(tmp_path / "dataset.png"))

        tab = [t for t in browser.find_elements(By.CSS_SELECTOR, "button[role=tab]") if "Fine-tune" in t.text][0]
        tab.click()
        wait_text(browser, "What will be applied")
        epochs = browser.find_element(By.XPATH, "//*[normalize-space(text())='Epochs']/ancestor::label//input")
        epochs.clear()
        epochs.send_keys("6")
        # One scored sentence per evaluation (the default is 3): the score table below needs only one.
        from selenium.webdriver.support.ui import WebDriverWait

        buttons = browser.find_elements(By.TAG_NAME, "button")
        accordion = [b for b in buttons if b.text.startswith("Measured quality")][0]
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", accordion)
        accordion.click()
        sentences = WebDriverWait(browser, 20).until(
            lambda d: d.find_element(
                By.XPATH, "//*[normalize-space(text())='Sentences scored per evaluation']/ancestor::label//input"
            )
        )
        sentences.clear()
        sentences.send_keys("1")
        time.sleep(1)
        click_button(browser, "Start training")

        status = wait_text(browser, "Step ", 180, "body")
        assert "Running" in status or "Finished" in status
        first_memory = wait_text(browser, "training process", 60, "#memory-panel")
        deadline, changed = time.time() + 60, False
        while time.time() < deadline and not changed:
            time.sleep(1.5)
            changed = browser.find_element(By.CSS_SELECTOR, "#memory-panel").text != first_memory
        assert changed, "the memory panel did not update"
        browser.save_screenshot(str(tmp_path / "training.png"))

        # Reloading the page re-attaches to the run: its progress comes back without starting anything, and the
        # form shows the run's own settings (6 epochs), not the defaults (10).
        browser.refresh()
        wait_text(browser, "XTTS fine-tuning studio")
        open_tab(browser, "Fine-tune")
        wait_text(browser, "Step ", 60)
        epochs = browser.find_element(By.XPATH, "//*[normalize-space(text())='Epochs']/ancestor::label//input")
        deadline = time.time() + 20
        while epochs.get_attribute("value") != "6" and time.time() < deadline:
            time.sleep(0.5)
        assert epochs.get_attribute("value") == "6", "the form holds the running run's values after a reload"
        wait_text(browser, "Training finished", 300)
        time.sleep(3)
        log = browser.find_element(
            By.XPATH, "//*[normalize-space(text())='Log (last lines)']/ancestor::label//textarea"
        )
        at_end = browser.execute_script(
            "const e = arguments[0]; return e.scrollTop + e.clientHeight >= e.scrollHeight - 4;", log
        )
        assert at_end, "the log shows its last lines"
        browser.save_screenshot(str(tmp_path / "finished.png"))
        # Measured quality: one row per evaluation beside the loss plot, newest first; without
        # a Whisper model on this machine the CER column says why it is empty, and the latest clips play.
        table = wait_text(browser, "— Whisper model 'small' is not available", 60, "#quality-table")
        run_dir = next((tmp_path / "output").glob("*/metrics.jsonl")).parent
        steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "quality"]
        rows = [line for line in table.splitlines() if line.isdigit()]
        assert len(steps) == 6 and rows == [str(step) for step in steps[::-1]]
        best = json.loads((run_dir / "run.json").read_text())["best"]
        assert f"by eval_loss: step {best['step']}" in browser.find_element(By.CSS_SELECTOR, "#quality-best").text
        clip = browser.find_element(By.ID, "quality-clip-0")
        assert clip.is_displayed() and f"step {steps[-1]}" in clip.text
        assert (tmp_path / "training.png").stat().st_size > 10_000
        assert "Training started." not in browser.find_element(By.CSS_SELECTOR, "body").text, "cleared at the end"

        # The Test tab lists the finished run by itself, and Generate works with the tab's defaults.
        open_tab(browser, "Test")
        deadline, option = time.time() + 20, []
        while not option and time.time() < deadline:
            browser.find_element(By.CSS_SELECTOR, "#test-run input").click()
            time.sleep(1)
            option = [o for o in browser.find_elements(By.CSS_SELECTOR, "ul[role=listbox] li") if "finished" in o.text]
        assert option, "the finished run is offered without pressing a refresh button"
        run_name = option[0].text.split(" (")[0]
        option[0].click()
        time.sleep(1)
        click_button(browser, "Generate")
        # The generated wav is offered for download under the run's name, and nothing says "Error".
        wait_text(browser, f"{run_name}-", 120, "#test-download")
        browser.save_screenshot(str(tmp_path / "generated.png"))
        assert "Error" not in browser.find_element(By.CSS_SELECTOR, "body").text
    finally:
        server.close()


def open_tab(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    [t for t in driver.find_elements(By.CSS_SELECTOR, "button[role=tab]") if name in t.text][0].click()
