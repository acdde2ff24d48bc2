"""The product's GPU record in one call of at most 4.5 minutes on an air-gapped GPU box, so that a machine's start,
this call, a fix and a second call fit in a 15-minute window: what the box has, a CUDA smoke step, the product's
own journey start to ready/, the planner beside CUDA's peak per phase, and the step table.

    python3 scripts/gather_wheels.py                      # here, with a package index: .whl/ (git-ignored)
    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_table.py --out "$OUT"      # on the box (device run, carry .whl)
    .venv/bin/python benchmarks/gpu_table.py --dry-run --out /tmp/gpu    # here: the same path, tiny, CPU
    .venv/bin/python scripts/gpu_record.py RETURNED_FOLDER               # afterwards: scored, into docs/gpu/

In order, each section written into gpu_record.json and gpu_record.md as it ends (a cut window keeps what ran):
1. install and environment (benchmarks/gpu_env.py): the wheels, the import check (the call stops here within
   seconds if it fails), torch, CUDA, cuDNN, BF16, SDPA kernels, FFmpeg/torchcodec, nvidia-ml-py, bitsandbytes.
2. smoke: one training step of the tiny model on the GPU through the product's path (the call stops if it fails),
   while the full-size model and the clips are built on the CPU.
3. journey (benchmarks/gpu_journey.py, its own process): `train_gpt` at full size, ~10 minutes of speech-like clips,
   batch 8, 1 epoch, every optimization on, every evaluation scored, no inference search, to ready/;
   run.json's phase times with each phase's CUDA peaks (written at every evaluation, so a cut journey keeps them);
   what it spoke packed into journey.tar. Meanwhile the memory planner plans the same run on a CPU core.
4. memory, right after the journey: per phase, the planner's plan beside the CUDA peak measured in it.
5. rows (benchmarks/gpu_rows.py, one process for all, in the order users need them): appended to rows.jsonl as each
   finishes; what the budget does not reach is marked "not run" (torch.compile, then the mixed-length rows, then
   the guide's single optimizations are the first to go).
The wheels in .whl/ are installed offline first (pip --no-index --target /tmp/site). --dry-run runs the same code on
this CPU with the tiny model and a small configuration, imports limited to the box's image plus what
scripts/gather_wheels.py carries (benchmarks/box_imports); the test suite runs it (tests/test_gpu_run.py) and fails
when a section would be cut.
Files in --out: gpu_record.json, gpu_record.md, rows.jsonl, journey.tar (and the command's own log).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "benchmarks"
sys.path[:0] = [str(ROOT), str(HERE)]

GIB = 1024**3
# Dense (no sparsity) BF16 tensor-core peaks from NVIDIA's datasheets, TFLOP/s; the first name found in the
# device's name wins (so "H100 PCIe" before "H100"). An 8192^3 BF16 matmul reached 798 on this workplace's H100.
BF16_PEAK_TFLOPS = (
    ("GH200", 989.4),
    ("H200", 989.4),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("L40S", 362.1),
    ("L4", 121.0),
    ("A10", 125.0),
    ("RTX 4090", 165.2),
    ("RTX 3090", 71.0),
    ("RTX A6000", 154.8),
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64")
PLATFORMS += ("manylinux2014_x86_64",)
# Call A (docs/benchmarks.md): carry [".whl"] (scripts/gather_wheels.py), timeout_s 295.
DEVICE_COMMAND = (
    'set -o pipefail; PYTHONUNBUFFERED=1 timeout 285 python3 benchmarks/gpu_table.py --out "$OUT" 2>&1 | '
    'tee "$OUT/run.log"'
)
IMPORT_CHECK = "import TTS.tts.layers.xtts.trainer.gpt_trainer, trainer, soundfile, bitsandbytes, jiwer, resemblyzer"
# Seconds from the call's start. budget: when the last row must have ended (the call's own overhead, the record
# and the output, comes after); journey_s: the journey's most; smoke_s: the smoke step's most; row_s/compile_s/oom_s:
# what a row needs left to start. The full call stays under 4.5 minutes on the box; the dry run's figures are
# this CPU's, with the tiny model.
SIZES = {
    "full": dict(
        budget=250.0,
        journey_s=175.0,
        smoke_s=75.0,
        row_s=18.0,
        compile_s=60.0,
        oom_s=45.0,
        journey_clips=(80, 8),
        epochs=1,
        batch=8,
        warmup=3,
        steps=6,
    ),
    "dry": dict(
        budget=240.0,
        journey_s=150.0,
        smoke_s=60.0,
        row_s=6.0,
        compile_s=30.0,
        oom_s=10.0,
        journey_clips=(4, 2),
        epochs=1,
        batch=2,
        warmup=0,
        steps=1,
    ),
}
ROW_CLIPS = {"full": ((10.8, 11.5), (1.0, 11.5)), "dry": ((2.0, 3.0), (1.0, 3.0))}  # seconds: rows, mixed rows
SMOKE_CLIPS = (4, 2)  # the smoke step's tiny dataset: train and eval clips of 2-3 s


class Stopped(Exception):
    """The call cannot usefully go on (a failed import check or smoke step): the record says why."""


def bf16_peak(device_name: str) -> tuple[float | None, str]:
    for name, tflops in BF16_PEAK_TFLOPS:
        if name.lower() in device_name.lower():
            return tflops * 1e12, f"{name}: {tflops:g} TFLOP/s dense BF16 (NVIDIA datasheet)"
    return None, f"no BF16 peak known for {device_name!r}: MFU not computed"


# --- the box's packages --------------------------------------------------------------------------------------


def pip_install(wheels: list[Path], target: Path, for_box_python: bool) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    command += ["--no-cache-dir", "--upgrade", "--target", str(target)]
    if for_box_python:  # here: check the box's wheels install for CPython 3.12 on manylinux x86-64
        command += ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
        for platform in PLATFORMS:
            command += ["--platform", platform]
    subprocess.run([*command, *map(str, wheels)], check=True)


def box_environment(opts: argparse.Namespace) -> dict[str, Any]:
    """On the box: the wheels installed into --site, on the path of this process and its children. Dry run: imports
    limited to the box's image plus what gather_wheels carries (and, with --check-wheels, the wheels' install
    checked for Python 3.12). Returns what was done and whether the benchmark's imports work."""
    os.environ.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")  # no network on the box: fail fast, never wait
    wheels = sorted(opts.wheels.glob("*.whl"))
    done: dict[str, Any] = {"wheels": len(wheels), "wheel_mib": round(sum(w.stat().st_size for w in wheels) / 2**20, 1)}
    paths = []
    if opts.dry_run:
        sys.path.insert(0, str(ROOT / "scripts"))
        from gather_wheels import BOX_HAS, box_closure

        if wheels and opts.check_wheels:
            with tempfile.TemporaryDirectory() as scratch:
                pip_install(wheels, Path(scratch), for_box_python=True)
            done["checked_for_python_3_12"] = True
        allowed = Path(tempfile.gettempdir()) / f"box_allowed_{os.getpid()}.txt"
        allowed.write_text("\n".join(sorted(BOX_HAS | set(box_closure()))) + "\n", encoding="utf-8")
        os.environ["BOX_ALLOWED"] = str(allowed)
        paths.append(str(HERE / "box_imports"))
    elif wheels:
        started = time.perf_counter()
        pip_install(wheels, opts.site, for_box_python=False)
        done["install_s"] = round(time.perf_counter() - started, 1)
        paths.append(str(opts.site))
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for path in reversed(paths):
        sys.path.insert(0, path)
    if opts.dry_run:  # the same import limits in this process
        spec = importlib.util.spec_from_file_location("box_imports", HERE / "box_imports" / "sitecustomize.py")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    # In a process of its own, as the sections' processes import; read once the model is built (imports_checked).
    done["_check"] = subprocess.Popen([sys.executable, "-c", IMPORT_CHECK], stderr=subprocess.PIPE, text=True)
    return done


