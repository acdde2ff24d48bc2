"""The GPU multi-select and what the Fine-tune tab says about several GPUs (no process is started)."""

from __future__ import annotations

from utils.options.arguments import TrainArguments
from webui.form import arguments_from_form, create_component, form_values, gpu_choices
from webui.plan_view import batch_markdown
from webui.run_view import memory_frame, memory_markdown

FORM = form_values(TrainArguments(version="tiny", batch_size=4, grad_acumm=2, train_csv="data/metadata.csv"))


def test_the_gpu_multi_select_is_shown_only_with_two_gpus_or_more():
    assert gpu_choices(3) == [("GPU 0", "0"), ("GPU 1", "1"), ("GPU 2", "2")]
    assert create_component("devices", gpu_count=1).visible is False
    shown = create_component("devices", gpu_count=2)
    assert shown.visible is True and [value for _, value in shown.choices] == ["0", "1"] and shown.value == []


def test_selected_gpus_become_the_devices_option_and_back(tmp_path):
    assert FORM["devices"] == [], "no GPU selected: one process, as before"
    assert arguments_from_form({**FORM, "devices": []}, str(tmp_path)).devices == ""
    assert arguments_from_form({**FORM, "devices": ["10", "2"]}, str(tmp_path)).devices == "2,10"
    assert form_values(TrainArguments(devices="cuda:0, cuda:3"))["devices"] == ["0", "3"]
    assert form_values(TrainArguments(devices="cpu,cpu"))["devices"] == [], "CPU processes are not offered"


def test_the_effective_batch_counts_the_gpus_and_the_learning_rate_advice_scales_by_the_square_root():
    one = batch_markdown(10, 4, 2, 3, [])
    assert "4 × 2 = 8 clips" in one and "GPUs" not in one and "Learning rate" not in one
    two = batch_markdown(10, 4, 2, 3, ["0", "1"], 5e-6)
    assert "4 × 2 × 2 GPUs = 16 clips per optimizer step" in two
    assert "2 steps and 1 optimizer step per epoch, 6 steps in 3 epochs" in two, "each GPU takes 5 of the 10 clips"
    assert "√2 = 1.41 (5e-06 → 7.1e-06)" in two
    assert "× 4 GPUs = 32" in batch_markdown(None, 4, 2, 3, "0,1,2,3")


def test_memory_is_shown_per_rank_in_a_multi_gpu_run():
    ranks = [
        {
            "rank": r,
            "device": f"cuda:{r}",
            "gpu_allocated_mb": 1024.0 * (r + 1),
            "gpu_reserved_mb": 4096.0,
            "gpu_peak_allocated_mb": 3072.0,
            "gpu_used_mb": 5120.0,
            "gpu_total_mb": 81920.0,
            "process_rss_mb": 2048.0,
        }
        for r in (0, 1)
    ]
    sample = {"time": 1.0, "process_rss_mb": 300.0, "ram_used_mb": 9000.0, "ranks": ranks}
    text = memory_markdown(sample, {"ram_used_mb": 9000.0, "ram_total_mb": 64000.0, "process_rss_mb": 500.0})
    assert "**rank 0 (cuda:0)** GPU allocated 1.00 GB" in text and "**rank 1 (cuda:1)** GPU allocated 2.00 GB" in text
    assert "whole GPU used 5.00 GB of 80.00 GB" in text
    series = set(memory_frame([sample])["series"])
    assert {"rank 0 (cuda:0) GPU allocated", "rank 1 (cuda:1) GPU reserved", "rank 1 (cuda:1) RAM"} <= series
