"""The scored sentences are generated as one batch: with greedy decoding a batch speaks exactly what coqui's
one-by-one inference speaks, each clip within its own token cap (tiny model, real HiFi-GAN decoder)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SENTENCES, write_clip
from tests.training.model_helpers import build_model
from utils.model.inference import conditioning_latents, generate_latents, generate_wav, generate_wavs
from utils.training.evaluation.quality_eval import speaking

pytestmark = pytest.mark.slow  # a tiny model built and decoded: ~1 min on this CPU


@pytest.fixture(scope="module")
def spoken(tiny_base, tmp_path_factory):
    folder = tmp_path_factory.mktemp("batched")
    model, _ = build_model(tiny_base, folder)
    reference = write_clip(folder / "reference.wav", 3.0, seed=4)
    texts = [SENTENCES[0], SENTENCES[4][:12], SENTENCES[2]]  # different lengths: the prefixes are padded
    caps = [14, 9, 20]
    with speaking(model.xtts) as xtts:
        latent, speaker = conditioning_latents(xtts, reference)
        one_by_one = [
            generate_wav(xtts, text, "en", latent, speaker, seed=5, max_audio_tokens=cap, top_k=1)
            for text, cap in zip(texts, caps, strict=True)
        ]
        batch = generate_wavs(xtts, texts, "en", latent, speaker, seed=5, max_audio_tokens=caps, top_k=1)
        sampled = generate_latents(xtts, texts, "en", latent, max_audio_tokens=caps, seed=5)
        again = generate_latents(xtts, texts, "en", latent, max_audio_tokens=caps, seed=5)
    return one_by_one, batch, sampled, again, caps


def test_a_greedy_batch_speaks_what_one_by_one_inference_speaks(spoken):
    one_by_one, batch, _, _, _ = spoken
    assert len(batch) == 3
    for alone, together in zip(one_by_one, batch, strict=True):
        assert alone.size > 0 and alone.shape == together.shape
        np.testing.assert_allclose(together, alone, atol=1e-4)


def test_each_clip_keeps_its_own_cap_and_sampling_is_repeatable_with_a_seed(spoken):
    _, batch, sampled, again, caps = spoken
    # The HiFi-GAN decoder makes 1024 samples (at 24 kHz: 22050 Hz codes upsampled) per audio code at most.
    for wav, cap in zip(batch, caps, strict=True):
        assert wav.size <= (cap + 1) * 1024 * 24000 // 22050 + 1024
    assert [s.shape[1] for s in sampled] != [] and all(s.shape[1] <= cap + 1 for s, cap in zip(sampled, caps))
    for first, second in zip(sampled, again, strict=True):
        np.testing.assert_array_equal(first.numpy(), second.numpy())
