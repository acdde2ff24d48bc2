"""A voice as coqui's speakers_xtts.pth holds a speaker: the conditioning latent and speaker embedding that coqui's
own `get_conditioning_latents` computes from reference clips, with the ready/ voice's config (what
`Xtts.synthesize(speaker_wav=...)` passes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from utils.model.ready import ready_config


def coqui_xtts(folder: Path, model: str | None = None) -> tuple[Any, Any]:
    """(coqui's Xtts loaded from a ready/ folder, its XttsConfig), in eval mode on the CPU."""
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts

    config = XttsConfig()
    config.deserialize(ready_config(folder))
    xtts = Xtts(config)
    checkpoint = model or str(folder / "model.pth")
    xtts.load_checkpoint(config, checkpoint_dir=str(folder), checkpoint_path=checkpoint, eval=True, use_deepspeed=False)
    return xtts, config


def latents_of(xtts: Any, config: Any, references: Sequence[str]) -> dict[str, torch.Tensor]:
    """The speaker entry of `references` (one clip or several, which coqui combines)."""
    try:
        with torch.inference_mode():
            latent, speaker = xtts.get_conditioning_latents(
                audio_path=list(references),
                max_ref_length=config.max_ref_len,
                gpt_cond_len=config.gpt_cond_len,
                gpt_cond_chunk_len=config.gpt_cond_chunk_len,
                sound_norm_refs=config.sound_norm_refs,
            )
    except (RuntimeError, OSError, ImportError) as exc:
        raise ValueError(
            f"coqui could not read {', '.join(references)} to compute the voice ({type(exc).__name__}: {exc}); its "
            "audio loader (torchaudio) needs FFmpeg."
        ) from exc
    # In this order: coqui's synthesize unpacks a speaker's two values by position.
    return {
        "gpt_cond_latent": latent.detach().cpu().float().contiguous(),
        "speaker_embedding": speaker.detach().cpu().float().contiguous(),
    }
