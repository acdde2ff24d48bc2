"""Driving the studio in headless Chromium and reading what a person sees: tabs, texts, and the pixels of plots.

Used by the browser tests and by scripts/screenshots.py."""

from __future__ import annotations

import io
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
TAB_NAMES = ("Dataset", "Fine-tune", "Test", "Export", "Runs")
# Every order of the first four tabs appears in this sequence of clicks (a superpermutation of 1234), then every move
# to and from the fifth.
EVERY_ORDER = "123412314231243121342132413214321" + "52535451"


def start_chromium(profile: Path, width: int = 1400, height: int = 2200) -> Any:
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
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # The browser's own CPU time is no sign of progress: any open Gradio page keeps its renderer busy (see
    # docs/benchmarks.md). Its waits follow the app (tests.webui.app_server).
    driver.set_page_load_timeout(300)
    return driver


def _page_changing() -> tuple[type[BaseException], ...]:
    """What a live page raises while it re-renders (an element gone or replaced): polled again, not a failure."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    return (NoSuchElementException, StaleElementReferenceException)


def wait_text(driver, text: str, stall: float = 60.0, css: str = "body") -> str:
    """The text of `css` once it shows `text`; waits while the app or the browser works (tests.helpers.wait_until),
    failing after `stall` seconds in which nothing advanced."""
    from selenium.webdriver.common.by import By

    seen = {"text": ""}

    def shown() -> str | None:
        seen["text"] = "\n".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, css))
        return seen["text"] if text in seen["text"] else None

    return wait_until(
        shown,
        f"{text!r} in {css}",
        stall=stall,
        ignore=_page_changing(),
        describe=lambda: f"{css} shows {seen['text'][-1500:]!r}",
    )


def wait_for(driver, condition, stall: float = 60.0, what: str = "the page") -> Any:
    """`condition(driver)` once truthy; waits as long as the app or the browser works (see wait_text)."""
    return wait_until(lambda: condition(driver), what, stall=stall, ignore=_page_changing())


def _retrying(action: Callable[[], Any], attempts: int = 6) -> Any:
    """Run `action` again when the page re-rendered an element between finding and using it (a live page does
    that: the timer refreshes the run's view every 1.5 s)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    for attempt in range(attempts):
        try:
            return action()
        except WebDriverException as exc:
            # Chrome says a node replaced between finding and typing either way: stale, or "does not belong to the
            # document" (an inspector error, not a stale-element one).
            replaced = isinstance(exc, StaleElementReferenceException) or "does not belong to the document" in str(exc)
            if not replaced or attempt == attempts - 1:
                raise
            time.sleep(0.3)
    return None


def visible_buttons(driver, label: str, starts: bool = False) -> list[Any]:
    """The buttons a person sees labelled `label` (or whose label starts with it), in page order. Found by one
    script in the page: asking WebDriver for each of the page's buttons' text and visibility took ~0.6 s a look."""
    return driver.execute_script(
        """
        const [label, starts] = arguments;
        const seen = (b) => [...b.getClientRects()].some(r => r.width > 0 && r.height > 0)
            && b.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
        return [...document.getElementsByTagName('button')].filter(b => {
            const text = b.innerText.trim();
            return (starts ? text.startsWith(label) : text === label) && seen(b);
        });
        """,
        label,
        starts,
    )


def click_button(driver, label: str, stall: float = 120.0) -> None:
    """Click the visible button labelled `label`, waiting for it (a just-unfolded accordion renders its content
    late on a loaded machine)."""

    def click() -> bool:
        buttons = visible_buttons(driver, label)
        if not buttons:
            return False
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", buttons[0])
        buttons[0].click()
        return True

    wait_for(driver, lambda d: _retrying(click), stall, f"a visible button {label!r}")


def open_accordion(driver, prefix: str, stall: float = 120.0) -> None:
    """Unfold the accordion whose label starts with `prefix` (its header also holds an arrow), and see it open:
    a click that lands before the page's scripts are ready does nothing, so it is clicked again."""

    def unfold() -> bool:
        headers = visible_buttons(driver, prefix, starts=True)
        if not headers:
            return False
        if "open" in (headers[0].get_attribute("class") or "").split():
            return True
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", headers[0])
        headers[0].click()
        return False

    wait_for(driver, lambda d: _retrying(unfold), stall, f"the accordion {prefix!r} to open")


def tab_labels(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return _retrying(
        lambda: [t.text.strip() for t in driver.find_elements(By.CSS_SELECTOR, "button[role=tab]") if t.is_displayed()]
    )


def open_tab(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    def select() -> None:
        tabs = [t for t in driver.find_elements(By.CSS_SELECTOR, "button[role=tab]") if name in t.text]
        assert tabs, f"no tab {name!r} in the tab bar {tab_labels(driver)}"
        driver.execute_script("window.scrollTo(0, 0);")
        tabs[0].click()

    _retrying(select)


def selected_tab(driver) -> str:
    from selenium.webdriver.common.by import By

    return " ".join(t.text for t in driver.find_elements(By.CSS_SELECTOR, "button[role=tab][aria-selected=true]"))


def field(driver, label: str, tag: str = "textarea", exact: bool = False) -> Any:
    """The input of a labelled field (waits for it: tabs render their components late on a loaded machine)."""
    from selenium.webdriver.common.by import By

    match = f"normalize-space(text())='{label}'" if exact else f"contains(text(), '{label}')"
    return wait_for(
        driver,
        lambda d: next(
            (e for e in d.find_elements(By.XPATH, f"//*[{match}]/ancestor::label//{tag}") if e.is_displayed()), None
        ),
        60,
        f"the field {label!r}",
    )


def element_image(driver, element) -> Any:
    """The element as the screen shows it (a PIL image)."""
    from PIL import Image

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
    time.sleep(0.3)
    return Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB")


def _rgb(color: str) -> tuple[int, int, int]:
    """'#2563eb' or 'rgb(37, 99, 235)' as (r, g, b)."""
    if color.startswith("rgb"):
        r, g, b = (int(float(v)) for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3])
        return r, g, b
    color = color.lstrip("#")
    return int(color[0:2], 16), int(color[2:4], 16), int(color[4:6], 16)


def colour_pixels(image, color: str, tolerance: int = 40) -> int:
    """How many pixels of `image` are close to `color` (anti-aliased line edges count when close enough)."""
    import numpy as np

    pixels = np.asarray(image, dtype=np.int16)
    return int((np.abs(pixels - np.array(_rgb(color), dtype=np.int16)).sum(axis=2) <= tolerance).sum())


def plot_parts(driver, elem_id: str) -> dict[str, Any]:
    """The rectangles (page CSS pixels) of a live plot's plot area and legend (webui.line_plot's SVG), the legend's
    labels and the colour each series is drawn in."""
    return driver.execute_script(
        """
        const root = document.getElementById(arguments[0]);
        if (!root) return null;
        const rect = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
            return {x: r.left, y: r.top, width: r.width, height: r.height}; };
        const series = [...root.querySelectorAll('svg .plot-series')];
        return {
            plot: rect(root.querySelector('svg .plot-area')),
            legend: rect(root.querySelector('svg .plot-legend')),
            labels: series.map(g => g.dataset.series),
            // The colour a person sees each line in (its computed stroke): the colour to look for in the plot.
            colors: series.map(g => getComputedStyle(g).stroke),
            gaps: root.querySelectorAll('svg .plot-gap path').length,
        };
        """,
        elem_id,
    )


def plot_series_pixels(driver, elem_id: str, colors: dict[str, str]) -> dict[str, dict[str, int]]:
    """{series: {"plot": coloured pixels inside the plot area, "legend": in the legend}} of a LinePlot, read from
    a screenshot of it: what a person sees, not what the DOM holds."""
    from selenium.webdriver.common.by import By

    element = driver.find_element(By.ID, elem_id)
    image = element_image(driver, element)
    parts = plot_parts(driver, elem_id)
    box = element.rect
    ratio = image.width / max(box["width"], 1)
    found: dict[str, dict[str, int]] = {}
    page_top = driver.execute_script("return arguments[0].getBoundingClientRect().top;", element)
    page_left = driver.execute_script("return arguments[0].getBoundingClientRect().left;", element)
    # Anti-aliased edges count when close enough to the colour.
    tolerance = {"plot": 40, "legend": 60}
    for part in ("plot", "legend"):
        area = parts.get(part) if parts else None
        for series, color in colors.items():
            if not area or area["width"] < 2:
                found.setdefault(series, {})[part] = 0
                continue
            crop = image.crop(
                (
                    int((area["x"] - page_left) * ratio),
                    int((area["y"] - page_top) * ratio),
                    int((area["x"] - page_left + area["width"]) * ratio),
                    int((area["y"] - page_top + area["height"]) * ratio),
                )
            )
            found.setdefault(series, {})[part] = colour_pixels(crop, color, tolerance[part])
    return found


def readable_table(driver, elem_id: str) -> list[str]:
    """What makes a gr.Dataframe hard to read at this window width: headers broken over lines, rows taller
    than five lines, a table wider than its box. Empty when it reads well."""
    return driver.execute_script(
        """
        const root = document.getElementById(arguments[0]);
        if (!root) return ['no table ' + arguments[0]];
        const problems = [];
        for (const th of root.querySelectorAll('thead th')) {
            const text = th.innerText.trim();
            if (!text) continue;
            // The lines the header's words take (its sort and lock icons are not words).
            const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
            const tops = new Set();
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                if (!node.textContent.trim()) continue;
                const range = document.createRange(); range.selectNodeContents(node);
                for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
            }
            if (tops.size > 1) problems.push(`header "${text}" breaks over ${tops.size} lines`);
        }
        for (const tr of root.querySelectorAll('tbody tr')) {
            const height = Math.round(tr.getBoundingClientRect().height);
            if (height > 5 * 24) problems.push(`a row ${height} px tall`);
        }
        const scroller = root.querySelector('.table-wrap') || root.querySelector('table').parentElement;
        if (scroller && scroller.scrollWidth > scroller.clientWidth + 4)
            problems.push(`wider than its box (${scroller.scrollWidth} > ${scroller.clientWidth} px)`);
        return problems;
        """,
        elem_id,
    )


def type_text(driver, label: str, text: str, tag: str = "textarea", exact: bool = False) -> None:
    """Replace the text of a labelled field, as typed."""
    box = field(driver, label, tag, exact)
    box.clear()
    box.send_keys(text)


def check_dataset(driver, csv_path: Any) -> None:
    """Dataset tab: type the CSV's path and press Check dataset."""
    open_tab(driver, "Dataset")
    type_text(driver, "train CSV path on this machine", str(csv_path))
    time.sleep(1)  # the typed value reaches the page's state before the click reads it
    click_button(driver, "Check dataset")


def button_enabled(driver, label: str) -> bool | None:
    """Whether the visible button labelled `label` can be pressed (None: no such button)."""
    buttons = visible_buttons(driver, label)
    return buttons[0].is_enabled() if buttons else None


def choose(driver, elem_id: str, text: str, stall: float = 60.0) -> str:
    """Pick the option containing `text` of the dropdown `elem_id`, until the dropdown shows it (a click that
    lands while the list re-renders picks nothing); returns the option's label."""
    from selenium.webdriver.common.by import By

    picked = {"label": ""}

    def pick() -> str | None:
        box = driver.find_element(By.CSS_SELECTOR, f"#{elem_id} input")
        if picked["label"] and text in box.get_attribute("value"):
            return picked["label"]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
        box.click()
        options = [o for o in driver.find_elements(By.CSS_SELECTOR, "ul[role=listbox] li") if text in o.text]
        if options:
            picked["label"] = options[0].text
            options[0].click()
        return None

    return wait_for(driver, lambda d: _retrying(pick), stall, f"the option {text!r} chosen in #{elem_id}")


def input_value(driver, elem_id: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f"#{elem_id} input, #{elem_id} textarea").get_attribute("value")
