"""Multi-device training: two CPU processes on gloo, launched by train_gpt(devices="cpu,cpu") through torchrun,
exactly as two GPUs are (only the device string and the back end differ), on the tiny model.

Rank 1 writes nothing a test could read, so the runs set XTTS_DDP_TRACE: every rank appends, per step, the
clips it trained on, its loss and a SHA-256 of its GPT weights. Five launches, across the entry points: the
notebook call (stopped), the same run resumed and rank 1 killed, resumed from its mid-epoch checkpoint to
the end through the web app's runner, the CLI refusing an unusable dataset, and the CLI killed with -9.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
import torch

from tests.helpers import cpu_seconds, folder_growth, run_watched, wait_until, write_dataset
from utils.data.check_cache import CACHE_FOLDER
from utils.device.selection import parse_devices
from utils.files import read_jsonl
from utils.gpt_train import train_gpt
from utils.options.arguments import TrainArguments
from utils.training.ranks.data_parallel import TRACE_ENV
from utils.training.recording.run_record import read_run

ROOT = Path(__file__).resolve().parents[2]
TRAIN_ROWS = 12  # write_dataset(n=14) holds out 2 rows for evaluation
EPOCHS, BATCH, ACCUMULATION, SAVE_STEP = 5, 3, 2, 3
TOTAL_STEPS = EPOCHS * (TRAIN_ROWS // 2 // BATCH)  # each rank takes 6 rows: 2 steps per epoch
# Checkpoints after 3 steps (half way through the second epoch), 6 and 9; all kept.
COMMON = dict(
    version="tiny",
    language="en",
    num_epochs=EPOCHS,
    batch_size=BATCH,
    grad_acumm=ACCUMULATION,
    save_step=SAVE_STEP,
    save_n_checkpoints=10,
    enable_mixed_precision=False,
    num_workers=0,
    print_step=50,
    devices="cpu,cpu",
    # Rank 0 scores each evaluation while rank 1 waits for it, as in a real run, but one sentence and clips of 10
    # audio tokens: the default (3 sentences, probes spoken up to ~14 s) costs 30-60 s per evaluation on 2 cores.
    quality_eval=1,
    quality_max_audio_tokens=10,
    retention_languages="",  # the retention probes are rank 0's alone, tested in one process (test_several_datasets.py)
)


def read_trace(folder: Path) -> dict[int, list[dict]]:
    return {rank: read_jsonl(folder / f"rank{rank}.jsonl") for rank in (0, 1)}


def train_steps(records: list[dict]) -> list[int]:
    return [r["step"] for r in records if r["type"] == "train"]


@pytest.fixture
def traced(monkeypatch, tmp_path_factory):
    """A fresh trace folder, inherited by the launched ranks."""
    folder = tmp_path_factory.mktemp("trace")
    monkeypatch.setenv(TRACE_ENV, str(folder))
    return folder


# --- no process is started -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "devices, expected",
    [
        ("", []),
        ("0,1", ["0", "1"]),
        (" cuda:0 , cuda:3", ["0", "3"]),
        ("cpu,CPU,cpu", ["cpu", "cpu", "cpu"]),
        ("2", ["2"]),
    ],
)
def test_devices_are_parsed(devices, expected):
    assert parse_devices(devices) == expected
    assert TrainArguments(devices=devices).devices == ",".join(expected), "stored in one spelling"


@pytest.mark.parametrize(
    "devices, message",
    [
        ("gpu0,gpu1", "is not a device"),
        ("cpu,0", "mixes CPU and GPUs"),
        ("1,cuda:1", "names a GPU twice"),
        ("0,,1", "'' is not a device"),
    ],
)
def test_bad_devices_are_refused_before_anything_starts(tmp_path, dataset_csv, devices, message):
    with pytest.raises(ValueError, match=message):
        train_gpt(**{**COMMON, "devices": devices}, train_csv=str(dataset_csv), output_path=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_missing_gpus_are_named_before_anything_starts(tmp_path, dataset_csv):
    count = torch.cuda.device_count()
    with pytest.raises(ValueError, match=f"GPU {count}, {count + 1} not found; this machine has {count} CUDA GPU"):
        train_gpt(
            **{**COMMON, "devices": f"{count},{count + 1}"},
            train_csv=str(dataset_csv),
            output_path=str(tmp_path / "out"),
        )
    assert not (tmp_path / "out").exists()


# --- two CPU processes ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, tiny_base):
    """Launch 1, from a notebook in the dataset's parent folder (relative paths, as a notebook writes them): two
    ranks, stopped by the caller after 3 steps; everything is read before later launches."""
    root = tmp_path_factory.mktemp("ddp")
    csv_path = write_dataset(root / "data", n=14)
    trace = root / "trace"
    os.environ[TRACE_ENV] = str(trace)
    seen: list[dict] = []
    here = os.getcwd()
    os.chdir(root)
    try:
        result = train_gpt(
            **COMMON,
            train_csv="data/metadata.csv",
            output_path="out",
            progress_callback=seen.append,
            stop_event=lambda: len(train_steps(seen)) >= 3,
        )
    finally:
        os.chdir(here)
        del os.environ[TRACE_ENV]
    run_dir = root / result.run_dir
    return {
        "root": root,
        "csv": csv_path,
        "result": result,
        "run_dir": run_dir,
        "seen": seen,
        "trace": read_trace(trace),
        "run": read_run(run_dir),
        "metrics": read_jsonl(run_dir / "metrics.jsonl"),
        "files": sorted(p.name for p in run_dir.iterdir()),
        "output": sorted(p.name for p in (root / "out").iterdir() if p.name != CACHE_FOLDER),  # beside the check
    }


@pytest.mark.slow
def test_both_ranks_train_their_own_shards_and_keep_identical_weights(stopped_run):
    trace = stopped_run["trace"]
    steps = [r["step"] for r in trace[0]]
    assert steps == [r["step"] for r in trace[1]] and steps[0] == 1 and len(steps) >= 3, "both ranks stepped"
    for mine, theirs in zip(trace[0], trace[1], strict=True):
        assert mine["gpt_sha256"] == theirs["gpt_sha256"], f"weights differ between ranks after step {mine['step']}"
    digests = [r["gpt_sha256"] for r in trace[0]]
    # grad_acumm=2, 2 steps per epoch: the optimizer steps on even steps only (odd ones skip the gradient
    # exchange), and only then do the weights move.
    for step, before, after in zip(steps[1:], digests, digests[1:], strict=False):
        assert (after != before) == (step % 2 == 0), f"step {step}"
    # Each epoch the ranks load disjoint halves of the training rows, and the halves change per epoch.
    epoch0 = [{c for r in trace[rank] if r["epoch"] == 0 for c in r["clips"]} for rank in (0, 1)]
    assert len(epoch0[0]) == len(epoch0[1]) == TRAIN_ROWS // 2 and not epoch0[0] & epoch0[1]
    epoch1 = {c for r in trace[0] if r["epoch"] == 1 for c in r["clips"]}
    assert epoch1 and epoch1 != epoch0[0], "the shards are reshuffled each epoch"


@pytest.mark.slow
def test_rank_zero_alone_writes_one_run_folder_with_every_ranks_share(stopped_run):
    run, files, trace = stopped_run["run"], stopped_run["files"], stopped_run["trace"]
    assert stopped_run["output"] == [stopped_run["run_dir"].name], "one run folder"
    assert "trainer_0_log.txt" in files and not any(f.startswith("trainer_1") for f in files)
    train = [r for r in stopped_run["metrics"] if r["type"] == "train"]
    assert [r["step"] for r in train] == list(range(1, len(train) + 1)), "one record per step: rank 1 wrote none"
    assert run["world_size"] == 2 and run["devices"] == ["cpu", "cpu"] and run["distributed"]["backend"] == "gloo"
    pids = [r["pid"] for r in run["distributed"]["ranks"]]
    assert len(set(pids)) == 2 and os.getpid() not in pids and run["pid"] == os.getpid(), "the launcher is the run's"
    assert run["effective_batch_size"] == BATCH * ACCUMULATION * 2, "batch x accumulation x ranks"
    assert run["steps_per_epoch"] == TRAIN_ROWS // 2 // BATCH and run["total_steps"] == TOTAL_STEPS
    for record, mine, theirs in zip(train, trace[0], trace[1], strict=False):
        # samples/s counts both ranks' clips; the loss is the mean of the ranks' losses; memory per rank.
        assert record["samples_per_sec"] == pytest.approx(2 * BATCH / record["step_time"], rel=0.01)
        means = [(a + b) / 2 for a, b in zip(mine["loss"], theirs["loss"], strict=True)]
        assert [record["loss_text_ce"], record["loss_mel_ce"]] == pytest.approx(means, rel=1e-5)
        assert record["loss"] == pytest.approx(sum(means), rel=1e-5) and mine["loss"] != theirs["loss"]
        assert [r["rank"] for r in record["ranks"]] == [0, 1]
        assert all(r["process_rss_mb"] > 100 for r in record["ranks"])
    assert train_steps(stopped_run["seen"]) == [r["step"] for r in train], "progress_callback got rank 0's records"


@pytest.mark.slow
def test_a_stop_ends_every_rank_after_the_same_step_with_a_checkpoint(stopped_run):
    result, trace = stopped_run["result"], stopped_run["trace"]
    assert stopped_run["run"]["status"] == "stopped"
    last = trace[0][-1]["step"]
    assert trace[1][-1]["step"] == last < TOTAL_STEPS, "both ranks stopped after the same step, before the end"
    root = stopped_run["root"]  # the paths are relative to the notebook's folder, as it gave them
    stop_checkpoint = root / stopped_run["run"]["stop_checkpoint"]
    assert stop_checkpoint.name == f"checkpoint_{last}.pth", "named by the steps done"
    assert torch.load(stop_checkpoint, map_location="cpu", weights_only=True)["step"] == last - 1
    assert (root / result.checkpoint_path).is_file() and (root / result.ready_dir / "model.pth").is_file()


@pytest.mark.slow
def test_a_killed_rank_fails_the_run_cleanly_keeping_the_last_checkpoint(stopped_run, traced):
    """Launch 2: resumed from the notebook; rank 1 is killed after the periodic checkpoint of 6 steps."""
    run_dir = stopped_run["run_dir"]
    killed: list[int] = []

    def kill_rank_one(record: dict) -> None:
        if record["type"] == "train" and record["step"] >= 7 and not killed:
            killed.append(read_run(run_dir)["distributed"]["ranks"][1]["pid"])
            os.kill(killed[0], signal.SIGKILL)

    seen: list[dict] = []
    outcome: dict = {}

    def call() -> None:
        try:
            train_gpt(
                **COMMON,
                train_csv=str(stopped_run["csv"]),
                output_path=str(stopped_run["root"] / "out"),
                resume_from=str(run_dir),
                progress_callback=lambda r: (seen.append(r), kill_rank_one(r)),
            )
        except Exception as exc:  # noqa: BLE001 - the call's error is what the test reads
            outcome["error"] = exc

    caller = threading.Thread(target=call)
    caller.start()
    # The survivor ends after the kill; a hang (the process group's 30-minute timeout) is a wait in which the ranks
    # neither step nor compute: it fails after the stall time, however slow the machine.
    wait_until(
        lambda: not caller.is_alive(),
        "the call to end after rank 1 was killed",
        progress=(folder_growth(run_dir), cpu_seconds(os.getpid(), include_self=False)),
        stall=120,
    )
    failure = outcome.get("error")
    assert isinstance(failure, RuntimeError) and "rank 1 was killed by SIGKILL" in str(failure), failure
    assert train_steps(seen)[0] == stopped_run["trace"][0][-1]["step"] + 1, "this session's records only"
    run = read_run(run_dir)
    ranks = [r["pid"] for r in run["distributed"]["ranks"]]
    assert killed[0] in ranks and not any(psutil.pid_exists(pid) for pid in ranks), "no rank outlives the call"
    assert run["status"] == "failed" and run["failed_rank"] == 1 and "rank 1 was killed by SIGKILL" in run["error"]
    assert run["last_checkpoint"] in str(failure) and "resume_from" in str(failure)
    saved = torch.load(run["last_checkpoint"], map_location="cpu", weights_only=True)
    assert saved["step"] + 1 >= 6, "the periodic checkpoint after 6 steps (or a later one) is kept"
    assert not list(run_dir.glob(".*.tmp")), "no partial file left"
    last = read_jsonl(run_dir / "metrics.jsonl")[-1]
    assert last["status"] == "failed" and "rank 1" in last["error"] and seen[-1]["status"] == "failed"


@pytest.mark.slow
def test_the_web_runner_resumes_mid_epoch_to_the_end_with_memory_per_rank(stopped_run, traced):
    """Launch 3: the web app's runner (its spawned child calls train_gpt) resumes from the checkpoint after 3 steps,
    half way through the second epoch: each rank trains the rest of that epoch's shard, then to the end."""
    from utils.training.process.runner import TrainingRunner
    from webui.run_view import memory_markdown

    run_dir = stopped_run["run_dir"]
    arguments = TrainArguments(
        **COMMON, train_csv=str(stopped_run["csv"]), resume_from=str(run_dir / "checkpoint_3.pth")
    )
    runner = TrainingRunner(stopped_run["root"] / "out")
    assert runner.start(arguments.to_dict())[0]
    wait_until(
        lambda: not runner.poll().active,
        "the resumed run to end",
        progress=(folder_growth(stopped_run["root"] / "out"), cpu_seconds(os.getpid(), include_self=False)),
        describe=lambda: runner.log_tail(40),
    )
    state = runner.poll()
    assert state.status.value == "finished", f"{state.message}\n{runner.log_tail(40)}"
    assert state.run_dir == str(run_dir) and read_run(run_dir)["status"] == "finished"
    assert (run_dir / "ready" / "model.pth").is_file()
    assert train_steps(read_jsonl(run_dir / "metrics.jsonl"))[-1] == TOTAL_STEPS
    resumed, first = read_trace(traced), stopped_run["trace"]
    assert [r["step"] for r in resumed[0]] == list(range(4, TOTAL_STEPS + 1)), "continues after 3 steps"
    assert [r["gpt_sha256"] for r in resumed[0]] == [r["gpt_sha256"] for r in resumed[1]], "restored alike"
    shards = []
    for rank in (0, 1):
        before = next(r["clips"] for r in first[rank] if r["step"] == 3)
        after = resumed[rank][0]["clips"]  # step 4: the second half of the same epoch's shard
        assert resumed[rank][0]["epoch"] == 1 and not set(before) & set(after), f"rank {rank} repeated clips"
        shards.append(set(before) | set(after))
    assert len(shards[0]) == len(shards[1]) == TRAIN_ROWS // 2 and not shards[0] & shards[1]
    per_rank = [sample for sample in state.memory_history if sample.get("ranks")]
    assert per_rank and len(per_rank[-1]["ranks"]) == 2, "the child's memory reports carry each rank's"
    assert "rank 1 (cpu)" in memory_markdown(per_rank[-1], per_rank[-1])


