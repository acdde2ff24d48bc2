"""Speech for the server: a request's text made into what the model is given (sentences through the run's text front
end), and the one generation at a time that streams it (XTTS's `inference_stream`).

The text: cut by the product's one splitter (utils.text.split.speech_pieces, as synthesize cuts it: paragraphs,
sentences with Latin, CJK, Ethiopic, Arabic and Devanagari ends, a sentence over the language's character limit cut at
its clauses, then words); each piece through the run's
`TextFrontEnd.apply` (ready/finetune.json's `text_frontend`, the function `utils.model.inference.synthesize` applies),
then checked against XTTS's text-token limit. The voice speaks with the run's own sampling settings (ready/config.json,
read by utils.model.ready.read_inference_settings: chosen at the end of its run, else the base model's).

One generation at a time: every request waits for the process's synthesis lock (the one `synthesize`, so the web
app's Test tab, takes: the loaded model is shared), and on a GPU also for the app's GPU-work lock, which Start holds
while starting a run. On a GPU, a request while a training run is active is refused with the reason (503): a second
model there could end the run out of memory (on a CPU, speech goes on beside it). Requests beyond `max_waiting`
are refused at once (503).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.model import sampling
from utils.serving.catalog import Model, Voice
from utils.serving.encoding import Format
from utils.serving.errors import ApiError
from utils.serving.options import DEFAULT_CHUNK_TOKENS, DEFAULT_MAX_WAITING
from utils.text.languages import char_limit
from utils.text.split import speech_pieces

log = logging.getLogger(__name__)

RETRY_AFTER_S = 30
_CONDITIONING_KEPT = 8


def speech_texts(voice: Any, text: str) -> list[str]:
    """The texts the model is given for `text`, in order: its sentences (cut where over the language's character
    limit), each through the voice's text front end (`voice.frontend.apply`, as synthesize applies it). A piece over
    XTTS's text-token limit, or text with nothing to say, is a 400."""
    from utils.model.inference import current_frontend

    frontend, model = current_frontend(voice), voice.model
    chars = char_limit(frontend.language, phonemized=frontend.phonemized)
    token_limit = int(model.args.gpt_max_text_tokens)
    texts = []
    for piece in speech_pieces(text, chars):
        prepared = frontend.apply(piece.text).strip()
        if not prepared:
            continue
        # As inference_stream encodes it (stripped, lower case).
        tokens = len(model.tokenizer.encode(prepared.lower(), lang=frontend.language.split("-")[0]))
        if tokens >= token_limit:
            raise ApiError(
                400,
                f"input: sentence {piece.sentence} is {tokens} text tokens after the voice's text front end, over "
                f"XTTS's limit of {token_limit - 1}: shorten it.",
                param="input",
                code="sentence_too_long",
            )
        texts.append(prepared)
    if not texts:
        raise ApiError(400, "input has nothing to say: give text with words.", param="input", code="empty_input")
    return texts


@dataclass(frozen=True)
class SpeechOrder:
    """A checked request: which run and voice, the text, the format and the speed."""

    model: Model
    voice: Voice
    text: str
    format: Format
    speed: float = 1.0


_END = object()


@dataclass
class SpeechJob:
    """One request's generation: its thread puts bytes (or an ApiError) on `items`, read by the response."""

    order: SpeechOrder
    loop: asyncio.AbstractEventLoop
    items: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    sample_rate: int = 0  # the voice's, set before its first bytes

    def put(self, item: Any) -> None:
        if isinstance(item, bytes) and not item:
            return
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:  # the server's loop is gone (shut down): nobody is listening
            self.cancelled.set()

    async def next(self, disconnected: Callable[[], Any] | None = None, poll_s: float = 0.5) -> Any:
        """The next item: bytes, an ApiError, or None at the end. While waiting, `disconnected()` (awaited) ending
        True cancels the job and ends it."""
        while True:
            try:
                item = await asyncio.wait_for(self.items.get(), poll_s)
            except asyncio.TimeoutError:
                if disconnected is not None and await disconnected():
                    self.cancelled.set()
                    return None
                continue
            return None if item is _END else item


