"""The product's GPU table in one call on an air-gapped GPU box: wheels installed offline, every row, MFU.

    python3 scripts/gather_wheels.py                 # here, with a package index: .whl/ (git-ignored, ~11 MiB)
    python3 benchmarks/gpu_table.py --out "$OUT"     # on the box (device run, carry [".whl"]): < 10 minutes
    python benchmarks/gpu_table.py --dry-run --out /tmp/gpu-table   # here, on the CPU: the same path, tiny model

It installs `.whl/` with `pip install --no-index --no-deps --target /tmp/site`, then runs bench_train's rows
(baseline, each optimization alone, all three, + leaner steps, + TF32, + 8-bit AdamW, + LoRA, length grouping on
mixed-length clips, + torch.compile) at full size, batch 2 and 8 in each row's own process (one setup, both batch
sizes; a row past its time budget or out of memory is an error row, the table goes on), then the memory planner's
prediction for each measured row (in parallel on the CPU cores). FLOPs per step are counted with torch's
FlopCounterMode on one more step of each row; MFU = the baseline step's FLOPs (no recompute: the model's own work)
/ step time / the GPU's dense BF16 peak, looked up from its name (BF16_PEAK_TFLOPS, NVIDIA's datasheets); HFU
counts what the row really executes (recompute included). torch.compile's compile time is what its warm-up steps
took beyond ordinary steps. --dry-run runs the same code on this CPU with the tiny model, imports limited to what
the box has plus the gathered wheels (benchmarks/box_imports), and the wheels' install checked for Python 3.12.
Writes gpu_table.md, gpu_table.json and rows.log into --out.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

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
IMPORT_CHECK = "import TTS.tts.layers.xtts.trainer.gpt_trainer, trainer, soundfile, librosa, bitsandbytes"
# Rows whose step is the compiled row's step without compiling (the first one measured gives its FLOPs).
UNCOMPILED_TWINS = ("+ TF32/cuDNN benchmark (train_gpt's default)", "all three + leaner steps")


def bf16_peak(device_name: str) -> tuple[float | None, str]:
    for name, tflops in BF16_PEAK_TFLOPS:
        if name.lower() in device_name.lower():
            return tflops * 1e12, f"{name}: {tflops:g} TFLOP/s dense BF16 (NVIDIA datasheet)"
    return None, f"no BF16 peak known for {device_name!r}: MFU not computed"


# --- the wheels ---------------------------------------------------------------------------------------------


def pip_install(wheels: list[Path], target: Path, for_box_python: bool) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    command += ["--no-cache-dir", "--upgrade", "--target", str(target)]
    if for_box_python:  # here: check the box's wheels install for CPython 3.12 on manylinux x86-64
        command += ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
        for platform in PLATFORMS:
            command += ["--platform", platform]
    subprocess.run([*command, *map(str, wheels)], check=True)


def box_environment(opts: argparse.Namespace, out: Path) -> dict[str, str]:
    """Install the wheels (on the box: into --site; dry run: into a scratch folder for Python 3.12, imports then
    limited to the box's image plus the wheels) and return the environment the rows run with."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    wheels = sorted(opts.wheels.glob("*.whl"))
    if not wheels:
        print(f"No wheels in {opts.wheels}: using what this Python has (scripts/gather_wheels.py gathers them).")
    elif opts.dry_run:
        with tempfile.TemporaryDirectory() as scratch:
            pip_install(wheels, Path(scratch), for_box_python=True)
        print(f"{len(wheels)} wheels install for CPython 3.12 manylinux x86-64 (checked, not imported here)")
        sys.path.insert(0, str(ROOT / "scripts"))
        from gather_wheels import BOX_HAS

        allowed = out / "box_allowed.txt"
        names = sorted(BOX_HAS | {w.name.split("-")[0] for w in wheels})
        allowed.write_text("\n".join(names) + "\n", encoding="utf-8")
        env["BOX_ALLOWED"] = str(allowed)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "benchmarks" / "box_imports"), env.get("PYTHONPATH", "")])
    else:
        started = time.perf_counter()
        pip_install(wheels, opts.site, for_box_python=False)
        env["PYTHONPATH"] = os.pathsep.join([str(opts.site), env.get("PYTHONPATH", "")])
        print(f"{len(wheels)} wheels installed into {opts.site} in {time.perf_counter() - started:.0f} s")
    check = subprocess.run([sys.executable, "-c", IMPORT_CHECK], env=env, capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"The benchmark's imports fail with these wheels:\n{check.stderr[-1500:]}")
    os.environ.update(env)  # this process (the planner's workers) and the rows alike
    for path in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
        if path and path not in sys.path:
            sys.path.insert(0, path)
    if "BOX_ALLOWED" in env:  # the same import limits in this process
        spec = importlib.util.spec_from_file_location(
            "box_imports", ROOT / "benchmarks" / "box_imports" / "sitecustomize.py"
        )
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return env


