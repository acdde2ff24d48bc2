"""LoRA fine-tuning (PEFT) on the tiny XTTS: the merge equals the adapted model, only adapters train, and a run
trains, resumes and exports `adapter/` and a merged `ready/` that coqui loads, from the notebook and the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import run_watched, write_dataset
from tests.training.model_helpers import build_model, synthetic_batch, without_dropout
from utils.data.check_cache import CACHE_FOLDER
from utils.files import read_jsonl
from utils.gpt_train import train_gpt
from utils.options.arguments import TrainArguments
from utils.quality.asr import bundled_whisper_dir
from utils.training.loop.lora import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    LoraSettings,
    apply_lora,
    is_lora_state,
    merge_lora_state,
)

FAST = dict(version="tiny", language="en", enable_mixed_precision=False, num_workers=0, print_step=50, quality_eval=0)
ROOT = Path(__file__).resolve().parents[2]


def mel_logits(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    with torch.no_grad():
        return model.xtts.gpt(**{k: v.clone() if torch.is_tensor(v) else v for k, v in batch.items()})[2]


def gpt_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.xtts.gpt.state_dict().items()}


def test_merged_weights_give_the_adapted_models_logits(tiny_base, tmp_path):
    adapted, _ = build_model(tiny_base, tmp_path)
    info = apply_lora(adapted, LoraSettings(4, 8.0), new_language=False)
    assert info["trainable_parameters"] > 0 and info["frozen_parameters"] > 50 * info["trainable_parameters"]
    trainable = {n for n, p in adapted.xtts.gpt.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable), "only adapters train"
    # PEFT starts B at zero (the adapter adds nothing); give it values so the merge has something to add.
    generator = torch.Generator().manual_seed(0)
    for name, parameter in adapted.xtts.gpt.named_parameters():
        if ".lora_B." in name:
            parameter.data = torch.randn(parameter.shape, generator=generator) * 0.05
    without_dropout(adapted)
    adapted.eval()
    batch = synthetic_batch()
    expected = mel_logits(adapted, batch)

    plain, _ = build_model(tiny_base, tmp_path)
    without_dropout(plain)
    plain.eval()
    before = mel_logits(plain, batch)
    assert (before - expected).abs().max() > 1e-3, "the adapter changed nothing: the comparison would prove nothing"
    merged = merge_lora_state(adapted.state_dict())
    assert not is_lora_state(merged) and not any("lora_" in k or "base_layer" in k for k in merged)
    result = plain.load_state_dict(merged, strict=True)
    assert not result.unexpected_keys
    torch.testing.assert_close(mel_logits(plain, batch), expected, rtol=1e-4, atol=1e-4)


def test_half_precision_base_layers_run_with_and_without_autocast(tiny_base, tmp_path):
    """On a GPU with mixed precision the frozen base layers are BF16/FP16; training runs under autocast, the scored
    evaluations speak without it. Both must run, and give about the FP32 model's logits."""
    plain, _ = build_model(tiny_base, tmp_path)
    without_dropout(plain)
    plain.eval()
    batch = synthetic_batch()
    reference = mel_logits(plain, batch)
    apply_lora(plain, LoraSettings(4, 8.0), new_language=False, dtype=torch.bfloat16)
    base = plain.xtts.gpt.gpt.h[0].attn.c_attn.base_layer
    assert base.weight.dtype == torch.bfloat16 and not base.weight.requires_grad
    outside = mel_logits(plain, batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = mel_logits(plain, batch)
    assert outside.dtype == torch.float32 and torch.isfinite(outside).all() and torch.isfinite(inside).all()
    assert (outside - reference).abs().max() < 0.05 * reference.abs().max()
    assert (inside.float() - reference).abs().max() < 0.05 * reference.abs().max()


def test_new_language_keeps_embeddings_and_heads_trainable(tiny_base, tmp_path):
    model, _ = build_model(tiny_base, tmp_path)
    apply_lora(model, LoraSettings(2, 2.0, ("c_attn",)), new_language=True)
    trainable = {n.split(".")[0] for n, p in model.xtts.gpt.named_parameters() if p.requires_grad and "lora_" not in n}
    assert trainable == {"text_embedding", "text_head", "mel_head"}
    adapted = {n for n, _ in model.xtts.gpt.named_modules() if n.endswith(".lora_A")}
    assert adapted and all(n.endswith("attn.c_attn.lora_A") for n in adapted), "only the named targets"


@pytest.mark.parametrize(
    "change, message",
    [(dict(lora_rank=8, lora_targets="q_proj"), "lora_targets: q_proj not known"), (dict(lora_rank=-1), "lora_rank")],
)
def test_bad_lora_options_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        TrainArguments(train_csv="x.csv", **change)


def _changed(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> set[str]:
    return {k for k, v in after.items() if k in before and not torch.equal(v.float(), before[k].float())}


@pytest.mark.slow
def test_lora_run_trains_only_adapters_resumes_and_exports_a_merged_ready(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=8)
    seen: list[dict] = []
    common = dict(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=2,
        batch_size=2,
        grad_acumm=1,
        learning_rate=1e-3,
        save_step=2,
        lora_rank=4,
        # Scored evaluations, best checkpoint by them and early stopping on, as a LoRA user may run them.
        quality_eval=1,
        quality_max_audio_tokens=10,
        whisper_model=str(bundled_whisper_dir()),
        best_by="cer",
        early_stop_patience=5,
        **{k: v for k, v in FAST.items() if k != "quality_eval"},
    )
    stopped = train_gpt(
        **common, progress_callback=seen.append, stop_event=lambda: sum(r["type"] == "train" for r in seen) >= 3
    )
    assert stopped.status == "stopped"
    run_dir = Path(stopped.run_dir)
    resumed = train_gpt(**{**common, "resume_from": stopped.run_dir})
    assert resumed.status == "finished"
    records = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "train"]
    run = json.loads((run_dir / "run.json").read_text())
    assert [r["step"] for r in records] == list(range(1, run["total_steps"] + 1)), "the resume continued"
    scored = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["type"] == "quality"]
    assert scored and all(r["cer"] is not None for r in scored), "scored evaluations ran in LoRA mode"
    assert run["best"]["rule"] == "cer" and (run_dir / "best_model.pth").is_file()
    applied = {a["name"]: a["detail"] for a in json.loads((run_dir / "optimizations.json").read_text())["applied"]}
    assert "rank 4" in applied["LoRA"]

    # Only the adapters moved: every base weight of the last checkpoint is the base model's.
    base = torch.load(tiny_base.model, weights_only=True)["model"]  # keys "gpt.gpt.h.0.attn.c_attn.weight"
    last = torch.load(run_dir / f"checkpoint_{run['total_steps']}.pth", weights_only=True)["model"]
    gpt = {k.removeprefix("xtts."): v for k, v in last.items() if k.startswith("xtts.gpt.")}
    as_base = {k.replace(".base_layer.", "."): v for k, v in gpt.items() if "lora_" not in k}
    assert _changed(base, as_base) == set()
    assert sum(1 for k in as_base if k in base) > 20, "the comparison covered the GPT's weights"
    assert any(".lora_B." in k and v.abs().sum() > 0 for k, v in gpt.items()), "the adapters did not train"

    adapter = run_dir / "adapter"
    config = json.loads((adapter / ADAPTER_CONFIG).read_text())
    assert config["rank"] == 4 and config["alpha"] == 8.0
    weights = torch.load(adapter / ADAPTER_WEIGHTS, weights_only=True)["model"]
    assert weights and all("lora_" in k or k.endswith("lora_scaling") for k in weights)
    assert (adapter / ADAPTER_WEIGHTS).stat().st_size * 20 < (run_dir / "ready" / "model.pth").stat().st_size

    # ready/ holds plain merged weights that coqui's Xtts loads as it is.
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts

    ready = run_dir / "ready"
    slim = torch.load(ready / "model.pth", weights_only=True)["model"]
    assert not any("lora_" in k or "base_layer" in k for k in slim)
    xtts_config = XttsConfig()
    xtts_config.load_json(str(ready / "config.json"))
    model = Xtts(xtts_config)
    model.load_checkpoint(xtts_config, checkpoint_dir=str(ready), eval=True, strict=True)
    tuned = model.gpt.state_dict()
    moved = [k for k, v in tuned.items() if f"gpt.{k}" in base and not torch.equal(v, base[f"gpt.{k}"])]
    assert any(".c_attn.weight" in k for k in moved), "the merged adapters changed the attention weights"


