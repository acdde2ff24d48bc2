"""Checkpoint writes off the training loop: a CPU copy written by one background thread, follow-ups and errors
back in the training thread (utils.training.checkpointing.async_save, CheckpointWriter)."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import STALL_S, wait_until
from utils.training.checkpointing.async_save import BackgroundWriter
from utils.training.checkpointing.checkpoints import CheckpointWriter, DiskFull
from utils.training.recording.checkpoint_files import checkpoints


def small_trainer() -> SimpleNamespace:
    """What CheckpointWriter reads from coqui's Trainer, around a real module and a real AdamW with state."""
    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 64)).sum().backward()
    optimizer.step()
    return SimpleNamespace(
        _get_model=lambda: model,
        model=model,
        optimizer=optimizer,
        scheduler=None,
        scaler=None,
        use_amp_scaler=False,
        random_state=lambda: None,  # the generators' state: FineTuneTrainer's (tested with exact resume)
        config=SimpleNamespace(to_dict=lambda: {"epochs": 1}),
        epochs_done=0,
    )


def test_the_saved_checkpoint_holds_the_weights_of_its_step_written_off_the_training_thread(tmp_path, monkeypatch):
    trainer = small_trainer()
    writers: list[str] = []
    real_save = torch.save
    release = threading.Event()

    def slow_disk(obj, handle, *args, **kwargs):
        writers.append(threading.current_thread().name)
        release.wait(STALL_S)  # the disk is slow (until released): the training thread must not be waiting here
        return real_save(obj, handle, *args, **kwargs)

    monkeypatch.setattr(torch, "save", slow_disk)
    saved: list[tuple[str, int]] = []
    writer = CheckpointWriter(tmp_path, keep=1, on_saved=lambda kind, path, step: saved.append((kind, step)))
    at_save = trainer.model.weight.detach().clone()
    path = writer.save(trainer, 5)
    assert path == tmp_path / "checkpoint_5.pth" and not path.exists(), "save returned while the write runs"
    with torch.no_grad():
        trainer.model.weight.add_(1.0)  # the next step changes the weights in place
    writer.poll()
    assert saved == [], "nothing recorded before the file is on disk"
    release.set()
    writer.flush()
    assert writers == ["checkpoint-writer"]
    assert saved == [("last", 5)]
    state = torch.load(path, weights_only=True)
    assert torch.equal(state["model"]["weight"], at_save), "the copy taken at the save, not later weights"
    assert state["optimizer"][0]["state"][0]["exp_avg"].shape == (64, 64)


def test_older_checkpoints_go_only_once_the_newer_one_is_written(tmp_path):
    trainer = small_trainer()
    writer = CheckpointWriter(tmp_path, keep=1)
    writer.save(trainer, 2)
    writer.save(trainer, 4)  # waits for checkpoint_2 (one save in flight), then writes in the background
    writer.flush()
    assert [n for n, _ in checkpoints(tmp_path)] == [4]


def test_a_full_disk_in_the_background_is_raised_in_the_training_thread_and_keeps_the_last_good_file(
    tmp_path, monkeypatch
):
    trainer = small_trainer()
    writer = CheckpointWriter(tmp_path, keep=2)
    writer.save(trainer, 2)
    writer.flush()
    real_save = torch.save

    def full(obj, handle, *args, **kwargs):
        handle.write(b"\0" * 1024)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    writer.save(trainer, 4)
    with pytest.raises(DiskFull, match="checkpoint_2.pth"):
        writer.flush()
    monkeypatch.setattr(torch, "save", real_save)
    assert [n for n, _ in checkpoints(tmp_path)] == [2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_2.pth"], "no temporary file left"


def test_one_write_in_flight_at_most():
    writer = BackgroundWriter()
    gate = threading.Event()
    running = []
    done: list[Path] = []

    def write(name: str) -> Path:
        running.append(name)
        assert len(running) - len(done) == 1, "two writes at once"
        gate.wait(STALL_S)
        return Path(name)

    writer.submit(lambda: write("a"), done.append)
    second = threading.Thread(target=lambda: writer.submit(lambda: write("b"), done.append))
    second.start()
    second.join(0.3)
    assert second.is_alive() and running == ["a"], "the second save waits for the first"
    gate.set()
    wait_until(lambda: not second.is_alive(), "the second write")
    writer.wait()
    assert done == [Path("a"), Path("b")]
