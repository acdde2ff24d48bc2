"""Real speech for the quality tests: espeak-ng voices, spoken at test time."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_watched

# Sentences the tiny.en model transcribes from espeak-ng at 130 words per minute with a CER under 0.12.
SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "we train the model on our own speech",
    "bring the book back to the library",
    "my voice sounds better every day",
    "please call stella and ask her to bring these things",
    "open the window and let the fresh air in",
]
# Two clearly different speakers: espeak-ng's male 3 and female 3 variants of American English.
VOICE_A = "en-us+m3"
VOICE_B = "en-us+f3"


def speak(text: str, path: Path, voice: str, speed: int = 130) -> Path:
    """espeak-ng speech (22.05 kHz mono 16-bit wav) of ``text`` in ``voice`` at ``speed`` words per minute."""
    path.parent.mkdir(parents=True, exist_ok=True)
    run_watched(["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(path), text], check=True)
    return path
