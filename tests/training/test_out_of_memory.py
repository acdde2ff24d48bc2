"""An out-of-memory error never loses a run (utils.training.loop.oom, micro_steps; quality_eval's generation batch).

The error is injected by a real forward pre-hook that raises torch.OutOfMemoryError (the exception CUDA's
allocator raises; on a CPU run the same type) when the GPT is given more clips than "fit"; the runs are the real
`train_gpt` on the tiny model with coqui's trainer. Nothing of the recovery is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from TTS.tts.layers.xtts.gpt import GPT
from TTS.tts.layers.xtts.trainer.dataset import XTTSDataset

from tests.helpers import write_clip, write_dataset
from utils.files import read_jsonl
from utils.gpt_train import TrainResult, train_gpt
from utils.training.inputs.dataset import FAILURES_KEY, _item
from utils.training.loop.oom import MicroBatching, Pieces, merge_losses

FAST = dict(version="tiny", language="en", num_workers=0, print_step=50, quality_eval=0, enable_mixed_precision=False)


class InjectedOutOfMemory:
    """A global forward pre-hook on the run's GPT (the first one that trains: not the memory planner's): raises
    torch.OutOfMemoryError for more than `fits` clips, or for any batch after `after` forwards. `rows` lists the
    clips of each training forward it saw."""

    def __init__(self, fits: int = 10**6, after: int | None = None) -> None:
        self.fits, self.after = fits, after
        self.rows: list[int] = []
        self.target: GPT | None = None

    def __call__(self, module: torch.nn.Module, args: tuple) -> None:
        if not isinstance(module, GPT) or not torch.is_grad_enabled() or not args:
            return
        self.target = self.target or module
        if module is not self.target:
            return
        rows = int(args[0].shape[0])
        self.rows.append(rows)
        if rows > self.fits or (self.after is not None and len(self.rows) > self.after):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB (injected by the test)")

    def __enter__(self) -> InjectedOutOfMemory:
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()


def run_json(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text())


def _collated(lengths: list[tuple[int, int]]) -> dict:
    items = []
    for i, (text, samples) in enumerate(lengths):
        wav = torch.randn(1, samples)
        cond = torch.randn(1, 4000)
        items.append(
            _item(
                torch.arange(5, 5 + text, dtype=torch.int32),
                f"clip_{i}.wav",
                wav,
                cond,
                torch.nan,
                [10 * i, 10 * i + 300],
            )
        )
        items[-1][FAILURES_KEY] = [f"bad_{i}.wav: unreadable"] if i == 0 else []
    batch = XTTSDataset.collate_fn(None, [dict(item) for item in items])  # coqui's collate uses no dataset state
    batch[FAILURES_KEY] = [f for item in items for f in item[FAILURES_KEY]]
    return batch, items


def test_a_piece_is_what_collating_its_clips_alone_gives():
    batch, items = _collated([(7, 9000), (12, 4000), (3, 6000)])
    pieces = MicroBatching(batch_size=3, grad_acumm=1, micro=2).split(batch)
    assert isinstance(pieces, Pieces) and pieces.rows == 3 and len(pieces) == 2
    for piece, rows in zip(pieces, ([0, 1], [2]), strict=True):
        alone = XTTSDataset.collate_fn(None, [dict(items[i]) for i in rows])
        for key in ("wav", "wav_lengths", "padded_text", "text_lengths", "conditioning", "cond_idxs"):
            torch.testing.assert_close(piece[key], alone[key], msg=key)
        assert piece["filenames"] == [f"clip_{i}.wav" for i in rows]
    assert pieces[0][FAILURES_KEY] == ["bad_0.wav: unreadable"] and pieces[1][FAILURES_KEY] == []
    assert MicroBatching(batch_size=3, grad_acumm=1).split(batch) is batch  # whole batches unless halved


def test_halving_keeps_the_effective_batch_and_stops_at_one_clip():
    batching = MicroBatching(batch_size=4, grad_acumm=2)
    event = batching.halve(7)
    assert (event["batch_before"], event["batch_after"]) == (4, 2)
    assert (event["grad_acumm_before"], event["grad_acumm_after"]) == (2, 4)
    assert event["message"].startswith("Out of memory at step 7: batch 4 -> 2 (grad_acumm 2 -> 4, same effective")
    assert batching.halve(9)["batch_after"] == 1 and batching.halve(10) is None
    odd = MicroBatching(batch_size=5, grad_acumm=1)
    assert odd.halve(1)["batch_after"] == 3 and odd.pieces == 2  # 3 + 2 clips: all five still trained


def test_the_pieces_losses_add_up_to_the_batch_loss():
    # coqui divides each piece's "loss" by grad_accum_steps / share; its terms are averaged by share.
    merged = merge_losses(
        [({"loss": 0.75 * 2.0 / 2, "loss_mel_ce": 2.0}, 0.75), ({"loss": 0.25 * 6.0 / 2, "loss_mel_ce": 6.0}, 0.25)]
    )
    assert merged["loss"] == pytest.approx((0.75 * 2.0 + 0.25 * 6.0) / 2)
    assert merged["loss_mel_ce"] == pytest.approx(3.0)


# --- the real trainer ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recovered(tiny_base, tmp_path_factory):
    """batch 4 x grad_acumm 2 where only 2 clips "fit": the run recovers at its first batch of 4."""
    root = tmp_path_factory.mktemp("oom-run")
    csv_path = write_dataset(root / "data", n=12)
    with InjectedOutOfMemory(fits=2) as injected:
        result = train_gpt(
            train_csv=str(csv_path), output_path=str(root / "out"), num_epochs=2, batch_size=4, grad_acumm=2, **FAST
        )
    return result, injected, csv_path


@pytest.mark.slow
def test_an_out_of_memory_step_is_trained_again_in_halves_and_the_run_finishes(recovered):
    result, injected, _ = recovered
    record = run_json(result.run_dir)
    assert record["status"] == "finished" and Path(result.ready_dir, "model.pth").is_file()
    assert record["micro_batch_size"] == 2
    (event,) = record["out_of_memory"]
    assert (event["batch_before"], event["batch_after"], event["grad_acumm_after"]) == (4, 2, 4)
    assert "injected by the test" in event["error"]
    assert json.loads(Path(result.run_dir, "spec.json").read_text())["micro_batch_size"] == 2
    # One forward of 4 clips failed; every later forward had 2 clips at most.
    failed = injected.rows.index(4)
    assert max(injected.rows[failed + 1 :]) == 2 and injected.rows.count(4) == 1
    # Nothing that counts steps changed: 10 training clips at batch 4 are 3 steps an epoch, 6 in all.
    records = read_jsonl(Path(result.run_dir) / "metrics.jsonl")
    steps = [r["step"] for r in records if r["type"] == "train"]
    assert steps == [1, 2, 3, 4, 5, 6] and record["total_steps"] == 6
    assert all(r["loss"] is not None for r in records if r["type"] == "train")
    said = [r for r in records if r["type"] == "status" and "Out of memory" in (r.get("message") or "")]
    assert len(said) == 1 and said[0]["status"] == "running" and said[0]["micro_batch_size"] == 2
    assert f"Out of memory at step {event['step']}: batch 4 -> 2" in said[0]["message"]


@pytest.mark.slow
def test_the_page_shows_the_message_while_the_run_goes_on(recovered, tmp_path):
    from utils.training.process.runner import TrainingRunner

    result, _, _ = recovered
    runner = TrainingRunner(tmp_path)
    for record in read_jsonl(Path(result.run_dir) / "metrics.jsonl"):
        if record["type"] == "status" and record["status"] != "finished":
            runner._apply({"type": "event", "record": record})
    assert runner.state.message.startswith("Out of memory at step")
    from webui.run_view import progress, status_markdown

    shown = status_markdown(runner.state, progress(read_jsonl(Path(result.run_dir) / "metrics.jsonl")))
    assert "Out of memory at step" in shown and "batch 4 -&gt; 2" in shown  # the status panel's text, escaped


@pytest.mark.slow
def test_a_resume_continues_at_the_micro_batch_the_run_reached(recovered):
    result, _, csv_path = recovered
    with InjectedOutOfMemory(fits=2) as injected:
        again = train_gpt(
            train_csv=str(csv_path),
            output_path=str(Path(result.run_dir).parent),
            num_epochs=3,
            batch_size=4,
            grad_acumm=2,
            resume_from=result.run_dir,
            **FAST,
        )
    record = run_json(again.run_dir)
    assert record["status"] == "finished" and record["steps_done"] == 9
    assert injected.rows and max(injected.rows) == 2  # no batch of 4 tried: no new error
    assert len(record["out_of_memory"]) == 1 and record["micro_batch_size"] == 2


@pytest.mark.slow
def test_out_of_memory_at_one_clip_stops_with_a_checkpoint_and_what_fits(tiny_base, tmp_path):
    from utils.training.process.runner import TrainingRunner
    from utils.training.process.worker import result_record

    csv_path = write_dataset(tmp_path / "data", n=12)
    with InjectedOutOfMemory(after=3) as injected:  # three steps of 2 clips, then nothing fits
        result = train_gpt(
            train_csv=str(csv_path), output_path=str(tmp_path / "out"), num_epochs=2, batch_size=2, grad_acumm=1, **FAST
        )
    record = run_json(result.run_dir)
    assert record["status"] == "stopped" and injected.rows[-2:] == [2, 1]
    assert record["stop_checkpoint"].endswith("checkpoint_3.pth") and Path(record["stop_checkpoint"]).is_file()
    assert Path(result.ready_dir, "model.pth").is_file()
    halved, stopped = record["out_of_memory"]
    assert halved["batch_after"] == 1 and stopped["stopped"] is True and stopped["step"] == 4
    reason = record["stop_reason"]
    assert reason.startswith("Out of memory at step 4 with one clip per micro-batch")
    assert "Fit my GPU for" in reason and "batch_size=" in reason  # the memory planner's answer, in words
    assert record["message"].startswith(reason)
    runner = TrainingRunner(tmp_path / "page")
    runner._apply(result_record(TrainResult(**{k: getattr(result, k) for k in TrainResult._fields})))
    assert runner.state.message == reason  # the page says why, not just "Stopped."


@pytest.mark.slow
def test_out_of_memory_at_one_clip_on_the_first_step_says_so_and_promises_no_checkpoint(tiny_base, tmp_path):
    csv_path = write_dataset(tmp_path / "data", n=6)
    with InjectedOutOfMemory(fits=0), pytest.raises(RuntimeError) as stopped:  # not even one clip fits
        train_gpt(train_csv=str(csv_path), output_path=str(tmp_path / "out"), num_epochs=1, batch_size=2, **FAST)
    said = str(stopped.value)
    assert "before its first step (Out of memory at step 1 with one clip per micro-batch" in said, said
    (run_dir,) = (tmp_path / "out").glob("en-tiny-*")
    record = run_json(run_dir)
    assert "Out of memory" in record["message"] and not list(run_dir.glob("*.pth"))
    event = record["out_of_memory"][-1]
    assert event["stopped"] and "the run stopped, nothing trained" in event["message"]
    assert "with a checkpoint" not in event["message"] and "ready/model.pth" not in event["message"]


@pytest.mark.slow
def test_an_eval_batch_whose_formatting_runs_out_of_memory_is_formatted_in_halves(tiny_base, tmp_path):
    """coqui formats the eval loader's whole batch (mel spectrograms, DVAE codes) before its step; an error there
    stopped the run. The hook refuses more than 2 clips to the mel spectrograms (of the conditioning and of the DVAE
    codes) while evaluating."""
    from TTS.tts.layers.tortoise.arch_utils import TorchMelSpectrogram

    csv_path = write_dataset(tmp_path / "data", n=8)
    eval_csv = write_dataset(tmp_path / "held-out", n=4, seed_offset=50)
    rows: list[int] = []

    def hook(module: torch.nn.Module, args: tuple) -> None:
        if isinstance(module, TorchMelSpectrogram) and torch.is_inference_mode_enabled():
            rows.append(int(args[0].shape[0]))
            if rows[-1] > 2:
                raise torch.OutOfMemoryError("CUDA out of memory (injected by the test: the eval batch's mels)")

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        result = train_gpt(
            train_csv=str(csv_path),
            eval_csv=str(eval_csv),
            output_path=str(tmp_path / "out"),
            num_epochs=2,
            batch_size=4,
            grad_acumm=1,
            **FAST,
        )
    finally:
        handle.remove()
    record = run_json(result.run_dir)
    assert record["status"] == "finished", record.get("error")
    (event,) = record["out_of_memory"]
    assert (event["batch_before"], event["batch_after"]) == (4, 2) and event["error"].startswith("eval loss:")
    assert rows[0] == 4 and max(rows[1:]) == 2, rows  # the whole eval batch once, then its halves
    evals = [r for r in read_jsonl(Path(result.run_dir) / "metrics.jsonl") if r["type"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4] and all(r["eval_loss"] is not None for r in evals)


# --- the scored evaluation's generation ------------------------------------------------------------------


@pytest.fixture(scope="module")
def evaluator_parts(tiny_base, tmp_path_factory):
    from tests.training.model_helpers import build_model
    from utils.training.evaluation.quality_eval import EvalSentence

    folder = tmp_path_factory.mktemp("oom-eval")
    model, _ = build_model(tiny_base, folder)
    reference = write_clip(folder / "reference.wav", 3.0, seed=4)
    texts = ["the quick brown fox", "one two three", "hello world"]
    sentences = [EvalSentence(t, t, str(reference), 1.0) for t in texts]
    return model, sentences, reference, folder


def _generation_rows(model: torch.nn.Module, fits: int) -> tuple[list[int], torch.utils.hooks.RemovableHandle]:
    """A hook on the GPT's audio-token embedding: each decoding step's rows; more than `fits` raise."""
    rows: list[int] = []

    def hook(module: torch.nn.Module, args: tuple) -> None:
        if not torch.is_grad_enabled():
            rows.append(int(args[0].shape[0]))
            if rows[-1] > fits:
                raise torch.OutOfMemoryError("CUDA out of memory (injected by the test: the KV cache)")

    return rows, model.xtts.gpt.mel_embedding.register_forward_pre_hook(hook)


@pytest.mark.slow
@pytest.mark.parametrize("fits, batch, expected", [(1, 0, 1), (10, 2, 2)])
def test_generation_halves_its_batch_after_out_of_memory(evaluator_parts, fits, batch, expected):
    from utils.training.evaluation.quality_eval import QualityEvaluator

    model, sentences, reference, folder = evaluator_parts
    evaluator = QualityEvaluator(
        sentences, folder, reference, "en", seed=3, whisper_model="", max_audio_tokens=4, generation_batch=batch
    )
    rows, handle = _generation_rows(model, fits)
    try:
        spoken = evaluator.generate(model.xtts, 5)
        later = len(rows)
        evaluator.generate(model.xtts, 10)
    finally:
        handle.remove()
    assert spoken.error is None and len(spoken.latents) == 3
    assert spoken.generation_batch == expected == evaluator.generation_batch
    assert max(rows[later:]) == expected  # the next evaluation starts at the batch that fitted
    if fits == 1:
        assert rows[0] == 3 and max(rows[1:later]) == 1  # all three tried together once, then one at a time


@pytest.mark.slow
def test_generation_out_of_memory_at_one_sentence_skips_the_scoring_with_its_reason(evaluator_parts):
    from utils.training.evaluation.quality_eval import QualityEvaluator

    model, sentences, reference, folder = evaluator_parts
    evaluator = QualityEvaluator(sentences, folder, reference, "en", seed=3, whisper_model="", max_audio_tokens=4)
    _, handle = _generation_rows(model, 0)
    try:
        quality = evaluator.evaluate(model.xtts, 5)
    finally:
        handle.remove()
    assert quality["cer"] is None and quality["similarity"] is None and quality["files"] == []
    (reason,) = quality["reasons"]
    assert reason.startswith("generation failed: out of memory with one sentence at a time, so not scored")
    assert quality["generation_batch"] == 1