# --- rows and planner ---------------------------------------------------------------------------------------


def bench_options(opts: argparse.Namespace) -> argparse.Namespace:
    import bench_train

    argv = ["--device", opts.device, "--batches", *map(str, opts.batches), "--warmup", str(opts.warmup)]
    argv += ["--steps", str(opts.steps), "--no-epoch2", "--extra-rows", "--flops", "--model-dir", str(opts.model_dir)]
    argv += ["--tiny"] if opts.dry_run and opts.device == "cuda" else []
    return bench_train.parse(argv)


def by_batch(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if "by_batch" in record:
        return record["by_batch"]
    if "step_s" in record or "error" in record:
        return {str(record.get("batch")): record}
    return {}


def run_order(rows: list[Any]) -> list[int]:
    """Rows in the order they run: torch.compile right after 'all three + leaner steps' (its uncompiled twin),
    so a budget cut at the end takes the cheaper, less asked-for rows, not the compile figure."""
    order = list(range(len(rows)))
    compiled = [i for i in order if rows[i].torch_compile]
    rest = [i for i in order if i not in compiled]
    leaner = next((rest.index(i) for i in rest if rows[i].name == UNCOMPILED_TWINS[1]), len(rest) - 1)
    return rest[: leaner + 1] + compiled + rest[leaner + 1 :]


def measure_rows(
    bench: argparse.Namespace, deadline: float, out: Path, planner: Planner | None = None
) -> list[dict[str, Any]]:
    from dataclasses import asdict

    import bench_common as common
    import bench_train
    from bench_row import skip_reason

    rows = bench_train.all_rows(bench)
    records: dict[int, dict[str, Any]] = {}
    log = out / "rows.log"
    with tempfile.TemporaryDirectory() as logs:
        for index in run_order(rows):
            row = rows[index]
            reason = skip_reason(row, bench.device_type)
            remaining = deadline - time.monotonic() - 20  # the planner and the table need a little
            if not reason and remaining < 30:
                reason = "not run: the table's time budget is spent"
            if reason:
                records[index] = {"name": row.name, "row": asdict(row), "skipped": reason}
                continue
            print(f"... {row.name} (batches {bench.batches}); load {common.load_average()}", flush=True)
            timeout = min(bench.row_timeout * (2 if row.torch_compile else 1), remaining)  # compiling: minutes
            record = {"name": row.name, **bench_train.run_in_subprocess(index, bench, Path(logs), timeout)}
            record["row"] = asdict(row)
            row_log = Path(logs) / f"row-{index}.log"
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"===== {row.name}\n")
                handle.write(row_log.read_text(encoding="utf-8", errors="replace") if row_log.is_file() else "")
            for size, result in by_batch(record).items():
                print(f"    batch {size}: {result.get('error') or summary(result)}", flush=True)
            if planner:
                planner.submit(record, bench)  # on the CPU cores while the next rows use the GPU
            records[index] = record
    return [records[index] for index in range(len(rows))]  # the table's order


def summary(result: dict[str, Any]) -> str:
    peak = result.get("gpu_peak_bytes") or result.get("cpu_allocator_peak_bytes") or 0
    return f"{result['step_s']:.3f} s/step, peak {peak / GIB:.2f} GiB, {result.get('step_flops', 0) / 1e12:.2f} TFLOP"


def _plan(task: tuple[Any, argparse.Namespace, int, dict[str, int]]) -> dict[str, Any]:
    import bench_train

    row, bench, size, shapes = task
    options = copy.copy(bench)
    options.batch = size
    return bench_train.plan(row, options, shapes)


