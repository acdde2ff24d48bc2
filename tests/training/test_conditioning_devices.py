"""The reference clip's conditioning on the devices a training run uses: the GPT's latent where the GPT is, the
speaker embedding where the HiFi-GAN decoder (and its speaker encoder) is. On a GPU a run keeps the decoder on the
CPU; coqui's own conditioning put the clip on the GPT's device for the speaker encoder too, so every scored
evaluation on CUDA failed. A CPU has one device, so the GPT is moved to the meta device here: its latent is
computed there (shapes only) while the speaker encoder runs on the CPU, along the real code path."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import write_clip
from tests.training.model_helpers import build_model
from utils.model.inference import conditioning_latents

pytestmark = pytest.mark.slow  # the tiny model is built (its HiFi-GAN decoder at full size)


@pytest.fixture(scope="module")
def model_and_clip(tiny_base, tmp_path_factory):
    folder = tmp_path_factory.mktemp("conditioning")
    model, _ = build_model(tiny_base, folder)
    model.eval()
    return model, write_clip(folder / "reference.wav", 3.0, seed=4)


def test_same_values_as_coqui_when_everything_is_on_one_device(model_and_clip):
    model, clip = model_and_clip
    latent, speaker = conditioning_latents(model.xtts, clip)
    theirs_latent, theirs_speaker = model.xtts.get_conditioning_latents(
        audio_path=[str(clip)], max_ref_length=30, gpt_cond_len=30, gpt_cond_chunk_len=4
    )
    torch.testing.assert_close(latent, theirs_latent)
    torch.testing.assert_close(speaker, theirs_speaker)


def test_latent_on_the_gpt_device_and_speaker_on_the_decoder_device(model_and_clip):
    model, clip = model_and_clip
    xtts = model.xtts
    xtts.gpt.to("meta")  # the GPT elsewhere than the decoder, as on a GPU during training
    try:
        latent, speaker = conditioning_latents(xtts, clip)
    finally:
        xtts.gpt.to_empty(device="cpu")  # the module's weights are gone; the fixture is not reused after this
    assert latent.device.type == "meta" and latent.shape[0] == 1
    assert speaker.device.type == "cpu" and speaker.shape == (1, 512, 1)
    assert torch.isfinite(speaker).all()
