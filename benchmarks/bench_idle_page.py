"""What a page left open costs: the CPU time of the browser's renderer (and of the whole browser) and of the app
server over a window, with the page on the Fine-tune tab and no run active.

Starts the app (`python app.py` from --app-root, by default this checkout) on a temporary output folder, opens
it in headless Chromium, lets it settle, then reads the processes' CPU times (user + system, from psutil) at the
start and the end of the window. Printed as % of one core. Another checkout (e.g. an export of an older commit)
can be measured alike for a before/after on the same machine and load. `--reference` measures, the same way, a
Gradio page with one textbox and no event: what any page of this Gradio costs (its status tracker runs an
animation-frame loop while the page is open).

    .venv/bin/python benchmarks/bench_idle_page.py --reference           # 60 s window, after 15 s settling
    .venv/bin/python benchmarks/bench_idle_page.py --app-root /tmp/main-export --seconds 60
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common as common


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cpu(process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _browser_processes(driver) -> tuple[list, list]:
    """(renderers, all browser processes) under the ChromeDriver the page runs in."""
    import psutil

    everything = psutil.Process(driver.service.process.pid).children(recursive=True)
    renderers = [p for p in everything if "--type=renderer" in " ".join(p.cmdline())]
    return renderers, everything


REFERENCE_APP = """
import sys
import gradio as gr
with gr.Blocks() as demo:
    gr.Markdown("# XTTS fine-tuning studio")
    gr.Textbox("an idle page")
demo.queue().launch(server_port=int(sys.argv[2]), ssr_mode=False)
"""


def measure(app_root: Path | None, seconds: float, settle: float, tab: str) -> dict[str, float]:
    """CPU of the page's renderer, of the whole browser and of the server over `seconds`; app_root None: the
    reference page (REFERENCE_APP)."""
    import psutil

    from tests.webui.browser import open_tab, start_chromium, wait_text

    work = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    port = _free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "XTTS_PLANNER_WARM_UP": "0"}
    if app_root is None:
        (work / "app.py").write_text(REFERENCE_APP)
    log = open(work / "app.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port), "--output-dir", str(work / "output")],
        cwd=app_root or work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    driver = None
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5):
                    break
            except OSError:
                time.sleep(0.5)
        driver = start_chromium(work / "profile")
        driver.get(f"http://127.0.0.1:{port}/")
        wait_text(driver, "XTTS fine-tuning studio")
        if app_root is not None:
            open_tab(driver, tab)
        time.sleep(settle)
        app = psutil.Process(server.pid)
        renderers, browser = _browser_processes(driver)
        before = (sum(map(_cpu, renderers)), sum(map(_cpu, browser)), _cpu(app))
        started = time.monotonic()
        time.sleep(seconds)
        after = (sum(map(_cpu, renderers)), sum(map(_cpu, browser)), _cpu(app))
        elapsed = time.monotonic() - started
        used = [100 * (b - a) / elapsed for a, b in zip(before, after, strict=True)]
        return {"renderer": used[0], "browser": used[1], "server": used[2], "seconds": elapsed}
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(60)
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--app-root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after the page loaded, not measured")
    parser.add_argument("--tab", default="Fine-tune")
    parser.add_argument("--reference", action="store_true", help="also measure a one-textbox Gradio page")
    args = parser.parse_args(argv)
    load_before = common.load_average()
    app = measure(args.app_root.resolve(), args.seconds, args.settle, args.tab)
    rows = [(f"this app ({args.tab} tab, no run)", app)]
    if args.reference:
        rows.append(("reference: one-textbox Gradio page", measure(None, args.seconds, args.settle, args.tab)))
    print(f"Device: {common.machine()}; app from {args.app_root.resolve()}; headless Chromium")
    print(f"Load average (1/5/15 min): {load_before} -> {common.load_average()}")
    print(f"Window: {args.seconds:.0f} s after {args.settle:.0f} s settling; CPU in % of one core")
    print("| page | browser renderer | browser, all processes | app server |\n|---|---|---|---|")
    for name, result in rows:
        print(f"| {name} | {result['renderer']:.1f} | {result['browser']:.1f} | {result['server']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
