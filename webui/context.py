"""What the tabs share: the output folder, the training runner, and a registry of components by id.

Tabs register the components they create under "<tab>.<name>" ("form.train_csv" for the Fine-tune
form, which the Dataset tab fills), so one tab can wire another's component without importing it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.device.gpu import detect_gpu
from utils.model.base_models import models_root
from utils.model.ready import READY_DIR
from utils.sweep.job import SweepJob
from utils.training.process.runner import TrainingRunner
from utils.training.recording.run_record import list_runs, load_run
from webui.paths import AppRoots

GPU_QUEUE = "gpu"  # concurrency_id: training start and synthesis share the GPU, one job at a time
# CPU work (the dataset checks, Prepare, a transcription while a run trains) is in no shared queue: it runs beside
# training, and Start never waits for it.


@dataclass
class UIContext:
    output_dir: Path
    runner: TrainingRunner
    data_dirs: tuple[Path, ...] = ()  # the operator's data folders (--data-dir), readable from the web
    components: dict[str, Any] = field(default_factory=dict)
    # Held by GPU work outside the GPU queue (a transcription on a free GPU): Start waits for it.
    gpu_work: threading.Lock = field(default_factory=threading.Lock, repr=False)
    sweep: SweepJob = field(default_factory=SweepJob, repr=False)  # the Runs tab's sweep: its trials are runs too

    def training_active(self) -> bool:
        """A run of the Fine-tune tab, or a sweep's trials, is training."""
        return self.runner.is_active() or self.sweep.active

    @property
    def roots(self) -> AppRoots:
        return AppRoots(self.output_dir, tuple(self.data_dirs), models_root())

    def gpu_in_use_by_training(self) -> str:
        """Why GPU work of the page (speech, transcription) must wait, or "": a training run, in its own
        process, holds the GPU, and a second model there could end it with out-of-memory."""
        if self.training_active() and detect_gpu().available:
            return "A training run is using the GPU: stop it or wait for it to end, then try again."
        return ""

    @contextlib.contextmanager
    def gpu_work_or_cpu(self) -> Iterator[str]:
        """The device for work that can use either: "cuda" while holding gpu_work when a GPU is there and no run
        trains on it (Start waits until it is done), else "cpu" at once, beside the run."""
        if detect_gpu().available and not self.training_active():
            self.gpu_work.acquire()
            if not self.training_active():  # a run did not start meanwhile
                try:
                    yield "cuda"
                finally:
                    self.gpu_work.release()
                return
            self.gpu_work.release()
        yield "cpu"

    def register(self, tab: str, components: dict[str, Any]) -> dict[str, Any]:
        for name, component in components.items():
            key = f"{tab}.{name}"
            if key in self.components:
                raise KeyError(f"component {key} is registered twice")
            self.components[key] = component
        return components

    def __getitem__(self, key: str) -> Any:
        return self.components[key]

    def form_component(self, field_id: str) -> Any:
        """The Fine-tune form's component for a field id (see webui.form)."""
        return self.components[f"form.{field_id}"]

    def get_list(self, *keys: str) -> list[Any]:
        return [self.components[key] for key in keys]

    @property
    def datasets_dir(self) -> Path:
        return self.roots.datasets_dir

    def run_choices(self, *, ready_only: bool = False) -> list[tuple[str, str]]:
        """(label, path) of the runs under the output folder, newest first, with their true status."""
        choices = []
        for run_dir in list_runs(self.output_dir):
            if ready_only and not (run_dir / READY_DIR / "model.pth").is_file():
                continue
            status = load_run(run_dir).status or "?"
            choices.append((f"{run_dir.name} ({status})", str(run_dir)))
        return choices
