"""Measured quality at each evaluation: speak held-out sentences with the weights being trained, score them.

At each evaluation the run's training model (coqui's GPTTrainer holds a full Xtts: GPT, HiFi-GAN
decoder, tokenizer) is switched to inference for a moment, as coqui's own `GPTTrainer.test_run` does,
and speaks a few sentences of the eval split with the run's reference clip and a fixed seed, so two
evaluations differ only by the weights. The clips go to `run_dir/evals/step_<N>/<i>.wav` and are scored
by `utils.quality.scoring`: CER/WER of a faster-whisper transcript, Resemblyzer similarity to the
speaker's real clips, and the duration ratio to the real clip of the same text. Four probe texts (a short
one, a question, an exclamation, a long sentence) are spoken in the same batch, and every clip gets the voice
measures of utils.training.evaluation.probe_eval (stopped, duration against the speaker's pace, words beyond the text,
repeats, naturalness; the babble rate). The transcriber, the speaker encoder and the naturalness model are loaded
once per process, on the CPU, so the GPU stays with training.

Nothing here can end a run: a missing Whisper model, a clip too short to embed, even a failed
generation become None values with their reason in the record.

What it costs, and how little of it the training loop waits for: the sentences are generated as one batch
(`utils.model.inference.generate_latents`: a decoding step costs about the same for three rows as for one),
or `generation_batch` rows at a time (the KV cache grows with the rows), each capped at 1.5 times its real
clip's length (a model that has not learnt to stop speaks to the cap). An out-of-memory error while generating
halves the generation batch (for the later evaluations too) and generates the rest again; at one row the
evaluation is not scored, and its reason says so: it never ends the run.
Only that part needs the weights being trained; the rest, the HiFi-GAN decoder (frozen in training) turning
the latents into speech, Whisper and the speaker encoder, is `Spoken.finish`, which the run does on a
background thread while training goes on when the best checkpoint does not depend on the scores (best_by
eval_loss), and records when it is ready; the run's end waits for it, so no measurement is lost.
`ScoringBudget` keeps the whole to a share of the run's wall time (quality_eval_share): the first and the
last evaluation are always scored, one in between only when the time spent scoring, with the next one's
expected cost, stays within the share of the time elapsed.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from utils.audio.io import write_wav
from utils.data.validation import DatasetReport
from utils.text.frontend import TextFrontEnd
from utils.training.evaluation.probe_eval import (
    Naturalness,
    ProbeRow,
    combined,
    not_generated,
    speakable,
    voice_measures,
)

log = logging.getLogger(__name__)

EVALS_DIR = "evals"
# GPT audio tokens per second of speech (22050 Hz / 1024-sample DVAE frames).
TOKENS_PER_SECOND = 21.5
# Without a cap, a clip may run to 1.5 times its real clip's length (and a little for very short ones).
AUTO_CAP_FACTOR = 1.5
AUTO_CAP_EXTRA_TOKENS = 20


@dataclass(frozen=True)
class EvalSentence:
    """A held-out row to speak: its text as written (what transcripts are scored against), as the model reads
    it (after the run's text front end), and the speaker's real clip of it."""

    text: str
    prepared: str
    real_clip: str  # "" for a sentence with no real clip (a retention probe: utils.training.evaluation.retention)
    seconds: float


def pick_eval_sentences(
    report: DatasetReport, frontend: TextFrontEnd, count: int, seed: int, rows: Any = None
) -> list[EvalSentence]:
    """`count` rows of the eval split (or of `rows`, (row, seconds) pairs: one voice's), drawn with `seed` (the same
    every evaluation and on resume); one pass over the rows with a reservoir, so a huge eval split costs no memory."""
    if count <= 0:
        return []
    rng = random.Random(seed)
    chosen: list[tuple[int, Any, float]] = []
    for seen, (row, duration) in enumerate(report.iter_usable("eval") if rows is None else rows):
        if len(chosen) < count:
            chosen.append((seen, row, duration))
        elif (slot := rng.randrange(seen + 1)) < count:
            chosen[slot] = (seen, row, duration)
    chosen.sort(key=lambda item: item[0])  # file order: stable names 0.wav, 1.wav...
    return [
        EvalSentence(row.text.strip(), frontend.apply(row.text.strip()), row.audio_location, duration)
        for _, row, duration in chosen
    ]


@contextlib.contextmanager
def speaking(xtts: Any, decoder_to_gpt: bool = True) -> Iterator[Any]:
    """The training Xtts, ready to generate: its GPT gets coqui's inference wrapper (sharing the weights) and
    the model is in eval mode; afterwards the wrapper is removed, so checkpoints hold the same keys as before,
    and the training mode is restored. `decoder_to_gpt`: the HiFi-GAN decoder joins the GPT's device meanwhile
    (not needed when the latents are decoded later, where the decoder lives)."""
    was_training = xtts.training
    gpt = xtts.gpt
    gpt.init_gpt_for_inference(kv_cache=bool(getattr(xtts.args, "kv_cache", True)), use_deepspeed=False)
    xtts.eval()
    # Training keeps the HiFi-GAN decoder on the CPU (no step uses it): it joins the GPT to speak, then leaves.
    decoder_device = next(xtts.hifigan_decoder.parameters()).device
    if decoder_to_gpt:
        xtts.hifigan_decoder.to(next(gpt.parameters()).device)
    try:
        yield xtts
    finally:
        xtts.hifigan_decoder.to(decoder_device)
        for owner, name in ((gpt, "gpt_inference"), (gpt.gpt, "wte")):
            if hasattr(owner, name):
                delattr(owner, name)
        xtts.train(was_training)


class ScoringBudget:
    """Whether an evaluation is scored, so that scoring stays within `share` of the run's wall time (see the
    module docstring). `share` 1 scores every evaluation."""

    def __init__(self, share: float, clock: Any = time.monotonic) -> None:
        self.share = share
        self.clock = clock
        self.started = clock()
        self.spent = 0.0  # seconds spent scoring in this process
        self.last_cost: float | None = None

    def should_score(self, final: bool) -> bool:
        if final or self.last_cost is None or self.share >= 1.0:
            return True
        elapsed = self.clock() - self.started
        return self.spent + self.last_cost <= self.share * (elapsed + self.last_cost)

    def record(self, seconds: float) -> None:
        self.spent += seconds
        self.last_cost = seconds

    def add(self, seconds: float) -> None:
        """More of the last evaluation's cost, known later (its scoring on a background thread)."""
        self.spent += seconds
        self.last_cost = (self.last_cost or 0.0) + seconds

    def reason_skipped(self) -> str:
        return (
            f"not scored: scoring has taken {self.spent:.0f} s of {self.clock() - self.started:.0f} s, and "
            f"another ~{self.last_cost or 0:.0f} s would exceed quality_eval_share={self.share:g}"
        )