class Planner:
    """The planner's worst case and same-shapes peak per measured row and batch, in worker processes (CPU only),
    started as each row is measured; whatever is not done by the deadline is said so."""

    def __init__(self) -> None:
        self.pool = multiprocessing.get_context("fork").Pool(max(1, min(6, (os.cpu_count() or 2) - 2)))
        self.pending: list[tuple[dict[str, Any], Any]] = []

    def submit(self, record: dict[str, Any], bench: argparse.Namespace) -> None:
        from bench_row import Row

        row = Row(**{**record["row"], "extras": tuple(record["row"]["extras"])})
        for size, result in by_batch(record).items():
            if "shapes" in result:
                self.pending.append(
                    (result, self.pool.apply_async(_plan, ((row, bench, int(size), result["shapes"]),)))
                )

    def collect(self, deadline: float) -> None:
        try:
            for result, future in self.pending:
                try:
                    result["planner"] = future.get(timeout=max(1.0, deadline - time.monotonic()))
                except multiprocessing.TimeoutError:
                    result["planner"] = {"note": "planner not run: the table's time budget is spent"}
                except Exception as exc:  # noqa: BLE001 - a planner failure is one cell, not the table
                    result["planner"] = {"note": f"planner failed: {type(exc).__name__}: {str(exc)[:120]}"}
        finally:
            self.pool.terminate()


# --- FLOPs, MFU and the table -------------------------------------------------------------------------------


def add_flops(records: list[dict[str, Any]], peak: float | None) -> None:
    named = {r["name"]: by_batch(r) for r in records}
    model_flops = {size: res.get("step_flops") for size, res in by_batch(records[0]).items()}  # the baseline
    for record in records:
        row = record["row"]
        for size, result in by_batch(record).items():
            if "step_s" not in result:
                continue
            executed = result.get("step_flops")
            if executed is None and row["torch_compile"]:
                twins = [named.get(n, {}).get(size, {}).get("step_flops") for n in UNCOMPILED_TWINS]
                executed = next((f for f in twins if f), None)
                result["step_flops_from"] = "FLOPs of the same step uncompiled"
            result["executed_flops"] = executed
            comparable = row["lora_rank"] == 0 and not row["loader"] and model_flops.get(size)
            if peak and comparable:
                result["mfu"] = model_flops[size] / result["step_s"] / peak
            if peak and executed:
                result["hfu"] = executed / result["step_s"] / peak


