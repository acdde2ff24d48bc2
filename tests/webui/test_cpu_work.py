"""Transcription and checks never hold back Start (issue 28): CPU work is in no queue shared with the GPU work,
and a transcription that uses a free GPU makes Start wait for it only then."""

from __future__ import annotations

import threading

from tests.helpers import simulated_gpu
from tests.webui.test_handlers import make_context
from utils.device.gpu import GPUInfo
from webui.context import GPU_QUEUE


def test_checks_prepare_and_transcription_are_not_in_the_gpu_queue(tmp_path):
    from webui.ui import build_ui

    demo, _ = build_ui(tmp_path / "output")
    by_api = {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}
    for name in ("validate_dataset", "upload_zip", "check_dataset", "prepare_dataset", "transcribe_recordings"):
        assert by_api[name].concurrency_id != GPU_QUEUE, f"{name} would wait behind (or hold back) Start"
    assert by_api["start_training"].concurrency_id == GPU_QUEUE, "Start still waits for GPU work of the page"


def test_gpu_work_takes_the_gpu_only_when_no_run_uses_it_and_start_waits_only_for_that(tmp_path, monkeypatch):
    import webui.context

    ctx = make_context(tmp_path)
    monkeypatch.setattr(webui.context, "detect_gpu", lambda: simulated_gpu((8, 0)))
    monkeypatch.setattr(ctx.runner, "is_active", lambda: True)
    with ctx.gpu_work_or_cpu() as device:
        assert device == "cpu" and not ctx.gpu_work.locked(), "beside a run: the CPU, and Start is not held"
    monkeypatch.setattr(ctx.runner, "is_active", lambda: False)
    started = threading.Event()
    with ctx.gpu_work_or_cpu() as device:
        assert device == "cuda" and ctx.gpu_work.locked()
        start = threading.Thread(target=lambda: (ctx.gpu_work.acquire(), started.set(), ctx.gpu_work.release()))
        start.start()
        assert not started.wait(0.5), "Start waits while the GPU transcribes"
    start.join(timeout=30)
    assert started.is_set() and not ctx.gpu_work.locked()
    monkeypatch.setattr(webui.context, "detect_gpu", lambda: GPUInfo(available=False))
    with ctx.gpu_work_or_cpu() as device:
        assert device == "cpu"
