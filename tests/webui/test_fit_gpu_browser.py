""" "Fit my GPU" in a real browser: pick a card size, press the button, and the form holds the planner's choice."""

from __future__ import annotations

import time

import pytest

from tests.webui.app_server import AppServer
from tests.webui.browser import (
    CHROMEDRIVER,
    CHROMIUM,
    click_button,
    open_tab,
    start_chromium,
    tab_labels,
    wait_for,
    wait_text,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and ChromeDriver are not installed (./run_tests.sh installs them)")
    driver = start_chromium(tmp_path / "chrome-profile", 1400, 2200)
    try:
        yield driver
    finally:
        driver.quit()


def field(driver, cid: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f"#form-{cid} input, #form-{cid} textarea")


def test_fit_my_gpu_fills_the_form_in_one_click(tmp_path, tiny_base, browser):
    from selenium.webdriver.common.by import By

    server = AppServer(tmp_path / "output", tmp_path / "app.log")
    try:
        server.wait_ready()
        browser.get(server.url)
        wait_text(browser, "XTTS fine-tuning studio")
        # A loaded machine renders the tabs later than the title.
        wait_for(browser, lambda d: "2. Fine-tune" in tab_labels(d), 60, "the Fine-tune tab")
        open_tab(browser, "Fine-tune")
        wait_text(browser, "What will be applied")
        # The tiny base model (the app's default here), batch 4 x grad_acumm 2 (effective 8), gradient checkpointing on.
        assert field(browser, "version").get_attribute("value").startswith("tiny"), "planned on the tiny model"
        batch = field(browser, "batch_size")
        batch.clear()
        batch.send_keys("4")
        accordion = [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.startswith("Fit my GPU:")][0]
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", accordion)
        accordion.click()
        time.sleep(1)
        browser.find_element(By.CSS_SELECTOR, "#fit-gpu-card input").click()
        time.sleep(0.5)
        [o for o in browser.find_elements(By.CSS_SELECTOR, "ul[role=listbox] li") if o.text == "80 GB card"][0].click()
        click_button(browser, "Fit my GPU")
        text = wait_text(browser, "the form now holds", 240, css="#fit-gpu-result")
        browser.execute_script(
            "arguments[0].scrollIntoView({block: 'center'});", browser.find_element(By.ID, "fit-gpu-result")
        )
        time.sleep(1)
        browser.save_screenshot(str(tmp_path / "fit_gpu.png"))
        assert "full fine-tune, no gradient checkpointing" in text and "Effective batch 8 kept" in text
        assert field(browser, "batch_size").get_attribute("value") == "8"
        assert field(browser, "grad_acumm").get_attribute("value") == "1"
        assert not field(browser, "enable_grad_checkpoint").is_selected(), "checkpointing turned off in the form"
        assert field(browser, "lora_rank").get_attribute("value") == "0"
        print(tmp_path / "fit_gpu.png")
    finally:
        server.close()
