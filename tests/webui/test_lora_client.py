"""A LoRA run with 8-bit AdamW started from the page's API (as the form sends it), on a CPU: it trains with both
applied, and its run folder holds the adapter alone and a merged ready/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.webui.app_server import running_app
from tests.webui.test_client import absolute_path_csv, form, wait_for

pytestmark = pytest.mark.slow


def test_lora_and_8bit_adamw_run_from_the_page(tmp_path, tiny_base):
    with running_app(tmp_path) as server:
        client = server.client()
        csv_path = absolute_path_csv(tmp_path / "data", n=8)
        result = client.predict(None, str(csv_path), None, "", "en", 11.6, "tiny", False, api_name="/validate_dataset")
        train_csv = result[-3]
        values = form(train_csv, 1, lora_rank=4, optimizer="adamw_8bit", learning_rate=1e-3)
        assert client.predict(**values, api_name="/start_training") == "Training started."
        finished = wait_for(client, lambda s: s["status"] not in ("starting", "running"), 300, "the end of the run")
        assert finished["status"] == "finished", finished
    run_dir = Path(finished["run_dir"])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["arguments"]["lora_rank"] == 4 and run["arguments"]["optimizer"] == "adamw_8bit"
    applied = {a["name"] for a in json.loads((run_dir / "optimizations.json").read_text())["applied"]}
    assert {"LoRA", "8-bit AdamW"} <= applied
    assert run["adapter_dir"] == str(run_dir / "adapter") and (run_dir / "adapter" / "adapter_model.pth").is_file()
    ready = torch.load(run_dir / "ready" / "model.pth", weights_only=True)["model"]
    assert ready and not any("lora_" in k or "base_layer" in k for k in ready), "ready/ holds the merged weights"
