"""What the tabs share: the output folder, the training runner, and the Fine-tune tab's CSV fields
(which the Dataset tab fills)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.runs import list_runs
from webui.runner import TrainingRunner

GPU_QUEUE = "gpu"  # concurrency_id: synthesis runs one at a time


@dataclass
class UIContext:
    output_dir: Path
    runner: TrainingRunner
    train_csv: Any = None  # gr.Textbox, created unrendered and placed in the Fine-tune tab
    eval_csv: Any = None
    language: Any = None
    version: Any = None  # the base model and the Amharic G2P switch also decide how text is checked
    use_g2p: Any = None
    usable_train_rows: Any = None  # gr.State: usable training rows of the last validation

    @property
    def datasets_dir(self) -> Path:
        return self.output_dir / "datasets"

    def run_choices(self, *, ready_only: bool = False) -> list[tuple[str, str]]:
        """(label, path) of the runs under the output folder, newest first."""
        from utils.runs import read_run

        choices = []
        for run_dir in list_runs(self.output_dir):
            if ready_only and not (run_dir / "ready" / "model.pth").is_file():
                continue
            status = read_run(run_dir).get("status", "?")
            choices.append((f"{run_dir.name} ({status})", str(run_dir)))
        return choices
