"""Speak with a fine-tuned voice: load a run's `ready/` folder into coqui's Xtts and synthesize.

The text goes through the run's stored front end (e.g. Amharic normalisation and G2P) exactly as
in training, so callers pass ordinary text.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import torchaudio

from utils.audio.checks import SILENCE_DBFS, level_around_mean
from utils.audio.io import AudioError, load_audio, write_wav
from utils.constants import XTTS_SAMPLE_RATE
from utils.model import long_text, sampling
from utils.model.base_models import models_root
from utils.model.checkpoints import loadable_checkpoint
from utils.model.named_voices import named_voice
from utils.model.ready import (
    READY_DIR,
    read_finetune_info,
    read_inference_settings,
    read_voice_frontend,
    ready_config,
    recover_ready,
    voice_ready_dir,
)
from utils.model.references import reference_paths, voice_references
from utils.text.frontend import TextFrontEnd
from utils.text.visible import clipped, visible

log = logging.getLogger(__name__)

synthesis_lock = threading.Lock()  # one synthesis at a time per process: the model is shared (the speech server too)


@dataclass
class LoadedVoice:
    model: Any
    ready_dir: Path
    frontend: TextFrontEnd
    sample_rate: int
    info: dict[str, Any]


def find_ready_dir(path: str | os.PathLike) -> Path:
    """A `ready/` folder from itself, its run folder, or a model.pth inside it."""
    path = Path(path).expanduser()
    try:
        there = path.exists()
    except OSError:  # a name too long for the file system
        there = False
    if not there:  # first whether there is anything there at all
        raise ValueError(f"{clipped(path)} does not exist: there is no such run or ready/ folder.")
    if path.is_file():
        path = path.parent
    recover_ready(path)
    if (path / READY_DIR / "model.pth").is_file():
        path = path / READY_DIR
    missing = [name for name in ("model.pth", "config.json", "vocab.json") if not (path / name).is_file()]
    if missing:
        raise ValueError(
            f"{clipped(path)} is not a ready model folder: missing {', '.join(missing)}. Pick a run whose "
            "training finished or was stopped (its ready/ folder), or export one first."
        )
    return path


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.lru_cache(maxsize=2)  # a run and its base model, compared side by side in the Test tab
def _load(ready_dir: str, stamp: float, device: str) -> LoadedVoice:
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts

    from utils.text.tokenizer import tokenizer_for

    folder = Path(ready_dir)
    info = read_finetune_info(folder)  # first: an unreadable one is a ValueError naming it, before the model loads
    config = XttsConfig()
    # coqui's load_json, with the file named when unreadable and each sampling setting checked (a NaN top_k in
    # it failed the load with "cannot convert float NaN to integer"); synthesize reads the settings itself.
    config.deserialize(ready_config(folder))
    config.check_values()
    model = Xtts(config)
    # An old-format model.pth would be rewritten in place by coqui; load a converted copy instead.
    checkpoint = loadable_checkpoint(folder / "model.pth", models_root() / ".converted")
    model.load_checkpoint(
        config, checkpoint_dir=str(folder), checkpoint_path=str(checkpoint), eval=True, use_deepspeed=False
    )
    frontend = TextFrontEnd.from_dict(info.get("text_frontend"), info.get("language", "en"))
    model.tokenizer = tokenizer_for(folder / "vocab.json", frontend.language)
    model.to(device)
    return LoadedVoice(model, folder, frontend, int(config.model_args.output_sample_rate), info)


def load_voice_uncached(path: str | os.PathLike) -> LoadedVoice:
    """A ready/ voice loaded afresh, not kept by the process (a run's end measures its voice once, then frees it)."""
    folder = find_ready_dir(path)
    return _load.__wrapped__(str(folder.resolve()), 0.0, _device())


def unload_voice() -> None:
    """Free the loaded model (the web app does this before training, to leave the GPU to it)."""
    _load.cache_clear()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def current_frontend(voice: LoadedVoice, language: str | None = None) -> TextFrontEnd:
    """The voice's text front end as its finetune.json holds it now (a lexicon edited after the model was loaded
    applies to the next text), for speaking `language` (None: the voice's own)."""
    return read_voice_frontend(voice.ready_dir).for_language(language or voice.frontend.language)


def load_voice(path: str | os.PathLike) -> LoadedVoice:
    """Load (or reuse the already loaded) fine-tuned model of a run or ready folder."""
    folder = find_ready_dir(path)
    return _load(str(folder.resolve()), (folder / "model.pth").stat().st_mtime, _device())


def check_reference(reference: str | os.PathLike | list[str | os.PathLike]) -> None:
    """A reference clip (or each of a list of them) that exists, decodes, holds sound (not silent by the dataset
    check's rule) and lasts at least half a second: a ValueError naming the clip otherwise."""
    clips = reference_paths(reference)
    if not clips:
        raise ValueError("No reference clip given: give 3-10 s of the voice (one clip or several).")
    for clip in clips:
        name = visible(clip.name)
        if not clip.is_file():
            raise ValueError(f"Reference audio not found: {clipped(visible(str(clip)))}.")
        try:
            wav, rate = load_audio(clip, None)
        except AudioError as exc:
            raise ValueError(f"The reference is not audio this app can read: {name} {exc}.") from exc
        if wav.size < rate // 2:
            raise ValueError(f"The reference {name} is shorter than 0.5 s; give 3-10 s of the voice.")
        if level_around_mean(wav)[1] < SILENCE_DBFS:
            raise ValueError(
                f"The reference {name} is silent (under {SILENCE_DBFS:.0f} dBFS); give 3-10 s of the voice."
            )


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Sampling with a fixed seed inside, without changing the random state of the caller (a training
    run keeps its own sequence)."""
    if seed is None:
        yield
        return
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(seed))
        yield


def conditioning_latents(
    model: Any, reference: str | os.PathLike | list[str | os.PathLike]
) -> tuple[torch.Tensor, torch.Tensor]:
    """XTTS's GPT conditioning latent (on the GPT's device) and speaker embedding (on the device of the speaker
    encoder, which lives in the HiFi-GAN decoder) of a reference clip or several: coqui's
    `Xtts.get_conditioning_latents` with the settings it was called with (each clip cut at 30 s; the GPT latent of the
    clips joined, 30 s at most in 4 s chunks; the mean of the clips' speaker embeddings), but coqui puts the clips on
    the GPT's device for the speaker encoder too, which fails on a GPU while a training run keeps the decoder on the
    CPU. The clips are read by the product's loader (soundfile; coqui's torchaudio.load needs FFmpeg)."""
    rate = XTTS_SAMPLE_RATE
    clips = []
    for path in reference_paths(reference):
        samples, _ = load_audio(path, rate)
        clips.append(torch.from_numpy(np.clip(samples[: rate * 30], -1.0, 1.0)).unsqueeze(0))
    if not clips:
        raise ValueError("No reference clip given: give 3-10 s of the voice (one clip or several).")
    encoder = model.hifigan_decoder.speaker_encoder
    device = next(encoder.parameters()).device
    with torch.inference_mode():
        speakers = [
            encoder.forward(torchaudio.functional.resample(clip, rate, 16000).to(device), l2_norm=True).unsqueeze(-1)
            for clip in clips
        ]
        speaker = torch.stack(speakers).mean(dim=0)
        # coqui's own: the clips' mels on the CPU, the GPT's conditioning encoder on the model's device.
        latent = model.get_gpt_cond_latents(torch.cat(clips, dim=-1), rate, length=30, chunk_length=4)
    return latent, speaker


def generate_wav(
    model: Any,
    prepared_text: str,
    language: str,
    latent: torch.Tensor,
    speaker: torch.Tensor,
    *,
    seed: int | None = None,
    max_audio_tokens: int | None = None,
    temperature: float = 0.75,
    length_penalty: float = 1.0,
    repetition_penalty: float = 5.0,
    top_k: int = 50,
    top_p: float = 0.85,
    speed: float = 1.0,
) -> np.ndarray:
    """Speech samples (mono float32 at the model's output rate) of text already through the front end, from
    an Xtts ready for inference (loaded for it, or a training model inside
    `utils.training.evaluation.quality_eval.speaking`)."""
    limit = model.gpt.max_gen_mel_tokens
    if max_audio_tokens:
        model.gpt.max_gen_mel_tokens = max(2, min(limit, int(max_audio_tokens)))
    try:
        with torch.inference_mode(), seeded(seed):
            # Sliders and JSON send whole numbers as int; transformers' samplers insist on floats.
            out = model.inference(
                prepared_text,
                language,
                latent,
                speaker,
                temperature=float(temperature),
                length_penalty=float(length_penalty),
                repetition_penalty=float(repetition_penalty),
                top_k=int(top_k),
                top_p=float(top_p),
                speed=float(speed),
                enable_text_splitting=False,
            )
    finally:
        model.gpt.max_gen_mel_tokens = limit
    return np.asarray(out["wav"], dtype=np.float32).reshape(-1)


def generate_piece(
    model: Any,
    prepared_text: str,
    language: str,
    latent: torch.Tensor,
    speaker: torch.Tensor,
    *,
    max_audio_tokens: int | None = None,
    speed: float = 1.0,
    **generation: Any,
) -> tuple[np.ndarray, bool]:
    """(speech samples, whether the GPT stopped before its cap) of one text already through the front end:
    `generate_latents` for it alone (its keywords: seed and the sampling settings), then what coqui's
    `Xtts.inference` does after generating (the latents stretched by 1 / speed, the HiFi-GAN decoder). False is a
    clip cut at its cap, still speaking."""
    cap = max_audio_tokens or int(model.gpt.max_gen_mel_tokens)
    latents = generate_latents(model, [prepared_text], language, latent, max_audio_tokens=[cap], **generation)
    gpt_latent = latents[0]
    if speed != 1.0:  # coqui's length scale, with its floor
        scale = 1.0 / max(float(speed), 0.05)
        gpt_latent = F.interpolate(gpt_latent.transpose(1, 2), scale_factor=scale, mode="linear").transpose(1, 2)
    return decode_latents(model.hifigan_decoder, [gpt_latent], speaker)[0], latents.stopped[0]


def generate_wavs(
    model: Any, prepared_texts: list[str], language: str, latent: torch.Tensor, speaker: torch.Tensor, **generation: Any
) -> list[np.ndarray]:
    """`generate_latents` (its keywords: max_audio_tokens, seed and the sampling settings, declared there), then
    `decode_latents`: speech samples (mono float32 at the model's output rate)."""
    latents = generate_latents(model, prepared_texts, language, latent, **generation)
    return decode_latents(model.hifigan_decoder, latents, speaker)


def decode_latents(decoder: Any, latents: list[torch.Tensor], speaker: torch.Tensor) -> list[np.ndarray]:
    """The HiFi-GAN decoder's speech of GPT latents, on the decoder's device. The decoder is frozen in
    training (no step changes it), so this may run on another thread while training goes on."""
    device = next(decoder.parameters()).device
    wavs = []
    with torch.inference_mode():
        for latent in latents:
            wav = decoder(latent.to(device), g=speaker.to(device)).cpu().squeeze()
            wavs.append(np.asarray(wav, dtype=np.float32).reshape(-1))
    return wavs


class GeneratedLatents(list):
    """generate_latents' result: a list of latents (one per text) that also says, per text, whether the GPT emitted
    its stop token before the text's cap (`stopped`): False is a clip cut at its cap, still speaking."""

    stopped: list[bool]


def generate_latents(
    model: Any,
    prepared_texts: list[str],
    language: str,
    latent: torch.Tensor,
    *,
    max_audio_tokens: list[int],
    seed: int | None = None,
    temperature: float = 0.75,
    length_penalty: float = 1.0,
    repetition_penalty: float = 5.0,
    top_k: int = 50,
    top_p: float = 0.85,
) -> list[torch.Tensor]:
    """The GPT latents (one (1, frames, dim) tensor on the CPU per text) of several texts (already through the
    front end) in one autoregressive pass: what coqui's `Xtts.inference` does one text at a time, with the texts
    as one batch of its GPT generation (transformers' generate underneath). A decoding step costs about the
    same for three rows as for one (it reads every weight once), so a batch of n texts takes about the time
    of its longest; `decode_latents` turns them into speech.

    Each row's prefix (conditioning latents, then its text) is left-padded to the longest one and the padding
    is masked out of attention; XTTS's GPT has no absolute positions (the text and audio position embeddings
    are its own, per row), so a row generates as it would alone. Each clip is cut at its own
    `max_audio_tokens` (the batch runs to the largest) or at its first stop token. The sampling differs from
    one-by-one generation (one random stream for the batch); with `seed` it is repeatable, and with top_k=1
    (greedy) it is the same as one by one. The list is a GeneratedLatents: `.stopped` says which rows stopped."""
    gpt = model.gpt
    lang = language.split("-")[0]
    device = next(gpt.parameters()).device
    latent = latent.to(device)
    limit = int(gpt.max_gen_mel_tokens)
    caps = [max(2, min(limit, int(cap))) for cap in max_audio_tokens]
    if len(caps) != len(prepared_texts):
        raise ValueError("generate_wavs: one max_audio_tokens per text")
    with torch.inference_mode(), seeded(seed):
        texts = [
            torch.IntTensor(model.tokenizer.encode(text.strip().lower(), lang=lang)).unsqueeze(0).to(device)
            for text in prepared_texts
        ]
        for text in texts:
            if text.shape[-1] >= model.args.gpt_max_text_tokens:
                raise ValueError(
                    f"A text is {text.shape[-1]} tokens, over XTTS's limit of {model.args.gpt_max_text_tokens}."
                )
        prefix, mask = _left_padded_prefixes(gpt, latent, texts)
        gpt.gpt_inference.store_prefix_emb(prefix)
        inputs = torch.full(mask.shape, 1, dtype=torch.long, device=device)
        inputs[:, -1] = gpt.start_audio_token
        generated = gpt.gpt_inference.generate(
            inputs,
            bos_token_id=gpt.start_audio_token,
            pad_token_id=gpt.stop_audio_token,
            eos_token_id=gpt.stop_audio_token,
            max_length=max(caps) + inputs.shape[-1],
            attention_mask=mask,
            do_sample=True,
            top_p=float(top_p),
            top_k=int(top_k),
            temperature=float(temperature),
            num_return_sequences=1,
            num_beams=1,
            length_penalty=float(length_penalty),
            repetition_penalty=float(repetition_penalty),
            output_attentions=False,
        )[:, inputs.shape[-1] :]
        result = GeneratedLatents(
            _row_latent(gpt, latent, text, generated[row : row + 1, :cap])
            for row, (text, cap) in enumerate(zip(texts, caps, strict=True))
        )
        result.stopped = [bool((generated[row, :cap] == gpt.stop_audio_token).any()) for row, cap in enumerate(caps)]
        return result


def _left_padded_prefixes(
    gpt: Any, latent: torch.Tensor, texts: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(prefix embeddings, attention mask) of a batch: each row's conditioning latents and framed text (as coqui's
    GPT.compute_embeddings builds them for one row), left-padded to the longest; the mask has one more column for
    the start-audio token that follows."""
    prefixes = []
    for text in texts:
        framed = F.pad(F.pad(text, (0, 1), value=gpt.stop_text_token), (1, 0), value=gpt.start_text_token)
        emb = gpt.text_embedding(framed) + gpt.text_pos_embedding(framed)
        prefixes.append(torch.cat([latent, emb], dim=1)[0])
    longest = max(p.shape[0] for p in prefixes)
    prefix = prefixes[0].new_zeros(len(prefixes), longest, prefixes[0].shape[-1])
    mask = torch.zeros(len(prefixes), longest + 1, dtype=torch.long, device=latent.device)
    for row, emb in enumerate(prefixes):
        prefix[row, longest - emb.shape[0] :] = emb
        mask[row, longest - emb.shape[0] :] = 1
    return prefix, mask


def _row_latent(gpt: Any, latent: torch.Tensor, text: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """One row's GPT latents (on the CPU) for its generated codes, cut after its first stop token as the row alone
    would have ended."""
    stops = (codes[0] == gpt.stop_audio_token).nonzero()
    if len(stops):
        codes = codes[:, : int(stops[0]) + 1]
    device = text.device
    expected = torch.tensor([codes.shape[-1] * gpt.code_stride_len], device=device)
    lengths = torch.tensor([text.shape[-1]], device=device)
    return gpt(text, lengths, codes, expected, cond_latents=latent, return_attentions=False, return_latent=True).cpu()


class Speech(tuple):
    """synthesize's result: (sample_rate, float32 samples), as a tuple, that also says which sampling `settings` it
    was generated with and the `warnings` about them (a setting of the voice's ready/config.json that could not be
    used, so the base model's was: the file, the setting and its value named), with a report per piece of the text
    (`sentences`: utils.model.long_text.SentenceReport) and a line on what was checked (`checks`)."""

    sample_rate: int
    wav: np.ndarray
    settings: dict[str, Any]
    warnings: list[str]
    sentences: list[Any]
    checks: str

    def __new__(
        cls,
        sample_rate: int,
        wav: np.ndarray,
        settings: dict[str, Any],
        warnings: list[str],
        sentences: list[Any] | None = None,
        checks: str = "",
    ) -> Speech:
        speech = super().__new__(cls, (sample_rate, wav))
        speech.sample_rate, speech.wav, speech.settings, speech.warnings = sample_rate, wav, settings, warnings
        speech.sentences, speech.checks = list(sentences or []), checks
        return speech


def synthesize(
    model_path: str | os.PathLike,
    text: str,
    *,
    language: str | None = None,
    reference_wav: str | os.PathLike | list[str | os.PathLike] | None = None,
    temperature: float | None = None,
    length_penalty: float | None = None,
    repetition_penalty: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    speed: float = 1.0,
    max_audio_tokens: int | None = None,
    seed: int | None = None,
    output_wav: str | os.PathLike | None = None,
    tries: int = 1,
    progress: long_text.Progress | None = None,
    voice: str | None = None,
) -> Speech:
    """Synthesize `text` with a run's voice; returns (sample_rate, float32 samples), a `Speech` whose `.settings`
    are the sampling settings used and `.warnings` what was wrong with those the voice's files hold, and writes
    `output_wav` when given. `max_audio_tokens` caps the length (~21.5 tokens per second of speech);
    `seed` makes the sampling repeatable (the same text, reference and seed give the same audio). A sampling
    setting left None is the voice's own (ready/config.json: chosen at the end of its run, or the base model's; a
    value there outside its range is not used: the base model's is, with a warning naming the file and setting).
    A setting given outside its range (utils.model.sampling: temperature 0.01-2, speed 0.25-4...) is a ValueError
    naming it, before anything is loaded.

    Any length (up to utils.model.long_text.MAX_TEXT_CHARS): the text is spoken sentence by sentence and joined with
    pauses that follow its punctuation (utils.model.long_text); `max_audio_tokens` then caps each piece. `tries` > 1
    checks each sentence as it is spoken (Whisper, stop, length) and speaks a failing one again with seed + 1, + 2...,
    keeping the best; `.sentences` reports each piece, `progress(done, total, message)` follows them.

    `voice`: one of the named voices of a run trained on several speakers (utils.model.named_voices): its reference
    clips and, unless `language` is given, its language."""
    given = sampling.checked_all(
        {
            "temperature": temperature,
            "length_penalty": length_penalty,
            "repetition_penalty": repetition_penalty,
            "top_k": top_k,
            "top_p": top_p,
        }
    )
    speed = sampling.checked("speed", speed)
    max_audio_tokens = None if max_audio_tokens is None else sampling.checked("max_audio_tokens", max_audio_tokens)
    seed = None if seed is None else sampling.checked("seed", seed)
    text = long_text.checked_text(text)
    tries = long_text.checked_tries(tries)
    named = named_voice(voice_ready_dir(model_path), voice) if voice else ([], "")
    loaded = load_voice(model_path)
    reference = reference_paths(reference_wav) or named[0] or voice_references(loaded.ready_dir)
    check_reference(reference)
    frontend = current_frontend(loaded, language or named[1] or None)
    model = loaded.model
    pieces = long_text.prepared_pieces(text, frontend, model)
    own = read_inference_settings(loaded.ready_dir)
    # Only the voice's settings this call uses: a bad temperature in the file is no matter when one is given.
    warnings = [why for name, why in own.problems.items() if given.get(name) is None]
    for why in warnings:
        log.warning("%s", why)
    settings = {**own.values, **{k: v for k, v in given.items() if v is not None}}
    with synthesis_lock:
        latent, speaker = conditioning_latents(model, reference)

    def generate(prepared: str, piece_seed: int, cap: int | None) -> tuple[np.ndarray, bool]:
        with synthesis_lock:  # a piece at a time: the speech server may speak between two pieces of a long text
            return generate_piece(
                model,
                prepared,
                frontend.language,
                latent,
                speaker,
                seed=piece_seed,
                max_audio_tokens=cap,
                speed=speed,
                **settings,
            )

    spoken = long_text.speak(
        pieces,
        generate,
        frontend=frontend,
        ready_dir=loaded.ready_dir,
        rate=loaded.sample_rate,
        seed=seed,
        tries=tries,
        speed=speed,
        max_audio_tokens=max_audio_tokens,
        progress=progress,
    )
    if output_wav:
        write_wav(output_wav, spoken.wav, loaded.sample_rate)
    used = {**settings, "speed": speed}
    return Speech(loaded.sample_rate, spoken.wav, used, warnings, spoken.sentences, spoken.checks)
