"""`stopped`, the duration ratio and the babble rate measure what the GPT's stop token does, through the real batched
generation of a scored evaluation on the tiny model: a model whose stop token is forced when each clip has reached
its expected length stops (ratio near 1), one whose stop token is masked never stops (babble rate 1).

The model is changed the way a fine-tune changes it, in its output head: the GPT's mel head (the last layer of the
generation's lm_head) gets a large logit added to, or removed from, the stop token."""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers import SENTENCES, write_clip
from tests.training.model_helpers import build_model
from utils.quality.babble import SpeakingPace
from utils.quality.probes import probes_for
from utils.text.frontend import TextFrontEnd
from utils.training.evaluation.probe_eval import ProbeRow
from utils.training.evaluation.quality_eval import TOKENS_PER_SECOND, EvalSentence, QualityEvaluator

pytestmark = pytest.mark.slow  # a tiny model speaks and the real HiFi-GAN decodes ~20 s of audio: ~1 min here

BIG = 1.0e4  # far beyond any other logit: the stop token is certain (or impossible)


class StopHead(torch.nn.Module):
    """The mel head with the stop token's logit forced for row r once that row has generated `stop_after[r]` tokens
    (None: never forced), or masked at every step (`mask`)."""

    def __init__(self, head: torch.nn.Linear, stop_token: int, stop_after: list[int] | None, mask: bool) -> None:
        super().__init__()
        self.head, self.stop_token, self.stop_after, self.mask = head, stop_token, stop_after, mask
        self.generated = 0

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)
        if hidden.shape[1] > 1:  # the first step of a generation reads the whole prefix
            self.generated = 0
        last = logits[:, -1, self.stop_token]
        if self.mask:
            last -= BIG
        else:
            for row, after in enumerate(self.stop_after or []):
                if self.generated >= after:
                    last[row] += BIG
        self.generated += 1
        return logits


@pytest.fixture(scope="module")
def evaluator_and_model(tiny_base, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stop-token")
    model, _ = build_model(tiny_base, folder)
    frontend = TextFrontEnd("en")
    real = write_clip(folder / "real.wav", 1.5, seed=3)
    sentences = [EvalSentence(SENTENCES[0], frontend.apply(SENTENCES[0]), str(real), 1.5)]
    pace = SpeakingPace(15.0, 0.2)
    probes = [
        ProbeRow(p.kind, p.text, frontend.apply(p.text), pace.expected_seconds(p.text))
        for p in probes_for("en")
        if p.kind != "long"  # the long one is the same path, and 15 s more audio to decode on a CPU
    ]
    evaluator = QualityEvaluator(
        sentences,
        folder,
        write_clip(folder / "reference.wav", 3.0, seed=4),
        "en",
        seed=1,
        whisper_model="",  # no transcript needed here: CER says why it is missing
        probes=probes,
    )
    return evaluator, model.xtts


def speak_with(evaluator, xtts, step, stop_after=None, mask=False):
    gpt = xtts.gpt
    original = gpt.mel_head
    gpt.mel_head = StopHead(original, gpt.stop_audio_token, stop_after, mask)
    try:
        return evaluator.generate(xtts, step).finish()
    finally:
        gpt.mel_head = original


def test_a_stop_token_forced_at_the_expected_length_stops_every_clip_near_ratio_one(evaluator_and_model):
    evaluator, xtts = evaluator_and_model
    rows = [*evaluator.sentences, *evaluator.probes]
    record = speak_with(evaluator, xtts, 1, stop_after=[round(r.seconds * TOKENS_PER_SECOND) for r in rows])
    clips = [*record["clips"], *record["probes"]]
    assert [c.get("kind") for c in record["probes"]] == ["short", "question", "exclamation"]
    assert [c["stopped"] for c in clips] == [True] * 4
    for clip, row in zip(clips, rows, strict=True):
        assert clip["expected_seconds"] == pytest.approx(row.seconds, abs=1e-3)
        assert 0.85 <= clip["duration_ratio"] <= 1.2, clip
        assert clip["babbled"] is False and 1.0 <= clip["naturalness"] <= 5.0
    assert record["babble_rate"] == 0.0
    assert record["cer"] is None and any(r.startswith("cer: no Whisper model") for r in record["reasons"])


def test_a_masked_stop_token_never_stops_and_every_clip_babbles(evaluator_and_model):
    evaluator, xtts = evaluator_and_model
    record = speak_with(evaluator, xtts, 2, mask=True)
    clips = [*record["clips"], *record["probes"]]
    assert [c["stopped"] for c in clips] == [False] * 4
    assert record["babble_rate"] == 1.0 and all(c["babbled"] for c in clips)
    # Each ran to its cap: 1.5 times its expected length and 20 tokens more.
    for clip, row in zip(clips, [*evaluator.sentences, *evaluator.probes], strict=True):
        cap = math.ceil(row.seconds * TOKENS_PER_SECOND * 1.5) + 20
        assert clip["duration"] == pytest.approx(cap / TOKENS_PER_SECOND, rel=0.1)


def test_a_probe_the_model_cannot_read_is_not_generated_and_says_why(evaluator_and_model, tmp_path):
    evaluator, xtts = evaluator_and_model
    too_long = ProbeRow("long", "word " * 500, "word " * 500, 30.0)
    other = QualityEvaluator(
        evaluator.sentences,
        tmp_path,
        evaluator.reference_wav,
        "en",
        seed=1,
        whisper_model="",
        max_audio_tokens=10,
        probes=[evaluator.probes[0], too_long],
    )
    record = other.generate(xtts, 3).finish()
    short, long = record["probes"]
    assert short["stopped"] is not None and short["file"] == "evals/step_3/probe_short.wav"
    assert long["stopped"] is None and long["file"] is None and long["naturalness"] is None
    assert "over the model's limit" in long["reason"]
    assert record["files"] == ["evals/step_3/0.wav"], "the sentences were spoken all the same"
