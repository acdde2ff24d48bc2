"""Launch the real app (python app.py) in a subprocess on a free port, for the web tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import STALL_S, cpu_seconds, file_growth, folder_growth, unwatch, wait_until, watch

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppServer:
    def __init__(self, output_dir: Path, log_path: Path, *extra: str, data_dirs: tuple[Path, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = log_path
        # No planner warm-up (a trace of the defaults in a child): the tests that plan start the child themselves.
        env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1", "XTTS_PLANNER_WARM_UP": "0"}
        self.log = open(log_path, "w")  # noqa: SIM115 - the server's output, closed in close()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "app.py",
                "--port",
                str(self.port),
                "--output-dir",
                str(output_dir),
                *(arg for folder in data_dirs for arg in ("--data-dir", str(folder))),
                *extra,
            ],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        # Every wait of a test goes on while this app works: its log and output folder grow (a run's steps and
        # log), or it and its children (a training worker) use CPU time. An open page's timer costs far less
        # than 5 s of CPU within a wait's stall time, so an idle app does not count.
        self.signals = [
            watch(signal)
            for signal in (
                file_growth(log_path),
                folder_growth(Path(output_dir)),
                cpu_seconds(self.process, quantum=5.0),
            )
        ]

    def wait_ready(self, stall: float = STALL_S) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"app exited early:\n{self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(ready, "the app to serve its page", stall=stall, describe=lambda: self.log_text()[-3000:])

    def close(self) -> None:
        for signal in self.signals:
            unwatch(signal)
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()

    def client(self):
        """A gradio_client for this app; what it downloads stays beside the app's log."""
        from gradio_client import Client

        return Client(self.url, verbose=False, download_files=str(self.log_path.parent / "downloads"))

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def running_app(folder: Path, *extra: str) -> Iterator[AppServer]:
    """The app on `folder/output` with `folder/data` as its data folder: started, ready, stopped on exit."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    server = AppServer(folder / "output", folder / "app.log", *extra, data_dirs=(folder / "data",))
    try:
        server.wait_ready()
        yield server
    finally:
        server.close()


def app_with_tiny_model(folder: Path, tiny_base) -> AppServer:
    """The app on `folder/output`, `folder/data` its data folder, with the session's tiny model as its only base model
    (models/tiny linked into `folder/models`, which the app reads from $XTTS_MODELS_DIR). The caller waits for it and
    closes it."""
    import pytest

    models = folder / "models"
    models.mkdir()
    (models / "tiny").symlink_to(tiny_base.folder, target_is_directory=True)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XTTS_MODELS_DIR", str(models))
        return AppServer(folder / "output", folder / "app.log", data_dirs=(folder / "data",))
