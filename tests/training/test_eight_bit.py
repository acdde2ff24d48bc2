"""bitsandbytes' 8-bit AdamW through train_gpt on a CPU: coqui's real Trainer, state held in uint8, resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tests.helpers import write_dataset
from utils.files import read_jsonl
from utils.gpt_train import train_gpt

pytestmark = pytest.mark.slow

FAST = dict(version="tiny", language="en", enable_mixed_precision=False, num_workers=0, print_step=50, quality_eval=0)


def eight_bit_states(checkpoint: Path) -> list[dict]:
    """Each parameter's 8-bit state as the checkpoint holds it (bitsandbytes nests it in its state_dict)."""
    state = torch.load(checkpoint, weights_only=True)["optimizer"][0]["state"]
    nested = [{**s.get("__bnb_optimizer_quant_state__", {}), "step": s.get("step")} for s in state.values()]
    return [s for s in nested if "state1" in s]


def test_adamw_8bit_trains_on_cpu_with_uint8_state_and_resumes(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)  # 7 train rows -> 4 steps per epoch at batch 2
    seen: list[dict] = []
    common = dict(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=2,
        batch_size=2,
        grad_acumm=1,
        learning_rate=1e-4,
        save_step=2,
        optimizer="adamw_8bit",
        **FAST,
    )
    stopped = train_gpt(
        **common, progress_callback=seen.append, stop_event=lambda: sum(r["type"] == "train" for r in seen) >= 4
    )
    assert stopped.status == "stopped"
    run_dir = Path(stopped.run_dir)
    applied = {a["name"] for a in json.loads((run_dir / "optimizations.json").read_text())["applied"]}
    assert "8-bit AdamW" in applied, "8-bit AdamW fell back on a CPU"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["optimizer"] == "AdamW8bit"

    states = eight_bit_states(run_dir / "checkpoint_4.pth")
    assert states, "no parameter has bitsandbytes' blockwise 8-bit state"
    # bitsandbytes keeps tensors under 4,096 values (biases, norms) in 32 bits, everything larger in 8.
    large = [s for s in states if s["state1"].numel() >= 4096]
    assert large and all(s["state1"].dtype == torch.uint8 and s["state2"].dtype == torch.uint8 for s in large)
    assert all(s["state1"].dtype == torch.float32 for s in states if s["state1"].numel() < 4096)
    assert {int(s["step"]) for s in states} == {4}

    resumed = train_gpt(**{**common, "resume_from": stopped.run_dir})
    assert resumed.status == "finished"
    records = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "train"]
    total = json.loads((run_dir / "run.json").read_text())["total_steps"]
    assert total > 4 and [r["step"] for r in records] == list(range(1, total + 1)), "the resume continues"
    assert all(math.isfinite(r["loss"]) for r in records)
    late = eight_bit_states(run_dir / f"checkpoint_{total}.pth")
    assert {int(s["step"]) for s in late} == {total}, "the 8-bit state was restored on resume, not restarted"
    assert all(s["state1"].dtype == torch.uint8 for s in late if s["state1"].numel() >= 4096)
    assert (run_dir / "ready" / "model.pth").is_file()