def imports_checked(done: dict[str, Any]) -> dict[str, Any]:
    """`box_environment`'s record with its import check's result."""
    check = done.pop("_check")
    _, errors = check.communicate()
    return {**done, "imports": "ok" if check.returncode == 0 else f"FAILED: {errors.strip()[-600:]}"}


# --- the record -------------------------------------------------------------------------------------------


class Record:
    """gpu_record.json and gpu_record.md in --out, rewritten (atomically) whenever a section or row is added."""

    def __init__(self, out: Path, data: dict[str, Any]) -> None:
        self.out, self.data = out, data

    def update(self, **sections: Any) -> None:
        import gpu_report

        self.data.update(sections)
        self.data["wall_s"] = round(time.monotonic() - self.data["_started"], 1)
        shown = {k: v for k, v in self.data.items() if not k.startswith("_")}
        _write(self.out / "gpu_record.json", json.dumps(shown, indent=1, default=str))
        _write(self.out / "gpu_record.md", gpu_report.markdown(shown))

    def section_ended(self, name: str) -> None:
        """When each section ended, seconds from the call's start: what each costs on the box."""
        ended = self.data.setdefault("sections_s", {})
        ended[name] = round(time.monotonic() - self.data["_started"], 1)
        self.update()


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _child(script: str, *args: Any) -> list[str]:
    return [sys.executable, str(HERE / script), *map(str, args)]


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows written so far; a line still being written (or cut by a killed process) is left for later."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


