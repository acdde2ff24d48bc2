"""What the speech server's tests share: a real uvicorn server in a thread, a record of what the model is given,
and the output folder of finished runs they serve."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.helpers import wait_until
from tests.webui.app_server import free_port

KEY = "test-key-123"


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` on uvicorn (a real server, its own event loop) on a free port of 127.0.0.1; its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), "uvicorn to start", stall=60)
        assert thread.is_alive(), "uvicorn ended at start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextlib.contextmanager
def generations(voice: Any) -> Iterator[list[dict[str, Any]]]:
    """Every call of the loaded model's `inference_stream` while inside: the text it was given, its keywords, when it
    started (its first chunk asked for) and ended (its last given). The calls go through to the model unchanged."""
    model = voice.model
    original = model.inference_stream
    calls: list[dict[str, Any]] = []

    def recorded(text: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        call = {"text": text, "language": args[0] if args else kwargs.get("language"), "kwargs": kwargs}
        call["start"] = time.monotonic()
        calls.append(call)
        yield from original(text, *args, **kwargs)
        call["end"] = time.monotonic()

    model.inference_stream = recorded
    try:
        yield calls
    finally:
        del model.inference_stream


def copy_run(run: Path, output: Path, name: str | None = None) -> Path:
    """A copy of a run folder inside `output` (a finished run's files, ready/ included)."""
    target = output / (name or run.name)
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("checkpoint_*.pth", "best_model.pth", "tensorboard"))
    return target


def set_text_frontend(run: Path, language: str, amharic_g2p: bool = False) -> None:
    """Record another text front end in the run's ready/finetune.json (as a run of that language would have)."""
    path = run / "ready" / "finetune.json"
    info = json.loads(path.read_text())
    info.update(language=language, text_frontend={"language": language, "amharic_g2p": amharic_g2p})
    path.write_text(json.dumps(info))


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under a folder: what a server must leave as it found it."""
    files = (p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}
