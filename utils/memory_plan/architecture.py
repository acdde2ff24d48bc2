"""Which XTTS architecture a plan traces: from the files on disk when they are there, else the known one.

A plan needs shapes only, never weights. For a published version whose files are not downloaded
yet, the published architecture below is used, so a user can plan before downloading 2 GB.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.constants import XTTS_LANGUAGES
from utils.model.base_models import KNOWN_VERSIONS, TINY, check_version_name, ensure_base_model, models_root
from utils.text.languages import canonical_language

# model_args of coqui/XTTS-v2's config.json. coqui's XttsArgs defaults agree on the transformer
# (30 layers, 1024 channels, 16 heads, 605 audio / 402 text / 70 prompt positions); the published
# config adds the 1026-token audio vocabulary (1024 DVAE codes + start + stop), the 6681-token text
# vocabulary, the perceiver resampler and the masked ground-truth prompt.
PUBLISHED_XTTS_V2_ARGS: dict[str, Any] = {
    "gpt_max_audio_tokens": 605,
    "gpt_max_text_tokens": 402,
    "gpt_max_prompt_tokens": 70,
    "gpt_layers": 30,
    "gpt_n_model_channels": 1024,
    "gpt_n_heads": 16,
    "gpt_number_text_tokens": 6681,
    "gpt_start_text_token": None,
    "gpt_stop_text_token": None,
    "gpt_num_audio_tokens": 1026,
    "gpt_start_audio_token": 1024,
    "gpt_stop_audio_token": 1025,
    "gpt_code_stride_len": 1024,
    "gpt_use_masking_gt_prompt_approach": True,
    "gpt_use_perceiver_resampler": True,
    "input_sample_rate": 22050,
    "output_sample_rate": 24000,
    "output_hop_length": 256,
    "decoder_input_dim": 1024,
    "d_vector_dim": 512,
    "cond_d_vector_in_each_upsampling_layer": True,
}
PUBLISHED_AUDIO = {"sample_rate": 22050, "output_sample_rate": 24000}
# The [START] and [STOP] ids of the published vocab.json (coqui's GPT defaults); the tokenizer
# supplies them when a vocab file is on disk.
START_TEXT_TOKEN, STOP_TEXT_TOKEN = 261, 0
# A new language adds its token, its new characters and up to `vocab_new_tokens` BPE tokens; the
# characters are unknown before the text is read, so a generous allowance is planned.
NEW_CHARACTERS_ALLOWANCE = 400


@dataclass(frozen=True)
class Architecture:
    """The model a plan builds: coqui model_args (sorted items), audio config and where they came from."""

    source: str
    model_args: tuple[tuple[str, Any], ...]
    audio: tuple[tuple[str, Any], ...]
    vocab_file: str | None = None

    def args(self) -> dict[str, Any]:
        return dict(self.model_args)

    @property
    def layers(self) -> int:
        return int(self.args()["gpt_layers"])

    @property
    def width(self) -> int:
        return int(self.args()["gpt_n_model_channels"])


def _from_config(config: dict[str, Any], source: str, vocab: Path | None) -> tuple[dict, dict, str, str | None]:
    args = {
        **PUBLISHED_XTTS_V2_ARGS,
        **{k: v for k, v in config.get("model_args", {}).items() if k in PUBLISHED_XTTS_V2_ARGS},
    }
    audio = {**PUBLISHED_AUDIO, **config.get("audio", {})}
    return args, audio, source, str(vocab) if vocab is not None and vocab.is_file() else None


def resolve_architecture(
    version: str = "v2.0.2",
    models_dir: str | None = None,
    custom_model: str = "",
    language: str = "en",
    vocab_new_tokens: int = 2000,
) -> Architecture:
    """The architecture `train_gpt` would build for these arguments, without loading any weights.

    Order: a custom model's own config.json (our `ready/` folders), the version's config.json on
    disk (the tiny model is built if missing, in seconds), else the published XTTS v2 architecture.
    Raises ValueError for an unknown version.
    """
    check_version_name(version, models_dir)
    folder = ensure_base_model(TINY, models_dir).folder if version == TINY else models_root(models_dir) / version
    custom = Path(custom_model).expanduser().parent if custom_model else None
    if custom is not None and (custom / "config.json").is_file():
        config_file, vocab = custom / "config.json", custom / "vocab.json"
    else:
        config_file, vocab = folder / "config.json", folder / "vocab.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text(encoding="utf-8"))
        args, audio, source, vocab_file = _from_config(config, f"{config_file}", vocab)
        languages = list(config.get("languages") or [])
    elif version in KNOWN_VERSIONS:
        args, audio, vocab_file = dict(PUBLISHED_XTTS_V2_ARGS), dict(PUBLISHED_AUDIO), None
        source = f"published XTTS v2 architecture ({version} is not downloaded)"
        languages = list(XTTS_LANGUAGES)
    else:
        raise ValueError(f"{folder} has no config.json: put the model's files there, or use a published version.")
    if vocab_file is None:
        args["gpt_start_text_token"], args["gpt_stop_text_token"] = START_TEXT_TOKEN, STOP_TEXT_TOKEN
    if canonical_language(language) not in languages:
        # The run extends the vocab: embedding and text head grow (see utils.vocab.prepare_vocab).
        args["gpt_number_text_tokens"] = (
            int(args["gpt_number_text_tokens"] or 0) + 1 + vocab_new_tokens + NEW_CHARACTERS_ALLOWANCE
        )
        vocab_file = None
        args["gpt_start_text_token"], args["gpt_stop_text_token"] = START_TEXT_TOKEN, STOP_TEXT_TOKEN
    return Architecture(source, tuple(sorted(args.items())), tuple(sorted(audio.items())), vocab_file)