# --- the sections -------------------------------------------------------------------------------------------


def start_smoke(opts: argparse.Namespace, models: Path, device: str, scratch: Path) -> subprocess.Popen:
    """One training step of the tiny model through the product's training setup on the device, in its own process
    (the rows' code, one row): a broken CUDA path stops the call within seconds, before the full-size model."""
    import bench_common as common
    from bench_row import ROWS

    version = common.ensure_model(models, full_size=False)
    train_csv, eval_csv = common.write_dataset(models / "gpu-smoke", *SMOKE_CLIPS, seconds=(2.0, 3.0))
    config = {
        "rows": [ROWS[5].name],  # all three + leaner steps: train_gpt's defaults but TF32, on any device
        "version": version,
        "model_dir": str(models),
        "device": device,
        "batch": 2,
        "train_csv": str(train_csv),
        "eval_csv": str(eval_csv),
        "mixed_train_csv": str(train_csv),
        "warmup": 0,
        "steps": 1,
        "row_budget_s": 0,
        "compile_budget_s": 0,
        "deadline": time.time() + 3600,
    }
    (scratch / "smoke.json").write_text(json.dumps(config), encoding="utf-8")
    return subprocess.Popen(_child("gpu_rows.py", scratch / "smoke.json", scratch / "smoke.jsonl"))


def smoke_result(process: subprocess.Popen, scratch: Path, until: float) -> dict[str, Any]:
    try:
        process.wait(timeout=max(1.0, until - time.time()))
    except subprocess.TimeoutExpired:
        process.kill()
        return {"ok": False, "error": "the smoke step did not finish within its time"}
    rows = _read_rows(scratch / "smoke.jsonl")
    if not rows:
        return {"ok": False, "error": f"the smoke step's process ended ({process.returncode}) without a record"}
    row = rows[0]
    keep = ("step_s", "loss", "peak_gib", "evidence", "error", "traceback", "skipped")
    return {"ok": "step_s" in row and "error" not in row, **{k: row[k] for k in keep if k in row}}


def prepare(opts: argparse.Namespace, size: dict[str, Any], device: str, scratch: Path) -> dict[str, Any]:
    """The model folder and the clips (built on the box: real weights cannot travel), and the sections' configs."""
    import bench_common as common
    from bench_end_to_end import write_real_length_dataset

    models = opts.model_dir
    started = time.perf_counter()
    version = common.ensure_model(models, full_size=not opts.dry_run)
    train, held_out = size["journey_clips"]
    journey_csv, journey_eval = write_real_length_dataset(models / f"journey-{train}-{held_out}", train, held_out)
    durations = common.ljspeech_like_durations(train + held_out, seed=20)
    clips = (size["warmup"] + size["steps"] + 1) * size["batch"]
    (low, high), mixed = ROW_CLIPS["dry" if opts.dry_run else "full"]
    folder = models / f"gpu-rows-{clips}-{low:g}-{high:g}"
    train_csv, eval_csv = common.write_dataset(folder, clips, 2, seconds=(low, high))
    mixed_csv, _ = common.write_dataset(folder.with_name(folder.name + "-mixed"), 2 * clips, 2, seconds=mixed)
    # The out-of-memory row: two steps of train_gpt (its first split, then a step at the smaller micro-batch).
    oom_csv, oom_eval = common.write_dataset(folder.with_name(folder.name + "-oom"), 2 * size["batch"], 2, (low, high))
    base = {"version": version, "model_dir": str(models), "device": device, "batch": size["batch"]}
    # Every evaluation scored (each one's time and memory in the record); no inference search: on the H200 each
    # scoring kept the loop waiting ~35 s (docs/benchmarks.md), and a candidate is one more.
    extra = {"quality_eval_share": 1.0, "inference_search": 0}
    if opts.dry_run:  # one short sentence: the full-size HiFi-GAN decoder is slow on a CPU
        extra.update(quality_eval=1, quality_max_audio_tokens=10, num_workers=0)
    else:  # random weights never say a stop token: every clip would run to 1.5 times its real one (up to ~23 s)
        extra.update(quality_max_audio_tokens=80)
    journey = {
        **base,
        "train_csv": str(journey_csv),
        "eval_csv": str(journey_eval),
        "epochs": size["epochs"],
        "scratch": str(scratch),
        "clip_seconds": durations[:train],
        "audio_minutes": round(sum(durations) / 60, 1),
        "extra": extra,
    }
    return {
        "prepare_s": round(time.perf_counter() - started, 1),
        "journey": journey,
        "rows": {
            **base,
            "train_csv": str(train_csv),
            "eval_csv": str(eval_csv),
            "mixed_train_csv": str(mixed_csv),
            "oom_train_csv": str(oom_csv),
            "oom_eval_csv": str(oom_eval),
            "oom_clip_seconds": high,
            "warmup": size["warmup"],
            "steps": size["steps"],
            "leave_out": opts.leave_out,
            "row_budget_s": size["row_s"],
            "compile_budget_s": size["compile_s"],
            "oom_budget_s": size["oom_s"],
        },
    }


