"""The GPU run in one call: the wheels gathered for the box (bitsandbytes slimmed to the box's CUDA and still
installable, Requires-Dist read for the box's Python), the box's imports simulated, the MFU peak looked up."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "benchmarks")]

import gather_wheels  # noqa: E402
import gpu_table  # noqa: E402

LIBS = ("cpu", "cuda118", "cuda128", "cuda130", "rocm64")


def _fake_bitsandbytes(folder: Path) -> Path:
    wheel = folder / "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"
    info = "bitsandbytes-0.50.2.dist-info"
    files = {f"bitsandbytes/libbitsandbytes_{lib}.so": os.urandom(64) for lib in LIBS}
    files["bitsandbytes/__init__.py"] = b"VALUE = 1\n"
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: bitsandbytes\nVersion: 0.50.2\n"
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", "\n".join(f"{n},," for n in files) + f"\n{info}/RECORD,,\n")
    return wheel


def test_bitsandbytes_keeps_the_box_cuda_and_cpu_libraries_and_still_installs(tmp_path):
    wheel = _fake_bitsandbytes(tmp_path)
    gather_wheels.slim_bitsandbytes(wheel)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {n for n in names if n.endswith(".so")} == {
            "bitsandbytes/libbitsandbytes_cpu.so",
            "bitsandbytes/libbitsandbytes_cuda130.so",
        }
        record = archive.read("bitsandbytes-0.50.2.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, _ = line.split(",")
            if digest:  # every kept file listed with its real hash
                data = archive.read(name)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={expected}", name
        assert {line.split(",")[0] for line in record} == names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
    )
    assert sorted(p.name for p in (target / "bitsandbytes").glob("*.so")) == [
        "libbitsandbytes_cpu.so",
        "libbitsandbytes_cuda130.so",
    ]


def test_requirements_are_read_for_the_box_python_without_extras(tmp_path):
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    metadata = "\n".join(
        [
            "Name: demo",
            "Requires-Dist: Soundfile>=0.12",
            "Requires-Dist: standard-aifc; python_version >= '3.13'",
            "Requires-Dist: pywin32; sys_platform == 'win32'",
            "Requires-Dist: pytest; extra == 'dev'",
            "Requires-Dist: typing_extensions; python_version < '3.13'",
        ]
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo-1.0.dist-info/METADATA", metadata)
    assert gather_wheels.requirements(wheel) == ["soundfile", "typing-extensions"]


def test_the_box_simulation_hides_what_the_box_lacks(tmp_path):
    allowed = tmp_path / "allowed.txt"
    allowed.write_text("numpy\n", encoding="utf-8")
    env = dict(os.environ, BOX_ALLOWED=str(allowed), PYTHONPATH=str(ROOT / "benchmarks" / "box_imports"))
    code = (
        "import importlib.util, numpy\n"
        "assert importlib.util.find_spec('soundfile') is None\n"
        "try:\n    import soundfile\nexcept ModuleNotFoundError:\n    print('hidden')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hidden"


def test_mfu_peak_is_looked_up_from_the_device_name():
    assert gpu_table.bf16_peak("NVIDIA H100 80GB HBM3")[0] == 989.4e12
    assert gpu_table.bf16_peak("NVIDIA H100 PCIe")[0] == 756.0e12
    assert gpu_table.bf16_peak("NVIDIA GeForce RTX 4090")[0] == 165.2e12
    peak, why = gpu_table.bf16_peak("Some Future GPU")
    assert peak is None and "no BF16 peak known" in why
