"""Build a tiny XTTS v2 (same coqui classes, small sizes, random weights) into a model folder.

The tiny model exists so that tests, demos and CPU-only users can run the whole pipeline without
the 1.8 GB base model: it is written in the same file layout as a real version and goes through the
same code path in `train_gpt`. It speaks noise.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from utils.constants import MODEL_FILES, XTTS_LANGUAGES

TINY_GPT_LAYERS = 2
TINY_GPT_WIDTH = 64
TINY_GPT_HEADS = 4
# BPE merges learned on top of the alphabet and special tokens.
TINY_BPE_MERGES = 400

# A little text per language so that BPE learns some merges; the alphabet below covers the rest.
_CORPUS = """
the quick brown fox jumps over the lazy dog. she sells sea shells by the sea shore.
a voice is a sound made by a person speaking or singing. we train the model on our own speech.
el veloz murcielago hindu comia feliz cardillo y kiwi. la cigueña tocaba el saxofon detrás del palenque.
portez ce vieux whisky au juge blond qui fume. voix ambiguë d'un cœur qui au zéphyr préfère les jattes de kiwis.
victor jagt zwölf boxkämpfer quer über den großen sylter deich. falsches üben von xylophonmusik quält jeden.
quel fez sghembo copre davanti. o próximo passo é treinar a voz com os nossos próprios dados.
pchnąć w tę łódź jeża lub ośm skrzyń fig. pijamalı hasta yağız şoföre çabucak güvendi.
съешь же ещё этих мягких французских булок да выпей чаю. de kat zit op de mat en kijkt naar buiten.
příliš žluťoučký kůň úpěl ďábelské ódy. نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر.
árvíztűrő tükörfúrógép. यह एक छोटा सा वाक्य है जो हिंदी में लिखा गया है।
ni hao shi jie. annyeonghaseyo. konnichiwa sekai. one two three four five six seven eight nine ten.
"""


def _initial_alphabet() -> list[str]:
    """Characters every language path of the coqui cleaners can emit, so no [UNK] on ordinary text."""
    ranges = [
        (0x21, 0x7E),  # printable ASCII (space is the [SPACE] token)
        (0xC0, 0x24F),  # Latin-1 supplement letters and Latin extended A/B
        (0x370, 0x3FF),  # Greek
        (0x400, 0x4FF),  # Cyrillic
        (0x600, 0x6FF),  # Arabic
        (0x900, 0x97F),  # Devanagari
    ]
    chars = [chr(c) for start, end in ranges for c in range(start, end + 1)]
    return [c for c in chars if c.isprintable() and not c.isspace()]


def build_tiny_vocab(path: Path) -> int:
    """Train a small BPE vocab in the XTTS format (special and language tokens first). Returns its size."""
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.trainers import BpeTrainer

    # XTTS expects [STOP]=0 and [UNK]=1 (the dataset asserts on both ids), then [SPACE] and [START].
    special = ["[STOP]", "[UNK]", "[SPACE]", "[START]"] + [f"[{lang}]" for lang in XTTS_LANGUAGES]
    tokenizer = Tokenizer(BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    alphabet = _initial_alphabet()
    trainer = BpeTrainer(
        vocab_size=len(special) + len(alphabet) + TINY_BPE_MERGES,
        special_tokens=special,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS.strip().splitlines(), trainer=trainer)
    tokenizer.save(str(path))
    return tokenizer.get_vocab_size()


def tiny_xtts_config(vocab_size: int) -> dict:
    """An XttsConfig dict shaped like the real v2 config.json, with small GPT sizes."""
    from TTS.tts.configs.xtts_config import XttsArgs, XttsConfig

    args = XttsArgs(
        gpt_layers=TINY_GPT_LAYERS,
        gpt_n_model_channels=TINY_GPT_WIDTH,
        gpt_n_heads=TINY_GPT_HEADS,
        gpt_number_text_tokens=vocab_size,
        # XTTS v2's audio vocabulary: 1024 DVAE codes plus start and stop.
        gpt_num_audio_tokens=1026,
        gpt_start_audio_token=1024,
        gpt_stop_audio_token=1025,
        gpt_use_perceiver_resampler=True,
        gpt_use_masking_gt_prompt_approach=True,
        # The HiFi-GAN decoder reads GPT latents, so its input width must be the GPT width.
        decoder_input_dim=TINY_GPT_WIDTH,
    )
    config = XttsConfig(model_args=args, languages=list(XTTS_LANGUAGES))
    config.temperature = 0.75
    config.repetition_penalty = 5.0
    return config.to_dict()


def _save_random_xtts(config_dict: dict, folder: Path) -> Any:
    """A freshly initialised Xtts of this config saved as `folder/model.pth` (the folder's vocab.json is its
    tokenizer); returns the XttsConfig."""
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.layers.xtts.tokenizer import VoiceBpeTokenizer
    from TTS.tts.models.xtts import Xtts

    config = XttsConfig()
    config.from_dict(config_dict)
    model = Xtts(config)
    model.tokenizer = VoiceBpeTokenizer(str(folder / "vocab.json"))
    model.init_models()
    torch.save({"config": config_dict, "model": model.state_dict()}, folder / "model.pth")
    return config


def _random_speakers(width: int) -> dict:
    return {"gpt_cond_latent": torch.randn(1, 32, width), "speaker_embedding": torch.randn(1, 512, 1)}


def _build_into(folder: Path, seed: int) -> None:
    from TTS.tts.layers.xtts.dvae import DiscreteVAE

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        vocab_size = build_tiny_vocab(folder / "vocab.json")
        config_dict = tiny_xtts_config(vocab_size)
        (folder / "config.json").write_text(json.dumps(config_dict, indent=2), encoding="utf-8")

        config = _save_random_xtts(config_dict, folder)

        # The GPT trainer hard-codes this DVAE shape; only the codebook size follows the audio vocab.
        dvae = DiscreteVAE(
            channels=80,
            normalization=None,
            positional_dims=1,
            num_tokens=config.model_args.gpt_num_audio_tokens - 2,
            codebook_dim=512,
            hidden_dim=512,
            num_resnet_blocks=3,
            kernel_size=3,
            num_layers=2,
            use_transposed_convs=False,
        )
        torch.save(dvae.state_dict(), folder / "dvae.pth")

        # Per-channel mel normalisers; the real file holds positive values of this shape.
        torch.save(torch.full((80,), 2.0), folder / "mel_stats.pth")

        torch.save({"Tiny Speaker": _random_speakers(TINY_GPT_WIDTH)}, folder / "speakers_xtts.pth")
    finally:
        torch.random.set_rng_state(generator_state)


def ensure_tiny_model(folder: str | os.PathLike, seed: int = 1234) -> Path:
    """Build the tiny model into `folder` unless all its files are already there. Returns the folder."""
    folder = Path(folder)
    if all((folder / name).is_file() for name in MODEL_FILES):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so a concurrent reader never sees half a model.
    staging = Path(tempfile.mkdtemp(prefix=".tiny-build-", dir=folder.parent))
    try:
        _build_into(staging, seed)
        if all((folder / name).is_file() for name in MODEL_FILES):
            return folder  # another process finished first
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def tiny_vocab(models_folder: str | os.PathLike) -> Path:
    """The tiny model's vocab.json without building the model: its own when the model is built, else the
    same vocab trained alone (in a fraction of a second) into a cache beside it."""
    folder = Path(models_folder)
    if (folder / "vocab.json").is_file():
        return folder / "vocab.json"
    cache = Path(tempfile.gettempdir()) / f"xtts-tiny-vocab-{os.getuid() if hasattr(os, 'getuid') else 0}.json"
    if not cache.is_file():
        staging = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
        build_tiny_vocab(staging)
        os.replace(staging, cache)
    return cache