def fmt(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def table(records: list[dict[str, Any]], size: str) -> str:
    import bench_common as common

    header = ["configuration", "step (s)", "samples/s", "peak (GiB)", "planner, same shapes (GiB)"]
    header += ["planner, worst case (GiB)", "TFLOP/step (executed)", "MFU", "HFU", "compile (s)", "note"]
    rows = []
    for record in records:
        result = by_batch(record).get(size)
        if result is None or "step_s" not in result:
            note = record.get("skipped") or (result or record).get("error", "")
            rows.append([record["name"], *[""] * (len(header) - 2), note])
            continue
        peak = result.get("gpu_peak_bytes") or result.get("cpu_allocator_peak_bytes")
        plan = result.get("planner", {})
        same, worst = plan.get("same_shapes_bytes"), plan.get("worst_case_bytes")
        rows.append(
            [
                record["name"],
                f"{result['step_s']:.3f}",
                f"{result['samples_per_s']:.2f}",
                fmt(peak and peak / GIB, ".2f"),
                fmt(same and same / GIB, ".2f"),
                fmt(worst and worst / GIB, ".2f"),
                fmt(result.get("executed_flops") and result["executed_flops"] / 1e12, ".3g"),
                fmt(result.get("mfu"), ".1%"),
                fmt(result.get("hfu"), ".1%"),
                fmt(result.get("compile_s"), ".0f"),
                "; ".join(filter(None, [plan.get("note", ""), result.get("step_flops_from", "")])),
            ]
        )
    return common.markdown_table(header, rows)


def write(records: list[dict[str, Any]], meta: dict[str, Any], out: Path) -> str:
    lines = [
        f"Device: {meta['device']}  ",
        f"Peak used for MFU: {meta['peak_source']}  ",
        f"Model: {meta['model']}; {meta['versions']}  ",
        f"{meta['warmup']} warm-up + {meta['steps']} timed steps per batch size, each row in its own process "
        f"(budget {meta['row_timeout']:.0f} s); whole table {meta['wall_s']:.0f} s; {meta['date']}  ",
        f"Command: `{meta['command']}`",
        "",
        "MFU: the baseline step's FLOPs (FlopCounterMode, no recompute) / step time / the BF16 peak, for the rows "
        "that do the baseline's work (not LoRA, not the mixed-length rows); HFU: the row's executed FLOPs "
        "(recompute included). Peak: CUDA max_memory_allocated (CPU: the allocator's events of one step). The "
        "mixed-length rows train other clips (1-11.5 s): compare them with each other.",
    ]
    for size in meta["batches"]:
        lines += ["", f"Batch {size}:", "", table(records, str(size))]
    text = "\n".join(lines) + "\n"
    (out / "gpu_table.md").write_text(text, encoding="utf-8")
    (out / "gpu_table.json").write_text(json.dumps({"meta": meta, "rows": records}, indent=2), encoding="utf-8")
    return text


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-table"))
    parser.add_argument("--dry-run", action="store_true", help="On this CPU with the tiny model: the same path.")
    parser.add_argument("--wheels", type=Path, default=ROOT / ".whl")
    parser.add_argument("--site", type=Path, default=Path("/tmp/site"))
    parser.add_argument("--batches", type=int, nargs="+", default=None, help="Default 2 8 (dry run: 1 2).")
    parser.add_argument("--warmup", type=int, default=None, help="Untimed steps first (default 2; dry run 1).")
    parser.add_argument("--steps", type=int, default=None, help="Timed steps (default 5; dry run 1).")
    parser.add_argument("--budget", type=float, default=None, help="Seconds for it all (default 560; dry 1800).")
    parser.add_argument("--row-timeout", type=float, default=None, help="Seconds per row, 2x compiling (200; dry 300).")
    parser.add_argument("--model-dir", type=Path, default=None)
    opts = parser.parse_args(argv)
    dry = opts.dry_run
    opts.batches = opts.batches or ([1, 2] if dry else [2, 8])
    opts.warmup = opts.warmup if opts.warmup is not None else (1 if dry else 2)
    opts.steps = opts.steps or (1 if dry else 5)
    opts.budget = opts.budget or (1800.0 if dry else 560.0)
    opts.row_timeout = opts.row_timeout or (300.0 if dry else 200.0)
    return opts


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    opts = parse(argv)
    deadline = started + opts.budget
    opts.out.mkdir(parents=True, exist_ok=True)
    box_environment(opts, opts.out)
    import bench_common as common
    import bench_train
    import torch

    opts.device = "cpu" if opts.dry_run or not torch.cuda.is_available() else "cuda"
    if not opts.dry_run and opts.device == "cpu":
        raise SystemExit("No CUDA GPU here: use --dry-run for the CPU check.")
    opts.model_dir = opts.model_dir or common.default_model_dir()
    bench = bench_options(opts)
    bench.row_timeout = opts.row_timeout
    bench_train.prepare(bench)
    planner = Planner()
    records = measure_rows(bench, deadline, opts.out, planner)
    planner.collect(deadline)
    if opts.device == "cuda":
        device = f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    else:
        device = common.machine()
    peak, source = bf16_peak(device) if opts.device == "cuda" else (None, "a CPU: MFU not computed")
    add_flops(records, peak)
    meta = {
        "device": device,
        "peak_source": source,
        "model": "XTTS v2 GPT tiny (dry run)" if opts.dry_run else "XTTS v2 GPT full size, random weights",
        "versions": ", ".join(f"{k} {v}" for k, v in common.library_versions().items()),
        "batches": opts.batches,
        "warmup": opts.warmup,
        "steps": opts.steps,
        "row_timeout": opts.row_timeout,
        "wall_s": time.monotonic() - started,
        "date": common.now(),
        "command": "python " + " ".join(sys.argv),
    }
    print("\n" + write(records, meta, opts.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
