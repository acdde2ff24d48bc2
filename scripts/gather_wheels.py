"""Gather the wheels the GPU benchmark needs on an air-gapped GPU box into `.whl/` (git-ignored), under 64 MiB.

The box (Python 3.12, manylinux x86-64, no package index) already holds PyTorch and much of the scientific
stack (BOX_HAS, read off the device image's package list); this fetches the project's pinned packages that
the benchmark imports and are missing there, and each of their needs that is missing there too, one version
of each (requirements.txt's pin, else the version this checkout's environment runs, else the newest). Only
pip and the standard library are used, so it runs before any environment exists.

    python3 scripts/gather_wheels.py            # then, on the box: benchmarks/gpu_table.py installs them

`box_closure()` names the same distributions from this environment's installed metadata, without downloading:
what the GPU call's CPU dry run lets import.

bitsandbytes ships its library for every CUDA and ROCm release (41 MiB); the box's PyTorch is CUDA 13.0, so
its wheel is repacked with the CUDA 13.x and CPU libraries alone (4 MiB; the RECORD rewritten to match).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

from pip._vendor.packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 64 * 1024**2
PYTHON = "3.12"
# The 'cuda' image of the GPU boxes (/work/.library/device/KINDS.md, "Python packages already there").
_BOX_IMAGE = """
    absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
    charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
    cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax
    fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2
    joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
    markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch
    mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti
    nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver
    nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13
    nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
    orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache
    protobuf psutil py-cpuinfo pyarrow pybind11 pygments pyparsing pyproject-hooks pyre-extensions pytest
    pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex
    requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece
    sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate
    tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
    torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
    typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
    xxhash yarl zipp"""
BOX_HAS = frozenset(_BOX_IMAGE.split())
# What the benchmark imports that the box lacks (coqui's XTTS training path, 8-bit AdamW, the product's audio I/O;
# `import TTS` refuses to start without torchcodec beside torch >= 2.9, though WAV clips are read by soundfile), and
# the scored evaluation's CER arithmetic (jiwer), speaker similarity (resemblyzer) and naturalness (distillmos; both
# with their weights in the wheel).
# Whisper (faster-whisper, CTranslate2, PyAV and a model) does not fit: the CER is computed afterwards, on a CPU
# (scripts/gpu_record.py).
ROOTS = (
    "coqui-tts",
    "coqui-tts-trainer",
    "bitsandbytes",
    "soundfile",
    "torchcodec",
    "jiwer",
    "resemblyzer",
    "distillmos",
)
# Declared by coqui-tts but never imported on the XTTS training path (the alignment search of other
# models); leaving it out keeps the folder small. A row that needed it would fail with its name. `typing` is
# resemblyzer's backport of a module the standard library has.
NOT_NEEDED = frozenset({"monotonic-alignment-search", "typing"})
# A requirement served by another distribution: resemblyzer asks for webrtcvad, published as source only;
# webrtcvad-wheels ships the same module prebuilt (as requirements.txt installs it here).
SUBSTITUTES = {"webrtcvad": "webrtcvad-wheels"}
# A marker environment of the box, for the Requires-Dist lines that carry one.
MARKERS = {
    "python_version": PYTHON,
    "python_full_version": PYTHON + ".3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64")
PLATFORMS += ("manylinux2014_x86_64", "manylinux1_x86_64", "any")
# Files left out of a wheel: bitsandbytes' libraries for other CUDA and ROCm releases (the box's torch is cu130);
# xls-r-sqa's own quality models (15 MiB), of which distillmos imports only the code.
SLIM = {
    "bitsandbytes": re.compile(r"libbitsandbytes_(?!(cpu|cuda13\d*)\.so$)\w+\.so$"),
    "xls-r-sqa": re.compile(r"^xls_r_sqa/models/.*\.pt$"),
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    """requirements.txt's exact pins."""
    found = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)", line)
        if match:
            found[canonical(match.group(1))] = match.group(2)
    return found


