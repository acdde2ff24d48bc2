"""Each leaner training step is on for real and fails its test when off: the fused GELU, checkpointing of the
conditioning path, DVAE codes cached per clip, one decode per clip, the model built once, autocast in eval,
the loader options, TF32 only on request, fused / 8-bit AdamW where they apply (CPU, tiny model)."""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers import simulated_gpu, tiny_training_setup, write_dataset
from tests.training.model_helpers import build_model, count_forward_calls, synthetic_batch, without_dropout
from utils.device.gpu import GPUInfo
from utils.options.optimizations import (
    ADAMW_8BIT,
    FUSED_ADAMW,
    TF32,
    TrainingOptimizer,
    conditioning_modules,
    gpt_transformer,
)

AMPERE = simulated_gpu((8, 6))


def test_the_gpt_uses_the_fused_tanh_gelu_with_the_same_values(tiny_base, tmp_path):
    from transformers.activations import GELUTanh, NewGELUActivation

    model, config = build_model(tiny_base, tmp_path)
    gpt2 = gpt_transformer(model)
    assert all(isinstance(block.mlp.act, NewGELUActivation) for block in gpt2.h), "coqui's composite before"
    TrainingOptimizer(False, False, False, gpu=GPUInfo(available=False)).apply(model, config)
    assert all(isinstance(block.mlp.act, GELUTanh) for block in gpt2.h)
    x = torch.linspace(-8, 8, 10_001, dtype=torch.float64)
    assert torch.allclose(GELUTanh()(x), NewGELUActivation()(x), atol=1e-7)


@pytest.mark.parametrize("enabled", [True, False])
def test_checkpointing_recomputes_the_conditioning_path_with_equal_gradients(tiny_base, tmp_path, enabled):
    model, config = build_model(tiny_base, tmp_path)
    without_dropout(model)
    reference, _ = build_model(tiny_base, tmp_path)
    without_dropout(reference)
    reference.load_state_dict(model.state_dict())
    TrainingOptimizer(enabled, False, False, gpu=GPUInfo(available=False)).apply(model, config)
    TrainingOptimizer(False, False, False, gpu=GPUInfo(available=False)).apply(reference, config)
    blocks = conditioning_modules(model.xtts.gpt)
    assert blocks, "the conditioning encoder's attention blocks and the perceiver"
    # Count a submodule of each: the wrapped forward itself runs once, its insides twice when recomputed.
    inner = [block.qkv if hasattr(block, "qkv") else block.layers[0][0] for block in blocks]
    calls = count_forward_calls(inner)
    batch = synthetic_batch()
    model.train(), reference.train()
    loss = model.xtts.gpt(**{k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()})[1]
    loss.backward()
    assert calls == [2 if enabled else 1] * len(blocks), "forward, then recomputed in backward"
    reference.xtts.gpt(**batch)[1].backward()
    mine = dict(model.xtts.gpt.conditioning_encoder.named_parameters())
    for name, param in reference.xtts.gpt.conditioning_encoder.named_parameters():
        assert torch.allclose(mine[name].grad, param.grad, atol=1e-6), name


def test_dvae_codes_are_computed_once_per_clip_and_equal_coquis(tiny_base, tmp_path):
    from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTTrainer

    model, _ = build_model(tiny_base, tmp_path)
    model.eval()
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([40_000, 25_000])
    wav = torch.randn(2, 1, 40_000, generator=g) * 0.1
    wav[1, :, 25_000:] = 0
    batch = {
        "padded_text": torch.randint(5, 100, (2, 10)),
        "text_lengths": torch.tensor([10, 8]),
        "wav": wav,
        "wav_lengths": lengths,
        "conditioning": torch.randn(2, 1, 1, 66_150) * 0.1,
        "cond_idxs": None,
        "cond_lens": None,
        "filenames": ["a.wav", "b.wav"],
    }
    calls = count_forward_calls([model.dvae.encoder])
    first = model.format_batch_on_device({k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()})
    assert calls == [1]
    again = model.format_batch_on_device({k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()})
    assert calls == [1], "cached clips never reach the DVAE again"
    coqui = GPTTrainer.format_batch_on_device(
        model, {k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}
    )
    for i, n in enumerate(lengths.tolist()):
        valid = math.ceil(n / model.args.gpt_code_stride_len)  # the codes the GPT reads; stop tokens after
        assert torch.equal(again["audio_codes"][i, :valid], first["audio_codes"][i, :valid])
        assert torch.equal(first["audio_codes"][i, :valid], coqui["audio_codes"][i, :valid])


