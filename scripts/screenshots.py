"""Screenshots of every tab of the studio in every state, to look at the page without clicking through it.

    .venv/bin/python scripts/screenshots.py shots/          # writes shots/<state>-<tab>.png

States: empty (a fresh app), checking (a dataset check under way), checked, rejected (half the rows' audio
gone), training (the first run after the page loaded, started with Start and watched without reloading),
finished, failed (a run whose audio is gone), resumed (a stopped run resumed to its end), missing weights (a
base model whose files are not on this machine). It starts its own app on a temporary folder with a small
synthetic dataset and the tiny base model (built in seconds; the only base model it sees); several minutes on
a CPU. Needs Chromium and ChromeDriver (./run_tests.sh installs them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import write_clip  # noqa: E402
from tests.webui.app_server import AppServer  # noqa: E402
from tests.webui.browser import (  # noqa: E402
    TAB_NAMES,
    choose,
    click_button,
    field,
    open_accordion,
    open_tab,
    selected_tab,
    start_chromium,
    wait_for,
    wait_text,
)
from tests.webui.test_client import absolute_path_csv  # noqa: E402


def shoot_tabs(driver, folder: Path, state: str, tabs: tuple[str, ...] = TAB_NAMES, settle: float = 1.5) -> None:
    for name in tabs:
        if name not in selected_tab(driver):
            open_tab(driver, name)
        time.sleep(settle)
        # The whole page: the window is as tall as the tab's content.
        height = driver.execute_script("return document.documentElement.scrollHeight;")
        driver.set_window_size(1400, max(900, min(int(height) + 40, 6000)))
        time.sleep(0.5)
        path = folder / f"{state}-{TAB_NAMES.index(name) + 1}-{name.lower()}.png"
        driver.save_screenshot(str(path))
        print(path, flush=True)
    driver.set_window_size(1400, 2200)


def make_data(data: Path) -> dict[str, Path]:
    csv = absolute_path_csv(data)
    ljspeech = data / "ljspeech"
    for i, text in enumerate(("hello there", "the quick brown fox", "one two three four")):
        write_clip(ljspeech / "wavs" / f"LJ{i:03d}.wav", 1.5, i)
        with open(ljspeech / "metadata.csv", "a", encoding="utf-8") as handle:
            handle.write(f"LJ{i:03d}|{text}|{text}\n")
    half = data / "half"  # every other clip gone: half the rows rejected
    absolute_path_csv(half)
    for clip in sorted((half / "wavs").glob("*.wav"))[::2]:
        clip.unlink()
    # A copy whose audio is deleted once it has been checked: the run then fails reading its clips.
    doomed = data / "doomed"
    shutil.copytree(data / "wavs", doomed / "wavs")
    text = csv.read_text().replace(str(data / "wavs"), str(doomed / "wavs"))
    (doomed / "metadata.csv").write_text(text)
    return {
        "csv": csv,
        "ljspeech": ljspeech / "metadata.csv",
        "doomed": doomed / "metadata.csv",
        "half": half / "metadata.csv",
    }


def check(driver, csv: Path) -> None:
    open_tab(driver, "Dataset")
    typed = field(driver, "train CSV path on this machine")
    typed.clear()
    typed.send_keys(str(csv))
    time.sleep(1)
    click_button(driver, "Check dataset")


def start_run(driver, epochs: int, csv: Path | None = None, before_start=None) -> None:
    open_tab(driver, "Fine-tune")
    wait_text(driver, "What will be applied")
    if csv is not None:  # the Dataset tab's summary may still show the last check's text: wait for the form
        train_csv = field(driver, "Train CSV", exact=True)
        wait_for(driver, lambda d: train_csv.get_attribute("value") == str(csv), 120, f"the form's Train CSV {csv}")
    box = field(driver, "Epochs", "input", exact=True)
    box.clear()
    box.send_keys(str(epochs))
    time.sleep(1)
    if before_start is not None:
        before_start()
    click_button(driver, "Start training")


def _stop(signum, frame) -> None:
    raise SystemExit(1)  # a kill still closes the app and the browser (the finally below)


def main(argv: list[str] | None = None) -> int:
    from selenium.webdriver.common.by import By

    signal.signal(signal.SIGTERM, _stop)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="where the PNGs go")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args(argv)
    out = Path(args.folder).resolve()
    out.mkdir(parents=True, exist_ok=True)

    from utils.model.base_models import ensure_base_model

    tiny = ensure_base_model("tiny").folder
    work = Path(tempfile.mkdtemp(prefix="xtts-screenshots-"))
    data = make_data(work / "data")
    (work / "models").mkdir()
    (work / "models" / "tiny").symlink_to(tiny, target_is_directory=True)
    os.environ["XTTS_MODELS_DIR"] = str(work / "models")  # the app's only base model: tiny (v2.0.2 is missing)
    server = AppServer(work / "output", work / "app.log", data_dirs=(work / "data",))
    driver = None
    try:
        server.wait_ready()
        driver = start_chromium(work / "chrome-profile", 1400, 2200)
        driver.get(server.url)
        wait_text(driver, "XTTS fine-tuning studio")
        field(driver, "train CSV path on this machine")
        shoot_tabs(driver, out, "1-empty")

        check(driver, data["csv"])
        shoot_tabs(driver, out, "2-checking", ("Dataset",), settle=0.2)
        wait_text(driver, "12 of 12 rows usable", 120, "#dataset-summary")
        open_accordion(driver, "Check transcripts and audio (")
        click_button(driver, "Check transcripts and audio")
        shoot_tabs(driver, out, "2-checking-transcripts", ("Dataset",), settle=2)
        wait_text(driver, "rows flagged", 300, "#dataset-check-summary")
        shoot_tabs(driver, out, "3-checked-transcripts", ("Dataset",))
        check(driver, data["ljspeech"])
        wait_text(driver, "LJSpeech", 120, "#dataset-summary")
        shoot_tabs(driver, out, "3-checked", ("Dataset",))
        check(driver, data["half"])
        wait_text(driver, "rows rejected", 120, "#dataset-summary")
        shoot_tabs(driver, out, "3-rejected", ("Dataset",))

        check(driver, data["csv"])
        wait_text(driver, "12 of 12 rows usable", 120, "#dataset-summary")
        start_run(driver, args.epochs)  # the first run since the page loaded, watched without reloading
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#loss-plot [data-series="eval"]'), 600, "an eval")
        shoot_tabs(driver, out, "4-training")
        open_tab(driver, "Fine-tune")  # hidden tabs' text is not read
        wait_text(driver, "Training finished", 900)
        time.sleep(4)
        shoot_tabs(driver, out, "5-finished")

        check(driver, data["doomed"])
        wait_text(driver, "12 of 12 rows usable", 120, "#dataset-summary")
        start_run(driver, 1, data["doomed"], before_start=lambda: shutil.rmtree(data["doomed"].parent / "wavs"))
        wait_text(driver, "Failed", 300)
        time.sleep(3)
        shoot_tabs(driver, out, "6-failed")

        check(driver, data["csv"])
        wait_text(driver, "12 of 12 rows usable", 120, "#dataset-summary")
        start_run(driver, args.epochs + 2, data["csv"])
        wait_text(driver, "Step 2 /", 300, "#run-status")
        click_button(driver, "Stop (saves a checkpoint)")
        wait_text(driver, "Stopped. Checkpoint saved", 300, "#run-status")
        open_accordion(driver, "Advanced")
        choose(driver, "form-resume_from", "(stopped)")
        time.sleep(1)
        click_button(driver, "Start training")
        wait_text(driver, "Training finished", 900, "#run-status")
        shoot_tabs(driver, out, "7-resumed", ("Fine-tune",))

        click_button(driver, "Estimate GPU memory")
        wait_text(driver, "Memory plan", 300)
        choose(driver, "form-version", "v2.0.2")
        wait_text(driver, "of its files are not on this machine", 60, "#base-model-panel")
        shoot_tabs(driver, out, "8-missing-weights", ("Fine-tune",))
    finally:
        if driver is not None:
            driver.quit()
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