def venv_versions() -> dict[str, str]:
    """The versions this checkout's .venv runs with (its *.dist-info folders), for what requirements.txt leaves
    unpinned: the box then runs what the tests here ran."""
    found = {}
    for info in (ROOT / ".venv").glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        found[canonical(name)] = version
    return found


def chosen_version(name: str, pinned: dict[str, str], local: dict[str, str]) -> str | None:
    if name in pinned:
        return pinned[name]
    if name in local:
        return local[name]
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def download(spec: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", PYTHON, "--implementation", "cp", "-d", str(dest), spec]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    if subprocess.run(command, check=False).returncode != 0:
        # A source-only release (docopt): built here, which is right only for pure Python (checked below).
        print(f"{spec}: no wheel published; building one from its source", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), spec], check=True)
    new = set(dest.glob("*.whl")) - before
    if any("-none-any.whl" not in w.name and "manylinux" not in w.name for w in new):
        raise SystemExit(f"{spec}: built for this machine only ({', '.join(w.name for w in new)}): not for the box")
    name = canonical(re.split(r"[=<>!~ ]", spec)[0])
    matches = new or {w for w in dest.glob("*.whl") if canonical(w.name.split("-")[0]) == name}
    return sorted(matches)[-1]


def requirements(wheel: Path) -> list[str]:
    """The names a wheel needs at run time on the box (extras and other platforms' markers left out)."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode("utf-8")
    lines = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    return _needed(lines)


def _needed(lines: list[str]) -> list[str]:
    needed = []
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(MARKERS):
            needed.append(canonical(req.name))
    return needed


def _walk(needs: Any) -> list[str]:
    """The distributions to carry, ROOTS first, then what each needs (`needs(name)`), minus what the box has."""
    queue, seen = [canonical(r) for r in ROOTS], []
    while queue:
        name = queue.pop(0)
        name = SUBSTITUTES.get(name, name)
        if name in seen or name in BOX_HAS or name in NOT_NEEDED:
            continue
        seen.append(name)
        queue += needs(name)
    return seen


def box_closure() -> list[str]:
    """What `gather` fetches, named from this environment's installed metadata (no download)."""
    return _walk(lambda name: _needed(metadata.requires(name) or []))


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def slim_wheel(wheel: Path, drop: re.Pattern[str]) -> None:
    """Repack `wheel` without the files whose names match `drop`; RECORD rewritten to match."""
    slim = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as target:
        kept = [i for i in source.infolist() if not drop.search(i.filename)]
        record = next(i.filename for i in kept if i.filename.endswith(".dist-info/RECORD"))
        lines = []
        for info in kept:
            if info.filename == record:
                continue
            data = source.read(info)
            target.writestr(info, data)
            lines.append(_record_line(info.filename, data))
        target.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    slim.replace(wheel)


def gather(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    pinned, local = pins(), venv_versions()
    wheels = []

    def fetch(name: str) -> list[str]:
        version = chosen_version(name, pinned, local)
        wheel = download(f"{name}=={version}" if version else name, dest)
        if name in SLIM:
            slim_wheel(wheel, SLIM[name])
        wheels.append(wheel)
        print(f"{wheel.name:70s} {wheel.stat().st_size / 1024**2:6.2f} MiB", flush=True)
        return requirements(wheel)

    _walk(fetch)
    return wheels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=ROOT / ".whl", help="Folder of the wheels (default .whl/).")
    opts = parser.parse_args(argv)
    for old in opts.dest.glob("*.whl"):  # one version of each: a stale one would stop the whole install
        old.unlink()
    wheels = gather(opts.dest)
    total = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels, {total / 1024**2:.2f} MiB in {opts.dest} (limit {LIMIT / 1024**2:.0f} MiB)")
    if total > LIMIT:
        largest = sorted(wheels, key=lambda w: -w.stat().st_size)[:3]
        print("Over the limit; the largest: " + ", ".join(w.name for w in largest), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