def step_folder(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / EVALS_DIR / f"step_{step}"


@dataclass
class Spoken:
    """An evaluation's sentences generated with the weights of `step` (GPT latents, or why not): what remains
    (decoding, scoring) no longer needs the training model's GPT, so it may run on another thread."""

    evaluator: QualityEvaluator
    step: int
    latents: list[Any] | None
    speaker: Any
    decoder: Any
    loop_seconds: float
    error: str | None = None
    stopped: list[bool] | None = None  # per generated row (sentences, then probes): the stop token came
    skipped: dict[str, str] | None = None  # {probe kind: why it was not generated}
    folder: Path | None = None  # where the clips go (default evals/step_<N>/)
    generation_batch: int | None = None  # rows generated together at the end (halved after out-of-memory errors)

    def finish(self) -> dict[str, Any]:
        """Decode and score: the fields of a "quality" record (see `QualityEvaluator.evaluate`)."""
        return self.evaluator.finish(self)


class QualityEvaluator:
    """Speaks `sentences` with the training model and scores them (see the module docstring).

    `whisper_model` is a faster-whisper size or a CTranslate2 folder (looked up in models/whisper/<name>/, or
    downloaded when a network allows); `max_audio_tokens` caps each clip (0: 1.5 times its real clip);
    `generation_batch` rows are generated together (0: all of them)."""

    def __init__(
        self,
        sentences: list[EvalSentence],
        run_dir: Path,
        reference_wav: Path | list[Path],
        language: str,
        *,
        seed: int,
        whisper_model: str,
        max_audio_tokens: int = 0,
        probes: list[ProbeRow] | None = None,
        generation_batch: int = 0,
        reference_clips: list[str] | None = None,
        subfolder: str = "",
    ) -> None:
        self.sentences = sentences
        # The speaker's real clips similarity is measured against (default: the sentences' own real clips).
        self.reference_clips = reference_clips if reference_clips is not None else [s.real_clip for s in sentences]
        self.subfolder = subfolder  # where in evals/step_<N>/ its clips go (one evaluator of several: a voice's)
        self.run_dir = Path(run_dir)
        self.reference_wav = reference_wav  # one clip or several (utils.model.inference.conditioning_latents)
        self.language = language
        self.seed = seed
        self.whisper_model = whisper_model
        self.max_audio_tokens = max_audio_tokens
        self.generation_batch = generation_batch
        self.output_sample_rate = 24000  # the model's, read at the first generation
        self.probes = probes or []  # spoken beside the sentences (utils.training.evaluation.probe_eval)
        self.naturalness = Naturalness()
        self._transcriber: Any = None
        self._transcriber_reason: str | None = None

    def transcriber(self) -> tuple[Any, str | None]:
        """The process's Whisper model (loaded at the first evaluation), or None and why."""
        if self._transcriber is None and self._transcriber_reason is None:
            from utils.quality.asr import transcriber_or_reason

            if not self.whisper_model.strip():
                self._transcriber_reason = "no Whisper model named (whisper_model is empty)"
            else:
                self._transcriber, self._transcriber_reason = transcriber_or_reason(
                    self.whisper_model, device="cpu", compute_type="int8", language=self.language
                )
        return self._transcriber, self._transcriber_reason

    def token_cap(self, sentence: EvalSentence | ProbeRow) -> int:
        if self.max_audio_tokens:
            return self.max_audio_tokens
        return math.ceil(sentence.seconds * TOKENS_PER_SECOND * AUTO_CAP_FACTOR) + AUTO_CAP_EXTRA_TOKENS

    def generate(self, xtts: Any, step: int, sampling: dict[str, Any] | None = None, reference: Any = None) -> Spoken:
        """The sentences' and probes' GPT latents with the current weights, `generation_batch` rows at a time (the
        part that needs them); `sampling`: generate_latents' sampling keywords (its defaults otherwise); `reference`:
        other clips to speak with than the run's (utils.training.evaluation.reference_choice tries some). Never raises
        for a model problem: the Spoken says why."""
        from utils.model.inference import conditioning_latents

        started = time.perf_counter()
        self.output_sample_rate = int(xtts.args.output_sample_rate)
        skipped: dict[str, str] = {}
        try:
            with speaking(xtts, decoder_to_gpt=False) as model:
                probes, skipped = speakable(model, self.probes, self.language)
                rows = [*self.sentences, *probes]
                latent, speaker = conditioning_latents(model, reference or self.reference_wav)
                latents = self._latents(model, rows, latent, step, sampling or {})
        except Exception as exc:
            log.warning("Quality evaluation at step %d: generation failed: %s", step, exc, exc_info=True)
            why = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, torch.OutOfMemoryError):
                why = f"out of memory with one sentence at a time, so not scored ({str(exc).strip()[:200]})"
            seconds = time.perf_counter() - started
            batch = self.generation_batch
            return Spoken(self, step, None, None, None, seconds, why, skipped=skipped, generation_batch=batch)
        seconds = time.perf_counter() - started
        return Spoken(
            self,
            step,
            latents,
            speaker.cpu(),
            xtts.hifigan_decoder,
            seconds,
            None,
            latents.stopped,
            skipped,
            generation_batch=self.generation_batch,
        )

    def _latents(self, model: Any, rows: list[Any], latent: Any, step: int, sampling: dict[str, Any]) -> Any:
        """The rows' latents, `generation_batch` rows at a time (with each row's `stopped`); an out-of-memory error
        halves it and the rows not yet generated are tried again (at one row the error stands)."""
        from utils.model.inference import GeneratedLatents, generate_latents

        latents = GeneratedLatents()
        latents.stopped = []
        while len(latents) < len(rows):
            size = min(self.generation_batch or len(rows), len(rows))
            chunk = rows[len(latents) : len(latents) + size]
            try:
                generated = generate_latents(
                    model,
                    [s.prepared for s in chunk],
                    self.language,
                    latent,
                    max_audio_tokens=[self.token_cap(s) for s in chunk],
                    seed=self.seed,
                    **sampling,
                )
                latents += generated
                latents.stopped += generated.stopped
                continue
            except torch.OutOfMemoryError:
                if size <= 1:
                    raise
            gc.collect()  # outside the handler: the failed generation's KV cache is gone with its traceback
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self.generation_batch = max(1, size // 2)
            log.warning(
                "Quality evaluation at step %d: out of memory generating %d rows together; now %d at a time.",
                step,
                size,
                self.generation_batch,
            )
        return latents

    def evaluate(self, xtts: Any, step: int) -> dict[str, Any]:
        """Speak and score the sentences at `step`; the fields of a "quality" record in metrics.jsonl
        (files relative to the run folder). Never raises for a model or scoring problem: it says why."""
        return self.generate(xtts, step).finish()

    def finish(self, spoken: Spoken) -> dict[str, Any]:
        """Decode `spoken` into evals/step_<N>/<i>.wav and score the clips; `seconds` is the whole evaluation's
        time, `loop_seconds` the part that needed the training model (generation)."""
        from utils.quality.scoring import aggregate, score_clips

        started = time.perf_counter() - spoken.loop_seconds
        step = spoken.step
        folder = (spoken.folder or step_folder(self.run_dir, step)) / self.subfolder
        texts = [s.text for s in self.sentences]
        skipped = {p.kind: (spoken.skipped or {}).get(p.kind, "not generated: generation failed") for p in self.probes}
        empty = {
            "files": [],
            "texts": texts,
            "cer": None,
            "wer": None,
            "similarity": None,
            "duration_ratio": None,
            "combined": None,
            "clips": [],
            "probes": [{"kind": p.kind, **not_generated(p, skipped)} for p in self.probes],
        }
        loop_seconds = round(spoken.loop_seconds, 2)
        try:
            files, wavs = self._write_clips(spoken, folder)
        except Exception as exc:
            log.warning("Quality evaluation at step %d: generation failed: %s", step, exc, exc_info=True)
            why = spoken.error or f"{type(exc).__name__}: {exc}"
            return {
                **empty,
                "reasons": [f"generation failed: {why}"],
                "seconds": round(time.perf_counter() - started, 2),
                "loop_seconds": loop_seconds,
                "generation_batch": spoken.generation_batch,
            }
        transcriber, why = self.transcriber()
        rows = [*self.sentences, *self._generated(spoken)]
        report = score_clips(
            [(f, s.text, getattr(s, "real_clip", None) or None) for f, s in zip(files, rows, strict=True)],
            language=self.language,
            reference_clips=self.reference_clips,
            transcriber=transcriber,
            no_transcriber_reason=why,
        )
        count = len(self.sentences)
        sentences = aggregate(report.clips[:count], self.language)  # the evaluation's scores: its sentences'
        clips = [{**vars(c), "file": str(Path(c.file).relative_to(self.run_dir))} for c in report.clips]
        voice = self._voice(spoken, clips, wavs, empty["probes"])
        metrics = {**sentences.metrics(), **{k: voice[k] for k in ("babble_rate", "naturalness", "naturalness_real")}}
        return {
            **empty,
            **metrics,
            "combined": combined(metrics),
            "files": [c["file"] for c in voice["clips"]],
            "clips": voice["clips"],
            "probes": voice["probes"],
            "reasons": sentences.reasons + voice["reasons"],
            "seconds": round(time.perf_counter() - started, 2),
            "loop_seconds": loop_seconds,
            "generation_batch": spoken.generation_batch,
        }

    def _write_clips(self, spoken: Spoken, folder: Path) -> tuple[list[Path], list[Any]]:
        """The spoken latents decoded and written as the step's wav files (sentences, then probes); raises when the
        generation failed or a clip cannot be decoded or written."""
        from utils.model.inference import decode_latents

        if spoken.error is not None:
            raise RuntimeError(spoken.error)
        wavs = decode_latents(spoken.decoder, spoken.latents or [], spoken.speaker)
        names = [f"{i}.wav" for i in range(len(self.sentences))]
        names += [f"probe_{p.kind}.wav" for p in self._generated(spoken)]
        rate = int(self.output_sample_rate)
        return [write_wav(folder / name, wav, rate) for name, wav in zip(names, wavs, strict=True)], wavs

    def _voice(self, spoken: Spoken, clips: list[dict[str, Any]], wavs: list[Any], unscored: list) -> dict[str, Any]:
        """The voice measures (babble, naturalness) of the scored clips; if they fail, the sentences' scores stand
        and the reasons say why."""
        count = len(self.sentences)
        try:
            return voice_measures(
                sentence_clips=clips[:count],
                probe_clips=[{**c, "reason": _without_real_clip(c["reason"])} for c in clips[count:]],
                sentences=self.sentences,
                probes=self.probes,
                skipped=spoken.skipped or {},
                stopped=spoken.stopped,
                wavs=wavs,
                rate=int(self.output_sample_rate),
                language=self.language,
                naturalness=self.naturalness,
            )
        except Exception as exc:
            log.warning("Quality evaluation at step %d: voice measures failed: %s", spoken.step, exc, exc_info=True)
            why = f"voice measures failed: {type(exc).__name__}: {exc}"
            voice = {"clips": clips[:count], "probes": unscored, "reasons": [why]}
            return voice | dict.fromkeys(("babble_rate", "naturalness", "naturalness_real"))

    def _generated(self, spoken: Spoken) -> list[ProbeRow]:
        """The probes `spoken` generated, in batch order."""
        return [p for p in self.probes if p.kind not in (spoken.skipped or {})]


def _without_real_clip(reason: str) -> str:
    """A probe's scoring reasons without "no real clip of this text": it has none; its expected length is its
    pace's."""
    return "; ".join(r for r in reason.split("; ") if r and not r.startswith("duration_ratio: no real clip"))
