"""Facts of XTTS v2 that the whole package shares, each defined once: rates, clip and text limits, languages,
the base model's file names, and the project's own folders."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# The GPT trains on 22.05 kHz audio; the HiFi-GAN decoder speaks at 24 kHz.
XTTS_SAMPLE_RATE = 22050
XTTS_OUTPUT_SAMPLE_RATE = 24000
# The longest training clip coqui's XTTS v2 recipe uses: 255995 samples, about 11.6 s.
MAX_AUDIO_LENGTH = 255995
MAX_AUDIO_SECONDS = round(MAX_AUDIO_LENGTH / XTTS_SAMPLE_RATE, 1)
MIN_CLIP_SECONDS = 1.0
# The shortest "longest clip" a run may set: 2 s.
MIN_MAX_AUDIO_LENGTH = 2 * XTTS_SAMPLE_RATE
# The trainer skips samples whose text is longer than this many tokens, silently.
MAX_TEXT_TOKENS = 200
# One DVAE code (GPT audio token) per 1024 samples at 22.05 kHz: ~21.5 tokens per second of speech.
SAMPLES_PER_AUDIO_TOKEN = 1024
# The conditioning clip the GPT sees per sample: 3-6 s, as in coqui's XTTS v2 recipe.
MIN_CONDITIONING_SAMPLES = 3 * XTTS_SAMPLE_RATE
MAX_CONDITIONING_SAMPLES = 6 * XTTS_SAMPLE_RATE

# The 17 languages of XTTS v2, in the order of its config.json.
XTTS_LANGUAGES = (
    "en",
    "es",
    "fr",
    "de",
    "it",
    "pt",
    "pl",
    "tr",
    "ru",
    "nl",
    "cs",
    "ar",
    "zh-cn",
    "hu",
    "ko",
    "ja",
    "hi",
)

# Base model files, in the layout of the real coqui/XTTS-v2 release.
MODEL_FILES = ("model.pth", "config.json", "vocab.json", "dvae.pth", "mel_stats.pth", "speakers_xtts.pth")