class _Cancelled(Exception):
    pass


class SpeechService:
    """Generates speech for one request at a time (see the module's docstring).

    gpu_busy: why this request must not start now ("" when it may), asked before and after waiting its turn (the
    web app's: a training run is active on the GPU; standalone: on a GPU, a run in the served folders trains; on a
    CPU speech goes on beside a run, as the Test tab's does). gpu_lock: held while
    generating on a GPU (the web app's GPU-work lock). max_audio_tokens: a cap on each piece's speech (~21.5 tokens
    a second; the model's own limit when None). chunk_tokens: audio tokens per streamed chunk."""

    def __init__(
        self,
        *,
        gpu_busy: Callable[[], str] | None = None,
        gpu_lock: Any = None,
        max_audio_tokens: int | None = None,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        max_waiting: int = DEFAULT_MAX_WAITING,
    ) -> None:
        self.gpu_busy = gpu_busy or (lambda: "")
        self.gpu_lock = gpu_lock
        self.max_audio_tokens = (
            None if max_audio_tokens is None else sampling.checked("max_audio_tokens", max_audio_tokens)
        )
        if not isinstance(chunk_tokens, int) or chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be a whole number of 1 or more (got {chunk_tokens!r})")
        self.chunk_tokens = chunk_tokens
        self.max_waiting = max_waiting
        self._count_lock = threading.Lock()
        self._jobs = 0  # waiting or generating
        self._conditioning: collections.OrderedDict[tuple, tuple[Any, Any]] = collections.OrderedDict()

    # --- the turn -------------------------------------------------------------------------------------------
    @staticmethod
    def on_gpu() -> bool:
        import torch

        return torch.cuda.is_available()

    def _refuse_if_busy(self) -> None:
        if why := self.gpu_busy():
            raise ApiError(503, why, code="gpu_busy", headers={"Retry-After": str(RETRY_AFTER_S)})

    @contextlib.contextmanager
    def _turn(self, job: SpeechJob) -> Iterator[None]:
        """Hold the GPU-work lock (on a GPU) and the synthesis lock: this request's turn with the model."""
        from utils.model import inference

        # The synthesis lock of utils.model.inference: the one synthesize (the Test tab) holds, the model being shared.
        locks = [self.gpu_lock] if self.gpu_lock is not None and self.on_gpu() else []
        locks.append(inference.synthesis_lock)
        held = []
        try:
            for lock in locks:
                while not lock.acquire(timeout=0.2):
                    if job.cancelled.is_set():
                        raise _Cancelled
                held.append(lock)
            self._refuse_if_busy()  # a run may have started while this request waited
            yield
        finally:
            for lock in reversed(held):
                lock.release()

    # --- one request ----------------------------------------------------------------------------------------
    async def start(self, order: SpeechOrder) -> SpeechJob:
        """The job generating `order`, started; 503 at once when a training run holds the GPU or the queue is full."""
        await asyncio.to_thread(self._refuse_if_busy)  # the app's runner reads its run folder: not on the loop
        with self._count_lock:
            if self._jobs >= self.max_waiting:
                raise ApiError(
                    503,
                    f"{self._jobs} speech requests are waiting or speaking (at most {self.max_waiting}): try again "
                    "soon.",
                    code="queue_full",
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                )
            self._jobs += 1
        job = SpeechJob(order, asyncio.get_running_loop())
        threading.Thread(target=self._run, args=(job,), name="speech", daemon=True).start()
        return job

    def _run(self, job: SpeechJob) -> None:
        try:
            with self._turn(job):
                unloaded = self._speak(job)
                if unloaded is not None and unloaded() is None and self.on_gpu():
                    # The app unloaded the model (a run is starting) while this request spoke with it: free its memory
                    # before the run starts (it waits for this request's GPU-work lock).
                    import torch

                    gc.collect()
                    torch.cuda.empty_cache()
        except _Cancelled:
            pass
        except ApiError as error:
            job.put(error)
        except Exception as exc:  # the client gets a reason, the log the traceback
            log.exception("speech generation failed")
            job.put(ApiError(500, f"Generation failed: {type(exc).__name__}: {exc}", code="generation_failed"))
        finally:
            with self._count_lock:
                self._jobs -= 1
            job.put(_END)

    def _speak(self, job: SpeechJob) -> Callable[[], Any] | None:
        """Generate and encode `job`'s speech, putting bytes as they come; a weak reference to the voice used."""
        from utils.model.inference import load_voice

        order = job.order
        if job.cancelled.is_set():
            return None
        try:
            voice = load_voice(order.model.ready_dir)
        except ValueError as exc:
            raise ApiError(500, f"model {order.model.name} cannot be loaded: {exc}", code="model_unloadable") from exc
        texts = speech_texts(voice, order.text)
        latent, speaker = self._conditioning_of(voice, order.voice)
        settings = self._settings(voice.ready_dir)
        encoder = order.format.make(voice.sample_rate)
        job.sample_rate = voice.sample_rate
        pending = encoder.header()  # sent with the first audio
        model = voice.model
        limit = model.gpt.max_gen_mel_tokens
        if self.max_audio_tokens:
            model.gpt.max_gen_mel_tokens = max(2, min(limit, self.max_audio_tokens))
        try:
            for text in texts:
                for chunk in model.inference_stream(
                    text,
                    voice.frontend.language,
                    latent,
                    speaker,
                    stream_chunk_size=self.chunk_tokens,
                    speed=order.speed,
                    enable_text_splitting=False,
                    **settings,
                ):
                    if job.cancelled.is_set():
                        return weakref.ref(voice)
                    job.put(pending + encoder.add(chunk.detach().float().cpu().numpy()))
                    pending = b""
        finally:
            model.gpt.max_gen_mel_tokens = limit
        job.put(pending + encoder.finish())
        return weakref.ref(voice)

    @staticmethod
    def _settings(ready_dir: Path) -> dict[str, Any]:
        from utils.model.ready import read_inference_settings

        own = read_inference_settings(ready_dir)
        for why in own.problems.values():
            log.warning("%s", why)
        values = own.values
        # transformers' samplers insist on floats, top_k on a whole number.
        return {name: int(value) if name == "top_k" else float(value) for name, value in values.items()}

    def _conditioning_of(self, voice: Any, chosen: Voice) -> tuple[Any, Any]:
        """The GPT conditioning latent and speaker embedding of a voice (on the CPU; kept for the next request)."""
        from utils.model.inference import conditioning_latents
        from utils.model.references import voice_references

        reference = voice_references(voice.ready_dir)  # the voice's clips: one or several
        stamp = tuple((c.name, c.stat().st_mtime_ns) for c in reference) if chosen.kind == "reference" else 0
        key = (str(voice.ready_dir), (voice.ready_dir / "model.pth").stat().st_mtime_ns, chosen.kind, chosen.id, stamp)
        if key in self._conditioning:
            self._conditioning.move_to_end(key)
            return self._conditioning[key]
        if chosen.kind == "reference":
            latent, speaker = conditioning_latents(voice.model, reference)
        else:
            manager = getattr(voice.model, "speaker_manager", None)
            stored = getattr(manager, "speakers", None) or {}
            if chosen.id not in stored:
                raise ApiError(400, f"voice {chosen.id} is no longer in the model's speakers_xtts.pth.", param="voice")
            latent, speaker = stored[chosen.id]["gpt_cond_latent"], stored[chosen.id]["speaker_embedding"]
        kept = (latent.detach().cpu(), speaker.detach().cpu())
        self._conditioning[key] = kept
        while len(self._conditioning) > _CONDITIONING_KEPT:
            self._conditioning.popitem(last=False)
        return kept
