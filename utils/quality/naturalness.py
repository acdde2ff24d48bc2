"""Naturalness: a predicted mean opinion score (MOS, 1 = bad .. 5 = excellent) of a speech clip.

DistillMOS (package `distillmos`, MIT) is a 4.1 M-parameter CNN + transformer distilled from an XLS-R
speech-quality model; its weights (16.9 MB) ship inside the wheel, so it scores offline. It reads 16 kHz mono
audio, normalises each clip to its peak, and scores a clip of any length in 7.68 s windows (a longer one in
overlapping windows, averaged). A shorter clip is repeated to fill the window rather than padded with silence as
the package does: padded, 1 s of white noise scored 2.3 and 1 s of speech 1.9; repeated, 1.3 and 1.4, and white
noise scores 1.2-1.3 at every length (measured here on gradio's bundled recordings). The model is loaded once per
process, on the CPU unless a device is asked for (tens of milliseconds a clip there).
As a guide (the sanity test, on a real recording shipped with gradio): speech 3.3, the same clip clipped 1.5,
white noise 1.2.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading

import numpy as np

from utils.audio.io import load_audio, resample

MOS_SAMPLE_RATE = 16000
# DistillMOS's window: 7.68 s at 16 kHz.
WINDOW_SAMPLES = 122880
# Less audio than this gives no meaningful score (the model pads to 7.68 s; a blip is mostly padding).
MIN_SECONDS = 0.25

_MODELS: dict[str, object] = {}
_LOCK = threading.Lock()


class NaturalnessUnavailable(RuntimeError):
    """distillmos (or its xls-r-sqa dependency) is not installed or its weights cannot be loaded."""


def get_mos_model(device: str = "cpu"):
    """The process's DistillMOS model on `device`, loaded on the first call for that device."""
    with _LOCK:
        model = _MODELS.get(device)
        if model is None:
            try:
                import torch
                from distillmos import ConvTransformerSQAModel
            except ImportError as exc:
                raise NaturalnessUnavailable(
                    f"naturalness needs distillmos and xls-r-sqa ({exc}); install the versions in requirements.txt"
                ) from exc
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # it prints where its weights came from
                    model = ConvTransformerSQAModel().eval().to(torch.device(device))
            except Exception as exc:  # a broken install, whatever it raises, is "unavailable" with its reason
                raise NaturalnessUnavailable(f"could not load DistillMOS: {exc}") from exc
            _MODELS[device] = model
        return model


def naturalness_of_wav(wav: np.ndarray, sample_rate: int, device: str = "cpu") -> float:
    """Predicted MOS (1-5) of mono float audio at `sample_rate`. ValueError for a silent or too short clip."""
    import torch

    audio = resample(np.asarray(wav, dtype=np.float32), sample_rate, MOS_SAMPLE_RATE)
    if len(audio) < MIN_SECONDS * MOS_SAMPLE_RATE:
        raise ValueError(f"less than {MIN_SECONDS} s of audio: no naturalness score")
    if not np.any(np.abs(audio) > 1e-6):  # the model divides by the peak
        raise ValueError("the clip is silent: no naturalness score")
    if len(audio) < WINDOW_SAMPLES:
        audio = np.tile(audio, -(-WINDOW_SAMPLES // len(audio)))[:WINDOW_SAMPLES]
    model = get_mos_model(device)
    with torch.inference_mode():
        batch = torch.from_numpy(audio).to(next(model.parameters()).device).unsqueeze(0)
        score = float(model(batch).reshape(-1).mean())
    return min(5.0, max(1.0, score))


def naturalness_of_file(path: str | os.PathLike, device: str = "cpu") -> float:
    """Predicted MOS of an audio file (only read). Raises utils.audio.io.AudioError when it cannot be decoded,
    ValueError when it is silent or too short."""
    wav, rate = load_audio(path, MOS_SAMPLE_RATE)
    return naturalness_of_wav(wav, rate, device)