def run_journey(scratch: Path, out: Path, timeout: float) -> dict[str, Any]:
    """The journey's process and its record; past `timeout`, what its run folder holds so far (its phases' times
    and peaks as of its last evaluation)."""
    import gpu_journey

    result = out / "journey.json"
    started = time.perf_counter()
    try:
        subprocess.run(_child("gpu_journey.py", "run", scratch / "journey.json", result), timeout=timeout, check=False)
        journey = json.loads(result.read_text(encoding="utf-8"))
    except subprocess.TimeoutExpired:
        journey = gpu_journey.partial(scratch, out, f"stopped after {timeout:.0f} s, the call's time for it")
        journey["seconds"] = round(time.perf_counter() - started, 1)
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        journey = {"ok": False, "error": f"the journey's process left no record ({type(exc).__name__})"}
    result.unlink(missing_ok=True)  # folded into the record
    return journey


def run_rows(config: dict[str, Any], out: Path, record: Record, deadline: float) -> None:
    """The rows' process, its rows taken into the record as each one lands; stopped at the deadline."""
    rows_file = out / "rows.jsonl"
    rows_file.unlink(missing_ok=True)
    config_file = Path(config["scratch_dir"]) / "rows.json"
    config_file.write_text(json.dumps({**config, "deadline": deadline}), encoding="utf-8")
    process = subprocess.Popen(_child("gpu_rows.py", config_file, rows_file))
    seen = 0
    while True:
        ended = process.poll() is not None
        rows = _read_rows(rows_file)
        if len(rows) != seen:
            seen = len(rows)
            record.update(rows=rows)
        if ended:
            break
        if time.time() > deadline + 10:
            process.kill()
            record.update(rows=rows, rows_cut="the rows' process was stopped at the call's time budget")
            break
        time.sleep(1)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-record"))
    parser.add_argument("--dry-run", action="store_true", help="On this CPU with the tiny model: the same path.")
    parser.add_argument("--wheels", type=Path, default=ROOT / ".whl")
    parser.add_argument("--site", type=Path, default=Path("/tmp/site"))
    parser.add_argument("--check-wheels", action="store_true", help="Dry run: check the wheels install for 3.12.")
    parser.add_argument("--budget", type=float, default=None, help="Seconds for it all (default 245; dry 240).")
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument(
        "--skip",
        nargs="*",
        choices=("journey", "rows"),
        default=[],
        help="Sections not to run: a second call after a first that recorded them leaves its time to the rest.",
    )
    parser.add_argument(
        "--leave-out",
        nargs="*",
        default=None,
        help="Rows (by name) not to run (dry run default: torch.compile, ~1 minute of compiling on a CPU; give "
        "--leave-out alone to run it).",
    )
    opts = parser.parse_args(argv)
    if opts.leave_out is None:
        from gpu_rows import COMPILE_ROW

        opts.leave_out = [COMPILE_ROW] if opts.dry_run else []
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    size = SIZES["dry" if opts.dry_run else "full"]
    started = time.monotonic()
    began = time.time()
    deadline = began + (opts.budget or size["budget"])
    opts.out.mkdir(parents=True, exist_ok=True)
    record = Record(opts.out, {"_started": started, "dry_run": opts.dry_run, "command": " ".join(sys.argv)})
    record.update(budget_s=opts.budget or size["budget"], date=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    try:
        sections(opts, size, record, began, deadline)
    except Stopped as why:
        record.update(stopped=str(why))
        print(f"\nSTOPPED: {why}", flush=True)
        return 3
    except BaseException as exc:  # an early failure still leaves its record
        record.update(
            stopped=f"{type(exc).__name__}: {str(exc).strip()[:500]}", traceback=traceback.format_exc()[-3000:]
        )
        raise
    print("\n" + (opts.out / "gpu_record.md").read_text(encoding="utf-8"), flush=True)
    return 0


def sections(opts: argparse.Namespace, size: dict[str, Any], record: Record, began: float, deadline: float) -> None:
    """The call's sections in order (the module docstring), each written into the record as it ends."""
    installed = box_environment(opts)
    record.section_ended("install")
    import gpu_env
    import gpu_journey
    import torch

    cuda = torch.cuda.is_available() and not opts.dry_run
    device = "cuda" if cuda else "cpu"
    if not cuda and not opts.dry_run:
        raise Stopped("no CUDA GPU here: use --dry-run for the CPU check")
    record.update(
        device=torch.cuda.get_device_name(0) if cuda else f"CPU ({os.cpu_count()} cores), dry run",
        torch=torch.__version__,
        environment=gpu_env.environment(device),
    )
    record.data["environment"]["install"] = install = imports_checked(installed)
    record.section_ended("environment")
    if install["imports"] != "ok":
        raise Stopped(f"the import check failed: {install['imports']}")
    opts.model_dir = opts.model_dir or __import__("bench_common").default_model_dir()
    opts.model_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        smoke = start_smoke(opts, opts.model_dir, device, scratch)
        configs = prepare(opts, size, device, scratch)  # on the CPU while the smoke step uses the GPU
        record.update(prepare_s=configs["prepare_s"], audio_minutes=configs["journey"]["audio_minutes"])
        record.update(smoke=smoke_result(smoke, scratch, began + size["smoke_s"] + configs["prepare_s"]))
        record.section_ended("smoke and prepare")
        if not record.data["smoke"]["ok"]:
            raise Stopped(f"the smoke step failed: {record.data['smoke'].get('error', 'no step time')}")
        journey_config, rows_config = configs["journey"], {**configs["rows"], "scratch_dir": scratch_dir}
        (scratch / "journey.json").write_text(json.dumps(journey_config), encoding="utf-8")
        planner = subprocess.Popen(_child("gpu_journey.py", "plan", scratch / "journey.json", scratch / "plan.json"))
        if "journey" not in opts.skip:
            print("... journey: train_gpt start to ready/", flush=True)
            journey = run_journey(scratch, opts.out, min(size["journey_s"], deadline - time.time()))
            record.update(journey=journey)
            print(f"    journey ok: {journey.get('ok')} in {journey.get('seconds')} s", flush=True)
        plan = _planner_result(planner, scratch / "plan.json", time.time() + 30)
        memory = gpu_journey.memory_rows(record.data.get("journey") or {}, plan if "error" not in plan else None)
        record.update(plan=plan, memory=memory)
        record.section_ended("journey and memory")
        if "rows" not in opts.skip:
            run_rows(rows_config, opts.out, record, deadline)
            finish_rows(record)
            record.section_ended("rows")


def _planner_result(process: subprocess.Popen, path: Path, until: float) -> dict[str, Any]:
    try:
        process.wait(timeout=max(1.0, until - time.time()))
    except subprocess.TimeoutExpired:
        process.kill()
        return {"error": "the planner was not done within the call's time budget"}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        return {"error": f"no plan: {exc}"}


def _step(row: dict[str, Any]) -> float:
    return row.get("median_step_s") or row["step_s"]


def finish_rows(record: Record) -> None:
    """Speed-up against the baseline, the guide's claims beside it, MFU (the baseline's FLOPs / step time / peak)."""
    from gpu_rows import GUIDE_CLAIMS, ORDER, SAME_WORK

    rows = record.data.get("rows") or []
    baseline = next((r for r in rows if r["name"] == ORDER[0] and "step_s" in r), None)
    peak, source = bf16_peak(record.data.get("device", "")) if not record.data.get("dry_run") else (None, "a CPU")
    for row in rows:
        claim = GUIDE_CLAIMS.get(row["name"])
        if claim:
            row["guide"] = {"speedup": claim[0], "peak_gb": claim[1]}
        if baseline and "step_s" in row:  # medians: one slow step of a few moves a mean
            row["speedup"] = round(_step(baseline) / _step(row), 3)
            flops = baseline.get("step_flops")
            if peak and flops and row["name"] in SAME_WORK:
                row["mfu"] = round(flops / _step(row) / peak, 4)
    record.update(rows=rows, mfu_peak=source)


if __name__ == "__main__":
    sys.exit(main())