@pytest.mark.slow
def test_lora_run_from_the_cli(tmp_path, tiny_base):
    csv_path = write_dataset(tmp_path / "data", n=6)
    command = [sys.executable, "-m", "utils.cli", "train", "--version", "tiny", "--train-csv", str(csv_path)]
    command += ["--output-path", str(tmp_path / "out"), "--num-epochs", "1", "--batch-size", "2", "--lora-rank", "2"]
    command += ["--no-enable-mixed-precision", "--quality-eval", "0", "--num-workers", "0"]
    done = run_watched(command, cwd=ROOT, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (p for p in (tmp_path / "out").iterdir() if p.name != CACHE_FOLDER)  # beside the dataset's check
    assert json.loads((run_dir / "run.json").read_text())["arguments"]["lora_rank"] == 2
    assert (run_dir / "adapter" / ADAPTER_WEIGHTS).is_file() and (run_dir / "ready" / "model.pth").is_file()


@pytest.mark.slow
def test_lora_trains_on_two_processes(tmp_path, tiny_base):
    """Several devices in LoRA mode: two CPU processes (gloo, torchrun as train_gpt starts them) train the
    adapters (DDP: frozen parameters take no part in the gradient exchange)."""
    csv_path = write_dataset(tmp_path / "data", n=10)
    result = train_gpt(
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out"),
        num_epochs=1,
        batch_size=2,
        grad_acumm=1,
        learning_rate=1e-3,
        lora_rank=2,
        devices="cpu,cpu",
        **FAST,
    )
    assert result.status == "finished"
    run_dir = Path(result.run_dir)
    assert (run_dir / "adapter" / ADAPTER_WEIGHTS).is_file()
    adapter = torch.load(run_dir / "adapter" / ADAPTER_WEIGHTS, weights_only=True)["model"]
    assert any(".lora_B." in k and v.abs().sum() > 0 for k, v in adapter.items()), "the adapters trained"


def test_a_lora_checkpoint_into_a_full_model_says_how_to_resume(tiny_base, tmp_path):
    adapted, _ = build_model(tiny_base, tmp_path)
    apply_lora(adapted, LoraSettings(2, 4.0), new_language=False)
    plain, _ = build_model(tiny_base, tmp_path)
    with pytest.raises(RuntimeError, match="LoRA run's: resume it with its own lora_rank"):
        plain.load_state_dict(adapted.state_dict())
    with pytest.raises(RuntimeError, match="full fine-tune's: resume it with lora_rank=0"):
        adapted.load_state_dict(plain.state_dict())