@pytest.mark.slow
def test_the_cli_refuses_an_unusable_dataset_from_the_ranks(tmp_path, tiny_base):
    """Launch 4: the CLI; every rank refuses the dataset, and the user gets one line, not a traceback."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "metadata.csv").write_text("audio_file|text|speaker_name\nmissing.wav|hello|a\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "utils.cli",
        "train",
        "--version",
        "tiny",
        "--devices",
        "cpu,cpu",
        "--train-csv",
        str(data / "metadata.csv"),
        "--output-path",
        str(tmp_path / "out"),
    ]
    done = run_watched(command, cwd=ROOT, text=True)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "error: The dataset cannot be used for training" in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_a_killed_launcher_makes_the_ranks_stop_with_a_checkpoint(tmp_path, tiny_base):
    """Launch 5: `kill -9` of the CLI (the launching process). Nobody follows the run any more, so the ranks stop
    after the same step and rank 0 saves, exports and records it, as a stop request would."""
    from utils.training.recording.run_record import list_runs

    csv_path = write_dataset(tmp_path / "data", n=14)
    command = [
        sys.executable,
        "-m",
        "utils.cli",
        "train",
        "--version",
        "tiny",
        "--devices",
        "cpu,cpu",
        "--train-csv",
        str(csv_path),
        "--output-path",
        str(tmp_path / "out"),
        "--num-epochs",
        "40",
        "--batch-size",
        "3",
        "--grad-acumm",
        "1",
        "--save-step",
        "1000",
        "--no-enable-mixed-precision",
        "--num-workers",
        "0",
        "--quality-eval",  # scored evaluations, cheap ones (see COMMON)
        "1",
        "--quality-max-audio-tokens",
        "10",
    ]
    launcher = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress = (folder_growth(tmp_path / "out"), cpu_seconds(launcher))

    def three_steps() -> list[Path]:
        assert launcher.poll() is None, "the launcher ended before 3 steps"
        runs = list_runs(tmp_path / "out")
        return runs if runs and len(train_steps(read_jsonl(runs[0] / "metrics.jsonl"))) >= 3 else []

    runs = wait_until(three_steps, "the run to reach 3 steps", progress=progress)
    ranks = [r["pid"] for r in read_run(runs[0])["distributed"]["ranks"]]
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    # The orphaned ranks finish their step, save and export, then end: progress is their folder and CPU time.
    alive = [psutil.Process(pid) for pid in ranks if psutil.pid_exists(pid)]
    rank_cpu = lambda: sum(p.cpu_times().user + p.cpu_times().system for p in alive if p.is_running())
    wait_until(
        lambda: not any(psutil.pid_exists(pid) for pid in ranks),
        "the ranks to end after their launcher",
        progress=(folder_growth(tmp_path / "out"), lambda: int(rank_cpu())),
        stall=120,
    )
    run = read_run(runs[0])
    assert run["status"] == "stopped" and not run.get("error"), run
    assert torch.load(run["stop_checkpoint"], map_location="cpu", weights_only=True)["step"] + 1 == run["steps_done"]
    assert (runs[0] / "ready" / "model.pth").is_file() and run["steps_done"] < 40 * 2


@pytest.mark.slow
def test_early_stopping_decided_on_rank_zero_stops_every_rank_after_the_same_step(tmp_path, tiny_base, traced):
    """With a learning rate of 1e-30 (no weight changes in float32) the eval loss repeats: patience 1 runs out at
    the second epoch's end (step 4).
    Only rank 0 evaluates; both ranks must stop together at the next step, with a checkpoint and the reason."""
    csv_path = write_dataset(tmp_path / "data", n=14)
    result = train_gpt(
        **{**COMMON, "grad_acumm": 1, "save_step": 100, "quality_eval": 0},
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        learning_rate=1e-30,  # far below float32 resolution of the weights: they never change (0 is refused)
        best_by="eval_loss",
        early_stop_patience=1,
    )
    run = read_run(result.run_dir)
    trace = read_trace(traced)
    assert result.status == run["status"] == "stopped", run.get("error")
    assert run["early_stop"]["step"] == 4 and run["message"].startswith("Stopped early at step 4")
    assert trace[0][-1]["step"] == trace[1][-1]["step"] == 5 < TOTAL_STEPS, "the next step, on both ranks"
    assert Path(run["stop_checkpoint"]).name == "checkpoint_5.pth"
