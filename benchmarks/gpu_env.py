"""The GPU call's first section: what the box has (torch, CUDA, cuDNN, BF16, SDPA kernels, FFmpeg and torchcodec,
nvidia-ml-py, bitsandbytes' CUDA kernels), each checked by using it, not by its version string alone."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _check(run: Callable[[], Any]) -> dict[str, Any]:
    """{"ok": True, "value": ...} or {"ok": False, "error": "..."}: one check never stops the section."""
    try:
        return {"ok": True, "value": run()}
    except Exception as exc:  # noqa: BLE001 - what failed is the finding
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}


def _versions() -> dict[str, str]:
    found = {}
    for name in ("torch", "transformers", "coqui-tts", "coqui-tts-trainer", "bitsandbytes", "torchcodec", "jiwer"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


def _bf16_matmul() -> str:
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    error = ((a @ b).float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()
    return f"relative error {float(error):.1e} against FP32"


def _sdpa_kernels() -> dict[str, str]:
    """Which scaled-dot-product-attention kernels run for a BF16 causal attention of the GPT's shape."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(2, 16, 512, 64, device="cuda", dtype=torch.bfloat16)
    found = {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        result = _check(lambda b=backend: _sdpa_with(b, q, sdpa_kernel))
        found[backend.name.lower()] = "runs" if result["ok"] else result["error"][:120]
    return found


def _sdpa_with(backend: Any, q: torch.Tensor, kernel: Any) -> None:
    with kernel(backend):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    torch.cuda.synchronize()


def _ffmpeg() -> dict[str, Any]:
    """FFmpeg's command and torchcodec decoding a WAV (coqui's torchaudio.load goes through it)."""
    import soundfile as sf

    found: dict[str, Any] = {"ffmpeg_command": shutil.which("ffmpeg") or "none"}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tone.wav"
        sf.write(str(path), (0.1 * np.sin(np.arange(22050) / 10)).astype(np.float32), 22050)

        def decode() -> str:
            from torchcodec.decoders import AudioDecoder

            samples = AudioDecoder(str(path)).get_all_samples()
            return f"decoded {samples.data.shape[-1]} samples"

        found["torchcodec_decode"] = _check(decode)
    return found


def _nvml() -> str:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return f"{pynvml.nvmlDeviceGetName(handle)}: {info.used / 1024**3:.2f} of {info.total / 1024**3:.2f} GiB used"


def _bitsandbytes(device: str) -> str:
    """One 8-bit AdamW step on the device, and the library bitsandbytes loaded."""
    import bitsandbytes as bnb

    weight = torch.nn.Parameter(torch.randn(4096, 256, device=device))
    optimizer = bnb.optim.AdamW8bit([weight], lr=1e-3)
    weight.grad = torch.randn_like(weight)
    before = weight.detach().clone()
    optimizer.step()
    moved = float((weight.detach() - before).abs().max())
    state = optimizer.state[weight]
    native = getattr(getattr(bnb, "cextension", None), "lib", None)  # which of its libraries bitsandbytes loaded
    library = Path(getattr(getattr(native, "_lib", None), "_name", "") or "").name or "none"
    return (
        f"AdamW8bit step on {device}: weights moved by up to {moved:.1e}, state {state['state1'].dtype}; "
        f"{type(native).__name__} {library}"
    )


def _scoring_speed(device: str) -> dict[str, Any]:
    """Seconds to score the naturalness (DistillMOS) of 8 speech-like clips of 4 s on the CPU and on the device, and
    their speaker embeddings (Resemblyzer, CPU): the scored evaluation's background work, which the training loop
    waits for at the next evaluation (~35 s a scoring on the H200, docs/benchmarks.md)."""
    from bench_common import SAMPLE_RATE, speech_like

    from utils.quality.naturalness import get_mos_model, naturalness_of_wav
    from utils.quality.speaker import embed_wav

    clips = [speech_like(4.0, seed=i) for i in range(8)]
    found: dict[str, Any] = {}
    for where in dict.fromkeys(["cpu", device]):
        get_mos_model(where)  # loaded once per process: not the per-evaluation cost
        naturalness_of_wav(clips[0], SAMPLE_RATE, where)
        if where == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for clip in clips:
            naturalness_of_wav(clip, SAMPLE_RATE, where)
        found[f"naturalness_{where}_s"] = round(time.perf_counter() - started, 3)
    embed_wav(clips[0], SAMPLE_RATE)
    started = time.perf_counter()
    for clip in clips:
        embed_wav(clip, SAMPLE_RATE)
    found["speaker_embedding_cpu_s"] = round(time.perf_counter() - started, 3)
    return found


def environment(device: str) -> dict[str, Any]:
    """The section's record (JSON-able)."""
    started = time.perf_counter()
    cuda = device == "cuda"
    found: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
        "versions": _versions(),
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    if cuda:
        props = torch.cuda.get_device_properties(0)
        found.update(
            device=torch.cuda.get_device_name(0),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            memory_gib=round(props.total_memory / 1024**3, 2),
            multiprocessors=props.multi_processor_count,
            cudnn=torch.backends.cudnn.version(),
            bf16_supported=torch.cuda.is_bf16_supported(),
            bf16_matmul=_check(_bf16_matmul),
            sdpa_kernels=_check(_sdpa_kernels),
        )
    found["ffmpeg"] = _ffmpeg()
    found["nvidia_ml_py"] = _check(_nvml)
    found["bitsandbytes"] = _check(lambda: _bitsandbytes(device))
    found["scoring_8_clips_of_4s"] = _check(lambda: _scoring_speed(device))
    found["disk_free_gib"] = round(shutil.disk_usage(tempfile.gettempdir()).free / 1024**3, 1)
    found["seconds"] = round(time.perf_counter() - started, 1)
    return found


def summary(found: dict[str, Any]) -> list[str]:
    """The section as a few markdown lines."""

    def said(check: Any) -> str:
        if not isinstance(check, dict):
            return str(check)
        said = str(check.get("value")) if check.get("ok") else f"FAILED: {check.get('error')}"
        return " ".join(said.split())  # an error's own line breaks would end the markdown list item

    versions = ", ".join(f"{k} {v}" for k, v in found["versions"].items())
    lines = [f"- Python {found['python']} on {found['machine']}; {versions}; torch CUDA {found['torch_cuda']}"]
    if "device" in found:
        lines.append(
            f"- {found['device']} (compute {found['capability']}, {found['memory_gib']} GiB, "
            f"{found['multiprocessors']} SMs); cuDNN {found['cudnn']}; BF16 {found['bf16_supported']} "
            f"({said(found['bf16_matmul'])}); SDPA kernels: {said(found['sdpa_kernels'])}"
        )
    ffmpeg = found["ffmpeg"]
    lines.append(f"- FFmpeg command: {ffmpeg['ffmpeg_command']}; torchcodec: {said(ffmpeg['torchcodec_decode'])}")
    lines.append(f"- nvidia-ml-py: {said(found['nvidia_ml_py'])}")
    lines.append(f"- bitsandbytes: {said(found['bitsandbytes'])}")
    if "scoring_8_clips_of_4s" in found:
        lines.append(f"- scoring 8 clips of 4 s (s): {said(found['scoring_8_clips_of_4s'])}")
    return lines