def test_a_clip_is_decoded_once_per_draw(tiny_base, tmp_path, monkeypatch):
    import utils.training.inputs.dataset as dataset_module

    model, config = build_model(tiny_base, tmp_path)
    csv_path = write_dataset(tmp_path / "data", n=4)
    samples = [
        {
            "text": "hello there",
            "audio_file": str(path),
            "speaker_name": "s",
            "language": "en",
            "root_path": str(csv_path.parent),
            "audio_unique_name": path.name,
        }
        for path in sorted((tmp_path / "data" / "wavs").glob("*.wav"))
    ]
    real = dataset_module.load_audio
    decodes: list[str] = []
    monkeypatch.setattr(dataset_module, "load_audio", lambda path, *a, **k: decodes.append(path) or real(path, *a, **k))
    loader = model.get_data_loader(config, is_eval=False, samples=samples)
    item = loader.dataset[0]
    assert len(decodes) == 1 and item["conditioning"].shape[-1] == config.model_args.max_conditioning_length


def test_the_model_is_built_once_without_random_initialisation(tiny_base, tmp_path, monkeypatch):
    from TTS.tts.layers.xtts.gpt import GPT

    built = []
    original = GPT.__init__
    monkeypatch.setattr(GPT, "__init__", lambda self, *a, **k: built.append(1) or original(self, *a, **k))
    model, _ = build_model(tiny_base, tmp_path)
    assert len(built) == 1, "coqui built the GPT twice"
    saved = torch.load(tiny_base.model, weights_only=True)["model"]
    for name, tensor in model.xtts.state_dict().items():
        if name in saved and name != "mel_stats":  # coqui sets mel_stats from mel_stats.pth after loading
            assert torch.equal(tensor, saved[name]), f"{name} is not the checkpoint's"


def test_a_checkpoint_missing_weights_gets_them_initialised_not_left_empty(tiny_base, tmp_path, caplog):
    saved = torch.load(tiny_base.model, weights_only=True)
    state = dict(saved["model"])
    partial = {
        k: v for k, v in state.items() if not k.startswith("hifigan_decoder.") and k != "gpt.gpt.h.0.ln_1.weight"
    }
    torch.save({**saved, "model": partial}, tmp_path / "partial.pth")
    with caplog.at_level("WARNING"):
        model, _ = build_model(tiny_base, tmp_path, checkpoint=tmp_path / "partial.pth")
    assert "lacks" in caplog.text and "random initialisation" in caplog.text
    assert all(torch.isfinite(p).all() for p in model.xtts.parameters()), "initialised, not uninitialised memory"
    assert torch.equal(model.xtts.gpt.gpt.h[0].ln_1.weight, torch.ones_like(model.xtts.gpt.gpt.h[0].ln_1.weight))
    assert torch.equal(model.xtts.gpt.gpt.h[1].ln_1.weight, state["gpt.gpt.h.1.ln_1.weight"]), "the rest loaded"


def test_evaluation_runs_under_the_training_autocast(tiny_base, tmp_path):
    setup, _ = tiny_training_setup(tiny_base, tmp_path, "eval", precision="bf16")
    trainer = setup.trainer
    dtypes: list[torch.dtype] = []
    gpt_transformer(trainer.model).h[0].mlp.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    loader = trainer.get_eval_dataloader(trainer.eval_samples, verbose=False)
    trainer.model.eval()
    trainer.eval_step(trainer.format_batch(next(iter(loader))), 0)
    setup.release()
    assert dtypes == [torch.bfloat16], "the eval forward ran in BF16 like training"


def test_loader_workers_stay_alive_across_epochs(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    config.num_loader_workers = 2
    loader = model.get_data_loader(
        config,
        is_eval=False,
        samples=[
            {
                "text": "a b",
                "audio_file": "x.wav",
                "speaker_name": "s",
                "language": "en",
                "root_path": ".",
                "audio_unique_name": "x",
            }
        ],
    )
    assert loader.num_workers == 2 and loader.persistent_workers is True
    assert loader.pin_memory is torch.cuda.is_available(), "pinned memory only feeds a GPU"


def test_tf32_only_when_asked_and_adamw_variants_only_where_they_apply(tiny_base, tmp_path):
    model, config = build_model(tiny_base, tmp_path)
    report = TrainingOptimizer(True, True, True, gpu=AMPERE, enable_tf32=False).apply(model, config)
    assert not report.is_applied(TF32) and config.allow_tf32 is False and config.cudnn_benchmark is False
    assert "enable_tf32=False" in {s["name"]: s["reason"] for s in report.skipped}[TF32]
    cpu = TrainingOptimizer(True, True, True, gpu=GPUInfo(available=False), optimizer="adamw_8bit").apply(model, config)
    reasons = {s["name"]: s["reason"] for s in cpu.skipped}
    assert cpu.is_applied(ADAMW_8BIT), "bitsandbytes runs AdamW8bit on a CPU too"
    assert "8-bit AdamW is used instead" in reasons[FUSED_ADAMW]
    assert config.optimizer == "AdamW8bit" and "fused" not in config.optimizer_params
    plain = TrainingOptimizer(True, True, True, gpu=GPUInfo(available=False)).apply(model, config)
    assert plain.is_applied(FUSED_ADAMW), "regular AdamW, fused on the CPU"
    assert config.optimizer == "AdamW" and config.optimizer_params["fused"] is True
    with pytest.raises(ValueError, match="optimizer must be one of"):
        TrainingOptimizer(optimizer="lion")
