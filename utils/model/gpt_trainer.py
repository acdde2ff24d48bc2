"""coqui's `GPTTrainer` (the model side of a run), adapted: built once without random initialisation, checkpoints
without the frozen DVAE and HiFi-GAN, DVAE codes cached per clip, and bitsandbytes' 8-bit AdamW when asked for.

The model and its step only: the memory planner traces this class; a run's data loading is added by
`utils.training.loop.gpt_model.FineTuneGPTTrainer`."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
import torchaudio
from TTS.tts.layers.xtts.trainer.gpt_trainer import GPTTrainer
from TTS.tts.models.xtts import Xtts

from utils.model.lora import merge_lora_state

log = logging.getLogger(__name__)

# Trained: the GPT only (coqui's GPTTrainer optimizes xtts.gpt); these come from the base model files.
FROZEN_PREFIXES = ("dvae.", "xtts.hifigan_decoder.")
_construction_lock = threading.Lock()
_XTTS_INIT_MODELS = Xtts.init_models  # coqui's own, kept before any construction swaps it


@contextlib.contextmanager
def _built_once() -> Iterator[None]:
    """coqui builds the XTTS networks twice (Xtts() and again once the tokenizer is set) and initialises both
    randomly, only to load the weights over them. Here the first build is skipped and the second allocates
    without random initialisation (transformers' no_init_weights); load_checkpoint fills every weight."""
    from transformers.initialization import no_init_weights

    def init_models(xtts: Any) -> None:
        if not xtts.__dict__.get("_first_build_skipped"):  # the call from Xtts.__init__; GPTTrainer calls again
            xtts.__dict__["_first_build_skipped"] = True
            return
        with no_init_weights():
            _XTTS_INIT_MODELS(xtts)

    with _construction_lock:
        Xtts.init_models = init_models
        try:
            yield
        finally:
            Xtts.init_models = _XTTS_INIT_MODELS


class XttsGPTTrainer(GPTTrainer):
    """coqui's GPTTrainer whose checkpoints leave out the frozen DVAE and HiFi-GAN decoder; `clip_failures` is
    filled by the run's data loading ("path: reason", in the order they failed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with _built_once():
            super().__init__(*args, **kwargs)
        self.clip_failures: list[str] = []
        # DVAE codes per clip (CPU, int16): a clip's codes are the same every epoch, so the frozen DVAE
        # encodes each clip once.
        self.code_cache: dict[str, torch.Tensor] = {}
        self.group_by_length = True  # the run's length_grouping (not a coqui config field)

    def load_checkpoint(
        self, config: Any, checkpoint_path: str, *, eval: bool = False, strict: bool = True, **kwargs: Any
    ) -> None:
        """coqui's loading of the XTTS weights, reporting what the file lacked: the model was built without
        random initialisation, so any weights the file does not hold are initialised here, or refused."""
        # A LoRA run's checkpoint (custom_model) starts a run as the plain weights it amounts to.
        state = merge_lora_state(self.xtts.get_compatible_checkpoint_state_dict(checkpoint_path))
        parameters = {name for name, _ in self.xtts.named_parameters() if not name.startswith("gpt.gpt_inference")}
        missing = sorted(parameters & set(self.xtts.load_state_dict(state, strict=False).missing_keys))
        if missing:
            # An incomplete checkpoint: build the networks again with coqui's random initialisation, so what
            # the file lacks is initialised rather than left as uninitialised memory.
            log.warning(
                "%s lacks %d weight tensors (e.g. %s): they start from a random initialisation.",
                checkpoint_path,
                len(missing),
                missing[0],
            )
            _XTTS_INIT_MODELS(self.xtts)
            self.xtts.load_state_dict(state, strict=False)
        if eval:
            self.xtts.gpt.init_gpt_for_inference(kv_cache=self.args.kv_cache, use_deepspeed=False)
            self.eval()

    @torch.no_grad()
    def format_batch_on_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        """coqui's: conditioning mels and DVAE codes; the codes of a clip already encoded come from the cache."""
        conditioning = batch.pop("conditioning")
        b, n, c, t = conditioning.size()
        mels = self.torch_mel_spectrogram_style_encoder(conditioning.view(b * n, c, t))
        batch["cond_mels"] = mels.view(b, n, self.torch_mel_spectrogram_style_encoder.n_mel_channels, mels.size(2))
        batch["text_inputs"] = batch.pop("padded_text")
        batch["audio_codes"] = self.audio_codes(batch.pop("wav"), batch["wav_lengths"], batch.get("filenames"))
        return batch

    def audio_codes(self, wav: torch.Tensor, lengths: torch.Tensor, files: list[str] | None) -> torch.Tensor:
        """DVAE codes of a padded batch (b, 1, samples): the clips not yet encoded go through the DVAE together
        (as coqui does), each clip's codes up to its own length are kept, and the batch is assembled from them."""
        stride = self.args.gpt_code_stride_len
        valid = [int(-(-int(n) // stride)) for n in lengths]
        files = files or [None] * len(valid)
        todo = [i for i, f in enumerate(files) if f is None or f not in self.code_cache]
        if len(todo) == len(files):  # nothing cached yet: one pass, as coqui did
            codes = self._dvae_codes(wav)
            self.code_cache.update({f: codes[i, : valid[i]].to("cpu", torch.int16) for i, f in enumerate(files) if f})
            return codes
        fresh = {}
        if todo:
            codes = self._dvae_codes(wav[todo])
            fresh = {i: codes[k, : valid[i]] for k, i in enumerate(todo)}
            self.code_cache.update({files[i]: fresh[i].to("cpu", torch.int16) for i in todo if files[i] is not None})
        rows = [fresh[i] if i in fresh else self.code_cache[f].to(wav.device, torch.long) for i, f in enumerate(files)]
        # Padding past a clip's length is never read: the GPT puts stop tokens there (set_mel_padding).
        return torch.stack([F.pad(row, (0, max(valid) - row.shape[0])) for row in rows])

    def _dvae_codes(self, wav: torch.Tensor) -> torch.Tensor:
        if self.config.audio.sample_rate != self.config.audio.dvae_sample_rate:
            wav = torchaudio.functional.resample(
                wav,
                orig_freq=self.config.audio.sample_rate,
                new_freq=self.config.audio.dvae_sample_rate,
                lowpass_filter_width=64,
                rolloff=0.9475937167399596,
                resampling_method="sinc_interp_kaiser",
                beta=14.769656459379492,
            )
        return self.dvae.get_codebook_indices(self.torch_mel_spectrogram_dvae(wav))

    def get_optimizer(self) -> torch.optim.Optimizer:
        """coqui's AdamW parameter groups without the frozen parameters (a LoRA run trains a few); as
        bitsandbytes' 8-bit AdamW when the config asks for it."""
        name = self.config.optimizer
        if name == "AdamW8bit":
            self.config.optimizer = "AdamW"
        try:
            optimizer = super().get_optimizer()
        finally:
            self.config.optimizer = name
        for group in optimizer.param_groups:
            group["params"] = [p for p in group["params"] if p.requires_grad]
        if name != "AdamW8bit":
            return optimizer
        import bitsandbytes as bnb

        params = self.config.optimizer_params
        return bnb.optim.AdamW8bit(
            [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in optimizer.param_groups if g["params"]],
            lr=self.config.lr,
            betas=tuple(params["betas"]),
            eps=params["eps"],
        )

    def state_dict(self, *args, **kwargs):  # type: ignore[override]
        state = super().state_dict(*args, **kwargs)
        for key in [k for k in state if k.startswith(FROZEN_PREFIXES)]:
            del state[key]
        return state

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # type: ignore[override]
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        if strict:
            missing = [k for k in result.missing_keys if not k.startswith(FROZEN_PREFIXES)]
            if missing or result.unexpected_keys:
                hint = ""
                if any(".lora_" in k for k in result.unexpected_keys):
                    hint = " It is a LoRA run's: resume it with its own lora_rank, lora_alpha and lora_targets."
                elif any(".lora_" in k for k in missing):
                    hint = " It is a full fine-tune's: resume it with lora_rank=0."
                raise RuntimeError(
                    f"Checkpoint does not match the model: missing {missing[:5]}, "
                    f"unexpected {result.unexpected_keys[:5]}.{hint}"
                )
        return result
