"""A real browser (headless Chromium through Selenium) uses the studio as a person does, and the tests assert on
what that person sees: tab labels, texts, the state of the buttons, and the coloured pixels of the plots in
screenshots. One app server and one browser serve every test of the module, in order: the page is loaded first,
then a dataset checked, a run started with Start and watched without reloading (the path a person takes),
then a run stopped, resumed, and followed by a new one."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.helpers import write_clip
from tests.webui.app_server import AppServer
from tests.webui.browser import (
    CHROMEDRIVER,
    CHROMIUM,
    EVERY_ORDER,
    TAB_NAMES,
    button_enabled,
    check_dataset,
    choose,
    click_button,
    field,
    input_value,
    open_accordion,
    open_tab,
    plot_parts,
    plot_series_pixels,
    readable_table,
    selected_tab,
    start_chromium,
    tab_labels,
    type_text,
    wait_for,
    wait_text,
)
from tests.webui.test_client import absolute_path_csv
from utils.files import read_jsonl
from utils.training.recording.run_record import list_runs, read_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EPOCHS = 4
RESUMED_EPOCHS = "6"  # the stopped, resumed and new runs: neither the live run's 4 nor the form's default 10
SERIES_PIXELS = 30  # a series' line or dots in the plot area (a dot alone covers ~38); an undrawn one none
LEGEND_PIXELS = 8  # the legend's coloured symbol
START, STOP = "Start training", "Stop (saves a checkpoint)"


@pytest.fixture(scope="module")
def studio(tmp_path_factory, tiny_base):
    """(app server, browser, data folder): the app as `./run_app.sh --data-dir data` starts it, at 1400 px."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and ChromeDriver are not installed (./run_tests.sh installs them)")
    folder = tmp_path_factory.mktemp("browser")
    data = folder / "data"
    absolute_path_csv(data)
    half = data / "half"  # half its clips gone: not ready, whatever else
    absolute_path_csv(half)
    for clip in sorted((half / "wavs").glob("*.wav"))[::2]:
        clip.unlink()
    ljspeech = data / "ljspeech"
    for i, text in enumerate(("hello there", "the quick brown fox", "one two three four")):
        write_clip(ljspeech / "wavs" / f"LJ{i:03d}.wav", 1.5, i)
        with open(ljspeech / "metadata.csv", "a", encoding="utf-8") as handle:
            handle.write(f"LJ{i:03d}|{text}|{text}\n")
    # Base models: the tiny one only, whatever this machine has downloaded (a missing version is shown as such).
    models = folder / "models"
    models.mkdir()
    (models / "tiny").symlink_to(tiny_base.folder, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XTTS_MODELS_DIR", str(models))
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


def test_the_tab_bar_keeps_its_tabs_whatever_the_order_of_visits(studio):
    _, driver, _ = studio
    expected = [f"{i}. {name}" for i, name in enumerate(TAB_NAMES, 1)]
    assert tab_labels(driver) == expected
    for digit in EVERY_ORDER:  # every order of the tabs, as consecutive visits
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


def assert_plot_drawn(driver, elem_id: str, pixels: int = SERIES_PIXELS) -> dict:
    """Each series of a live plot is drawn in its own colour, inside the plot area and in the legend (a screenshot
    read pixel by pixel); returns the pixels found per series."""
    parts = plot_parts(driver, elem_id)
    series = parts["labels"]
    assert len(series) >= 2, f"{elem_id}: its series: {parts}"
    colors = dict(zip(series, parts["colors"], strict=True))
    assert len(set(colors.values())) == len(colors), f"{elem_id}: one colour per series: {colors}"
    assert all(c not in ("none", "rgba(0, 0, 0, 0)") for c in colors.values()), f"{elem_id}: a stroke: {colors}"
    found = plot_series_pixels(driver, elem_id, colors)
    for name, where in found.items():
        assert where["plot"] >= pixels, f"{elem_id}: no {name} drawn in the plot area: {found}"
        assert where["legend"] >= LEGEND_PIXELS, f"{elem_id}: {name} not in the legend: {found}"
    return found


def ticks(driver, elem_id: str, axis: str) -> list[str]:
    """The tick labels of a live plot's axis ("x" or "y")."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(t => t.textContent)", f"#{elem_id} svg .{axis}-tick"
    )


def drawn(driver, elem_id: str, series: str) -> int:
    """How many marks (a line, dots) the plot draws for `series`."""
    from selenium.webdriver.common.by import By

    group = f'#{elem_id} svg .plot-series[data-series="{series}"]'
    css = f"{group} polyline, {group} circle"
    return len(driver.find_elements(By.CSS_SELECTOR, css))


def status_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, "run-status").text


def buttons_follow_the_run(driver) -> bool:
    """Start can be pressed when no run is active, Stop while one runs, as the status above them says."""
    status = status_text(driver).split("\n")[0]
    start, stop = button_enabled(driver, START), button_enabled(driver, STOP)
    if status in ("Starting", "Running"):
        return start is False and stop is True
    if status in ("Finished", "Stopped", "Failed", "Interrupted", "Idle"):
        return start is True and stop is False
    return False


def test_half_the_rows_rejected_is_said_and_the_preview_marks_them(studio):
    _, driver, data = studio
    check_dataset(driver, data / "half" / "metadata.csv")
    summary = wait_text(driver, "rows rejected", 90, "#dataset-summary")
    assert "Ready to train" not in summary and "6 of 12 rows rejected: only 6 usable" in summary, summary
    preview = wait_text(driver, "rejected: Audio not found", 30, "#dataset-preview")
    assert preview.count("✗ rejected") == 4 and preview.count("✓") == 4, preview  # 8 rows shown, every other gone
    assert readable_table(driver, "dataset-preview") == [] and readable_table(driver, "dataset-problems") == []


def test_a_zip_upload_clears_the_typed_path(studio, tmp_path):
    import zipfile

    from selenium.webdriver.common.by import By

    _, driver, data = studio
    upload = tmp_path / "voice.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        for file in sorted((data / "ljspeech").rglob("*.*")):
            archive.write(file, f"voice/{file.relative_to(data / 'ljspeech')}")
    open_tab(driver, "Dataset")
    type_text(driver, "train CSV path on this machine", str(data / "metadata.csv"))
    open_accordion(driver, "Upload a zip")
    driver.find_element(By.CSS_SELECTOR, "#zip-upload input[type=file]").send_keys(str(upload))
    typed = field(driver, "train CSV path on this machine")
    wait_for(driver, lambda d: typed.get_attribute("value") == "", 60, "the typed path to be cleared by the zip")
    click_button(driver, "Extract and check")
    summary = wait_text(driver, "Checked the zip's", 120, "#dataset-summary")
    assert "metadata.csv" in summary and typed.get_attribute("value") == ""


def test_a_run_started_from_the_page_draws_its_plots_live_and_reads_well(studio, tmp_path):
    from selenium.webdriver.common.by import By

    server, driver, data = studio
    check_dataset(driver, data / "metadata.csv")
    wait_text(driver, "Ready to train", 90, "#dataset-summary")
    # The transcript check works offline (the bundled Whisper tiny.en) and its table reads well at 1400 px.
    open_accordion(driver, "Check transcripts and audio (")
    click_button(driver, "Check transcripts and audio")
    wait_text(driver, "rows flagged", 240, "#dataset-check-summary")
    wait_for(driver, lambda d: readable_table(d, "check-table") == [], 30, "the check table to read well")

    open_tab(driver, "Fine-tune")
    wait_text(driver, "What will be applied")
    type_text(driver, "Epochs", str(EPOCHS), "input", exact=True)
    # One scored sentence per evaluation (the default is 3); each clip cut at 70 audio tokens (3.3 s), where the
    # tiny model's long probe would run 14 s: decoding is most of a scored evaluation's time on a CPU. The sentence
    # itself stops before (~59 tokens), so the babble rate stays below the CER's 1 and both lines show.
    open_accordion(driver, "Measured quality")
    type_text(driver, "Sentences scored per evaluation", "1", "input", exact=True)
    type_text(driver, "Longest scored clip (audio tokens)", "70", "input", exact=True)
    time.sleep(1)
    click_button(driver, START)

    # Watched without reloading, as a person does: both plots draw every series as the run goes.
    wait_for(
        driver,
        lambda d: drawn(d, "loss-plot", "train") >= 3 and drawn(d, "loss-plot", "eval") >= 2,
        240,
        "the loss plot to draw the train loss and two evaluations",
    )
    driver.save_screenshot(str(tmp_path / "live.png"))
    loss = assert_plot_drawn(driver, "loss-plot")
    assert set(loss) == {"train", "eval"}
    memory = assert_plot_drawn(driver, "memory-plot")
    assert set(memory) == {"training process RAM", "system RAM used"}
    assert all(t.isdigit() for t in ticks(driver, "loss-plot", "x")), "whole steps"
    assert all(float(t) < 1000 for t in ticks(driver, "memory-plot", "y")), "memory in GB, not MB"
    first_memory = wait_text(driver, "training process", 60, "#memory-panel")
    wait_for(driver, lambda d: d.find_element(By.ID, "memory-panel").text != first_memory, 60, "a memory update")

    # Reloading the page re-attaches to the run: its progress comes back without starting anything, the form
    # shows the run's own settings, not the defaults (10 epochs), and the buttons follow the run.
    driver.refresh()
    wait_text(driver, "XTTS fine-tuning studio")
    open_tab(driver, "Fine-tune")
    wait_text(driver, "Step ", 60)
    epochs = field(driver, "Epochs", "input", exact=True)
    wait_for(driver, lambda d: epochs.get_attribute("value") == str(EPOCHS), 20, "the run's epochs in the form")
    if "Running" in status_text(driver):
        wait_for(driver, buttons_follow_the_run, 30, "Stop, not Start, while the run goes on")
    wait_text(driver, "Training finished", 400)
    wait_for(driver, buttons_follow_the_run, 30, "Start, not Stop, once the run finished")
    assert "ETA" not in status_text(driver), "no ETA once finished"

    # What a person sees: both plots draw a coloured line for each series inside their plot area, with a legend.
    driver.save_screenshot(str(tmp_path / "finished.png"))
    assert set(assert_plot_drawn(driver, "loss-plot", 150)) == {"train", "eval"}
    assert_plot_drawn(driver, "memory-plot", 150)
    # The quality plot: the base model (step 0) and the run's evaluation, each score in its own colour (no
    # similarity: Resemblyzer hears no speech in the tiny model's noise).
    quality = assert_plot_drawn(driver, "quality-plot", 20)
    assert set(quality) == {"CER (capped at 1)", "naturalness (MOS ÷ 5)", "babble rate"}, quality

    # The log, folded, ends on its last lines when opened.
    open_accordion(driver, "Log (last lines)")
    log = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#training-log textarea"), 10, "the log")
    at_end = "const e = arguments[0]; return e.scrollTop + e.clientHeight >= e.scrollHeight - 4;"
    wait_for(driver, lambda d: d.execute_script(at_end, log), 10, "the log to show its last lines")

    # Measured quality: one row per evaluation, newest first (each with the row of its retention language, Spanish,
    # under it), readable at 1400 px.
    run_dir = next((server.log_path.parent / "output").glob("*/metrics.jsonl")).parent
    steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "quality"]
    table = wait_text(driver, str(steps[-1]), 30, "#quality-table")
    rows = [line.split()[0] for line in table.splitlines() if line.split() and line.split()[0].isdigit()]
    assert rows == [str(step) for step in steps[::-1] for _ in range(2)], table
    assert table.count("retention es") == len(steps), table
    assert readable_table(driver, "quality-table") == []
    best = json.loads((run_dir / "run.json").read_text())["best"]
    assert f"by eval_loss: step {best['step']}" in driver.find_element(By.CSS_SELECTOR, "#quality-best").text
    assert table.count("★") == 1, f"one best evaluation: {table}"
    clip = driver.find_element(By.ID, "quality-clip-0")
    assert clip.is_displayed() and f"step {steps[-1]}" in clip.text
    assert "Training started." not in driver.find_element(By.CSS_SELECTOR, "body").text, "cleared at the end"

    # The Test tab lists the finished run by itself, already chosen, and Generate works with the tab's defaults.
    open_tab(driver, "Test")
    chosen = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#test-run input"), 20, "the run picker")
    wait_for(driver, lambda d: "(finished)" in chosen.get_attribute("value"), 20, "the finished run chosen")
    assert chosen.get_attribute("value").startswith(run_dir.name), chosen.get_attribute("value")
    # Put there by the page, not picked: the form is filled for it all the same (its settings, said where from).
    settings = wait_for(
        driver,
        lambda d: "until a run is picked" not in (t := d.find_element(By.ID, "sampling-source").text) and t,
        30,
        "the run's sampling settings in the form",
    )
    assert "temperature" in settings, settings
    # The finished run is offered without pressing a refresh button; the chosen one is ticked.
    label = choose(driver, "test-run", "finished")
    assert label.split("\n")[-1].startswith(run_dir.name), label
    time.sleep(1)
    click_button(driver, "Generate")
    wait_text(driver, f"{run_dir.name}-", 120, "#test-download")
    assert "Error" not in driver.find_element(By.CSS_SELECTOR, "body").text
    assert tab_labels(driver) == [f"{i}. {name}" for i, name in enumerate(TAB_NAMES, 1)]


def shown_run(driver) -> str:
    """The run folder the status names."""
    line = next((x for x in status_text(driver).splitlines() if x.startswith("Run folder: ")), "")
    return line.removeprefix("Run folder: ").strip()


def shown_step(driver) -> int:
    """The step the status shows ("Step 5 / 16 · ..."), 0 before the first."""
    found = re.search(r"Step (\d+) /", status_text(driver))
    return int(found[1]) if found else 0


def test_a_resume_is_for_one_start_a_new_start_after_it_starts_a_new_run(studio):
    server, driver, data = studio
    output = server.log_path.parent / "output"
    before = set(list_runs(output))
    check_dataset(driver, data / "metadata.csv")
    wait_text(driver, "12 of 12 rows usable", 90, "#dataset-summary")
    open_tab(driver, "Fine-tune")
    type_text(driver, "Epochs", RESUMED_EPOCHS, "input", exact=True)
    # No scored evaluations: this test is about which run Start starts, and each scoring of the tiny model's speech
    # costs ~30 s on 2 cores (the test before this one scores its run on the page). Unscored, a step takes a second
    # or two: the run is stopped as soon as the page shows it stepping, well before its 12 steps are done.
    open_accordion(driver, "Measured quality")
    type_text(driver, "Sentences scored per evaluation", "0", "input", exact=True)
    time.sleep(1)
    click_button(driver, START)
    wait_for(driver, lambda d: status_text(d).startswith("Running") and shown_step(d) >= 1, 240, "the run stepping")
    click_button(driver, STOP)
    wait_text(driver, "Stopped. Checkpoint saved", 240, "#run-status")
    (stopped,) = set(list_runs(output)) - before

    # Resumed from Advanced > Resume run: the form takes the run's settings; once the run is under way the
    # picker is back to a new run (a finished resume has nothing left to train).
    open_accordion(driver, "Advanced")
    choose(driver, "form-resume_from", f"{stopped.name} (stopped)")
    time.sleep(1)
    click_button(driver, START)
    wait_for(driver, lambda d: shown_run(d) == str(stopped) and "Running" in status_text(d), 240, "the resume")
    wait_for(driver, lambda d: input_value(d, "form-resume_from") in ("", "(new run)"), 30, "a new run in the form")
    wait_text(driver, "Training finished", 400, "#run-status")
    assert read_run(stopped)["status"] == "finished"

    # After a reload following the resume, Start starts a new run with the same settings.
    driver.refresh()
    wait_text(driver, "XTTS fine-tuning studio")
    open_tab(driver, "Fine-tune")
    wait_text(driver, "Training finished", 60, "#run-status")
    open_accordion(driver, "Advanced")
    assert input_value(driver, "form-resume_from") in ("", "(new run)")
    epochs = field(driver, "Epochs", "input", exact=True).get_attribute("value")
    assert epochs == RESUMED_EPOCHS, "the last run's settings"
    click_button(driver, START)
    wait_for(driver, lambda d: len(set(list_runs(output)) - before) == 2, 240, "a new run folder")
    (new,) = set(list_runs(output)) - before - {stopped}
    wait_for(driver, lambda d: shown_run(d) == str(new), 240, "the page to follow the new run")
    assert "nothing is left to train" not in status_text(driver)
    wait_for(driver, lambda d: button_enabled(d, STOP), 240, "Stop to be pressable")
    click_button(driver, STOP)
    wait_for(driver, lambda d: not read_run(new).get("status", "").startswith(("start", "run")), 240, "the stop")
    wait_for(driver, buttons_follow_the_run, 60, "Start, not Stop, once the run stopped")


def test_missing_weights_stay_in_a_panel_and_an_old_plan_goes(studio):
    _, driver, _ = studio
    open_tab(driver, "Fine-tune")
    click_button(driver, "Estimate GPU memory")
    wait_text(driver, "Memory plan", 240)
    choose(driver, "form-version", "v2.0.2")
    panel = wait_text(driver, "of its files are not on this machine", 30, "#base-model-panel")
    assert "model.pth" in panel.splitlines() and "huggingface.co/coqui/XTTS-v2" in panel and "=" not in panel
    wait_text(driver, "The settings changed since this plan", 30)
    time.sleep(6)  # a toast would be gone by now
    assert "model.pth" in wait_text(driver, "of its files are not on this machine", 5, "#base-model-panel")
    choose(driver, "form-version", "tiny")
    gone = lambda d: not any(e.is_displayed() for e in d.find_elements("id", "base-model-panel"))
    wait_for(driver, gone, 30, "the panel to go")
