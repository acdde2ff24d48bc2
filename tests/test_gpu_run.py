"""The GPU run in one call: the wheels gathered for the box (bitsandbytes slimmed to the box's CUDA and still
installable, Requires-Dist read for the box's Python), the box's imports simulated, the MFU peak looked up, the
planner's phases beside the measured ones, and the whole call's CPU dry run (tiny model) with its scoring afterwards."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "benchmarks")]

import gather_wheels  # noqa: E402
import gpu_journey  # noqa: E402
import gpu_record  # noqa: E402
import gpu_rows  # noqa: E402
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
    gather_wheels.slim_wheel(wheel, gather_wheels.SLIM["bitsandbytes"])
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


def test_the_box_closure_carries_scoring_and_leaves_out_what_the_box_has():
    names = gather_wheels.box_closure()
    assert {"coqui-tts", "bitsandbytes", "jiwer", "rapidfuzz", "resemblyzer", "webrtcvad-wheels"} <= set(names)
    assert not set(names) & gather_wheels.BOX_HAS  # torch, numpy, transformers... travel with the box's image
    assert "webrtcvad" not in names and "typing" not in names  # a source-only package, a standard-library backport


def test_memory_rows_compare_allocated_with_allocated_per_phase():
    journey = {
        "phase_peak_gib": {"train_steps": 8.0, "eval_loss": 3.0, "scored_eval": 6.0, "saves": 4.0},
        "phase_reserved_gib": {"train_steps": 8.5, "eval_loss": 8.5, "scored_eval": 6.2, "saves": 6.2},
    }
    by_phase = {"training step": 8.9, "eval loss": 3.5, "scored evaluation": 6.2, "checkpoint save": 4.6}
    plan = {"peak_gib": 8.9, "cuda_overhead_gib": 0.5, "phase_peaks_gib": {**by_phase, "best model reload": 7.5}}
    rows = gpu_journey.memory_rows(journey, plan)
    assert [(r["phase"], r["planned_allocated_gib"], r["measured_gib"], r.get("reserved_gib")) for r in rows] == [
        ("training step", 8.4, 8.0, 8.5),  # the plan without its CUDA context, which the allocator never counts
        ("eval loss", 3.0, 3.0, 8.5),
        ("scored evaluation", 5.7, 6.0, 6.2),
        ("checkpoint save", 4.1, 4.0, 6.2),
        ("best model reload", 7.0, None, None),  # a phase the planner names and the run does not time
    ]
    assert rows[0]["planner_error"] == pytest.approx(0.05) and rows[2]["planner_error"] == pytest.approx(-0.05)
    step_only = gpu_journey.memory_rows(journey, {"peak_gib": 8.4, "phase_peaks_gib": None})
    assert [r.get("planned_allocated_gib") for r in step_only] == [8.4, None, None, None]


def test_the_out_of_memory_cap_lies_between_micro_batch_2_and_batch_8():
    cap = gpu_journey.out_of_memory_cap(
        {"version": "v2.0.2", "model_dir": "/nonexistent", "batch": 8, "clip_seconds": [11.5] * 16}
    )
    planned = cap["oom_planned_gib"]
    assert planned["2"] * 1.3 < planned["8"]  # batch 8 without checkpointing is far above micro-batch 2
    assert planned["2"] < cap["oom_limit_gib"] < planned["8"]


def test_a_rows_line_still_being_written_is_left_for_later(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"name": "baseline", "step_s": 0.3}) + "\n" + '{"name": "+ SDPA", "st')
    assert gpu_table._read_rows(rows) == [{"name": "baseline", "step_s": 0.3}]


def test_a_failed_import_check_stops_the_call_within_seconds_with_its_reason(tmp_path):
    out = tmp_path / "out"
    code = (
        "import sys; sys.path[:0] = [sys.argv[1]]; import gpu_table\n"
        "gpu_table.IMPORT_CHECK = 'import no_such_package_on_the_box'\n"
        "sys.exit(gpu_table.main(['--dry-run', '--out', sys.argv[2], '--model-dir', sys.argv[3]]))\n"
    )
    command = [sys.executable, "-c", code, str(ROOT / "benchmarks"), str(out), str(tmp_path / "models")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    record = json.loads((out / "gpu_record.json").read_text())
    assert "the import check failed" in record["stopped"] and "no_such_package_on_the_box" in record["stopped"]
    assert "smoke" not in record and "journey" not in record  # nothing after the check was started
    assert "STOPPED: the import check failed" in (out / "gpu_record.md").read_text()
    assert not (tmp_path / "models").exists()  # not even the tiny model was built


def test_the_documented_device_command_fits_the_device_tool():
    docs = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert gpu_table.DEVICE_COMMAND in docs and len(gpu_table.DEVICE_COMMAND) <= 2000
    assert "benchmarks/gpu_table.py" in gpu_table.DEVICE_COMMAND and '"$OUT"' in gpu_table.DEVICE_COMMAND


@pytest.mark.slow  # the whole call on this CPU: the tiny model's journey and every row (~1.5 minutes when quiet)
def test_the_dry_run_fits_its_budget_and_its_record_reaches_the_docs(tmp_path):
    out = tmp_path / "out"
    # The box's budget, on this shared 2-core machine: stretched by its load, never loosened when it is quiet.
    budget = gpu_table.SIZES["dry"]["budget"] * max(1.0, os.getloadavg()[0] / 2)
    command = [sys.executable, str(ROOT / "benchmarks" / "gpu_table.py"), "--dry-run", "--out", str(out)]
    command += ["--model-dir", str(tmp_path / "models"), "--budget", str(budget)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=2400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["gpu_record.json", "gpu_record.md", "journey.tar", "rows.jsonl"]  # the device tool returns 8
    assert all((out / f).stat().st_size < 16 * 1024**2 for f in files)
    record = json.loads((out / "gpu_record.json").read_text())
    assert record["environment"]["install"]["imports"] == "ok"  # with the box's packages only
    assert record["smoke"]["ok"] and record["smoke"]["step_s"] > 0
    assert list(record["sections_s"]) == ["install", "environment", "smoke and prepare", "journey and memory", "rows"]
    journey = record["journey"]
    assert journey["ok"] and journey["status"] == "finished" and journey["phase_seconds"]["train_steps"] > 0
    baseline, evaluation = journey["evaluations"]  # the base model's at step 0, then the run's
    assert baseline["step"] == 0 < evaluation["step"]
    assert evaluation["naturalness"] is not None and evaluation["babble_rate"] is not None  # distillmos travels
    assert any("no speech recogniser here" in r for r in evaluation["reasons"])  # no Whisper on the box
    assert [m["phase"] for m in record["memory"]][:4] == [p for _, p in gpu_journey.PHASES]
    assert record["memory"][0]["planned_allocated_gib"] > 0
    rows = {r["name"]: r for r in record["rows"]}
    assert list(rows) == gpu_rows.ORDER  # in the order users need them
    cut = [name for name, row in rows.items() if "budget is spent" in row.get("skipped", "")]
    assert not cut and "rows_cut" not in record, f"the budget cut {cut}: the call would lose them on the box"
    assert all(rows[name]["step_s"] > 0 and rows[name]["guide"] for name in gpu_rows.GUIDE_CLAIMS)
    assert "no CUDA GPU" in rows[gpu_rows.OUT_OF_MEMORY_ROW]["skipped"]
    assert "left out" in rows[gpu_rows.COMPILE_ROW]["skipped"]
    assert len(gpu_table._read_rows(out / "rows.jsonl")) == len(rows)
    with tarfile.open(out / "journey.tar") as archive:
        names = archive.getnames()
    assert "real/0.wav" in names and any(re.fullmatch(r"evals/step_\d+/0\.wav", n) for n in names)
    markdown = (out / "gpu_record.md").read_text()
    assert "| baseline (coqui's step as shipped) |" in markdown and "| training step |" in markdown

    # Afterwards, here: the returned folder (read-only, as the device tool gives it) scored into the docs.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "benchmarks.md").write_text(
        f"# Benchmarks\n\nBefore.\n\n{gpu_record.START}\nold\n{gpu_record.END}\n\nAfter.\n"
    )
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for path in out.iterdir():
        path.chmod(0o444)
    script = [sys.executable, str(ROOT / "scripts" / "gpu_record.py"), str(out), "--docs", str(docs)]
    scored = subprocess.run(script, capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the returned folder is left as it came
    (written,) = (docs / "gpu").glob("*.json")
    assert written.name.endswith("-dry-run.json")  # <date>-<device>.json
    quality = json.loads(written.read_text())["calls"][0]["journey"]["quality"]
    assert quality["cer"] is not None and "Whisper tiny.en" in quality["scored_afterwards"]
    assert quality["naturalness_here"] is not None
    page = (docs / "benchmarks.md").read_text()
    assert page.startswith("# Benchmarks\n\nBefore.") and page.rstrip().endswith("After.") and "\nold\n" not in page
    assert "| baseline (coqui's step as shipped) |" in page and written.name in page


def test_a_journey_cut_by_the_window_keeps_its_steps_evaluations_and_clips(tmp_path):
    run_dir = tmp_path / "scratch" / "journey" / "en-x-20261126-100000"
    (run_dir / "evals" / "step_10").mkdir(parents=True)
    (run_dir / "evals" / "step_10" / "0.wav").write_bytes(b"RIFF....WAVE")
    run_json = {"status": "running", "quality": {"sentences": ["hello there"], "real_clips": [None]}}
    (run_dir / "run.json").write_text(json.dumps(run_json))
    lines = [{"type": "train", "step": s, "step_time": 0.2} for s in (1, 2, 10)]
    lines.append({"type": "quality", "step": 10, "cer": None, "similarity": 0.4, "reasons": ["cer: no Whisper"]})
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    journey = gpu_journey.partial(tmp_path / "scratch", out, "stopped after 200 s")
    assert journey["ok"] is False and journey["error"] == "stopped after 200 s" and journey["steps"] == 10
    assert journey["quality"]["similarity"] == 0.4 and journey["status"] == "running"
    with tarfile.open(out / "journey.tar") as archive:
        assert "evals/step_10/0.wav" in archive.getnames() and "sentences.json" in archive.getnames()
    assert gpu_journey.partial(tmp_path / "nothing", out, "cut")["error"] == "cut"
