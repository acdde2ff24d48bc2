"""A language XTTS does not know (Amharic): extended vocab, resized embeddings, one front end end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.helpers import write_dataset
from utils.model.vocab import extend_vocab, prepare_vocab, resize_text_tokens, vocab_size
from utils.text.amharic import amharic_g2p, normalize_amharic
from utils.text.tokenizer import FineTuneTokenizer

AMHARIC = [
    "ሰላም ለዓለም።",
    "እንደምን አደርክ?",
    "ቡና እጠጣለሁ።",
    "አዲስ አበባ ትልቅ ከተማ ናት።",
    "ኢትዮጵያ ውብ ሀገር ናት።",
    "፲፪ ሰዎች መጡ።",
    "ቋንቋ ትምህርት ቤት ይማራሉ።",
    "እናት እና አባት ቤት ናቸው።",
    "ልጆች በ2024 ትምህርት ጀመሩ።",
]


@pytest.fixture(scope="module")
def extended(tmp_path_factory, tiny_base):
    target = tmp_path_factory.mktemp("vocab") / "amh.json"
    texts = [normalize_amharic(t) for t in AMHARIC]
    info = extend_vocab(tiny_base.vocab, "amh", texts * 4, 200, target)
    return target, info, texts


def test_extended_vocab_encodes_amharic_without_unk_and_decodes_it_back(extended):
    path, info, texts = extended
    assert info["language_token"] == "[amh]" and info["new_bpe_tokens"] > 10 and info["new_characters"] > 20
    tokenizer = FineTuneTokenizer(path)
    for text in texts:
        ids = tokenizer.encode(text, "amh")
        assert 1 not in ids, f"[UNK] in {text}"
        assert tokenizer.decode(ids) == f"[amh]{text}"
        characters = len(text.replace(" ", "")) + text.count(" ")
        assert len(ids) < characters + 1, f"no fewer tokens than one per character for {text!r}"


def test_base_languages_tokenize_exactly_as_before(extended, tiny_base):
    from TTS.tts.layers.xtts.tokenizer import VoiceBpeTokenizer

    path, _, _ = extended
    before, after = VoiceBpeTokenizer(str(tiny_base.vocab)), FineTuneTokenizer(path)
    for text, lang in [("The quick brown fox jumps over the lazy dog.", "en"), ("Voilà un été très chaud.", "fr")]:
        assert after.encode(text, lang) == before.encode(text, lang)
    base = json.loads(tiny_base.vocab.read_text())["model"]
    grown = json.loads(path.read_text())["model"]
    assert all(grown["vocab"][token] == idx for token, idx in base["vocab"].items()), "base ids unchanged"
    assert grown["merges"][: len(base["merges"])] == base["merges"], "base merges first, in order"


def test_prepare_vocab_keeps_known_languages_and_reuses_extended_files(tmp_path, tiny_base):
    config = json.loads(tiny_base.config.read_text())
    known = prepare_vocab(tiny_base.vocab, config, "en", ["hello"], tmp_path, 100)
    assert known.path == tiny_base.vocab and not known.extended
    first = prepare_vocab(tiny_base.vocab, config, "amh", AMHARIC, tmp_path, 100)
    again = prepare_vocab(tiny_base.vocab, config, "amh", AMHARIC, tmp_path, 100)
    assert first.extended and first.path == again.path and "amh" in first.languages
    assert first.size == vocab_size(first.path) > known.size


def test_resize_keeps_trained_rows_and_starts_new_ones_from_their_statistics():
    from TTS.tts.layers.xtts.gpt import GPT

    torch.manual_seed(0)
    gpt = GPT(
        layers=1,
        model_dim=32,
        heads=2,
        number_text_tokens=100,
        num_audio_tokens=1026,
        start_audio_token=1024,
        stop_audio_token=1025,
        use_perceiver_resampler=True,
    )
    with torch.no_grad():
        gpt.text_embedding.weight.mul_(3.0).add_(1.5)
    old_embedding = gpt.text_embedding.weight.detach().clone()
    old_head, old_bias = gpt.text_head.weight.detach().clone(), gpt.text_head.bias.detach().clone()
    resize_text_tokens(gpt, 2100)
    assert gpt.text_embedding.weight.shape == (2100, 32) and gpt.text_head.weight.shape == (2100, 32)
    assert gpt.text_head.bias.shape == (2100,)
    assert torch.equal(gpt.text_embedding.weight[:100], old_embedding)
    assert torch.equal(gpt.text_head.weight[:100], old_head) and torch.equal(gpt.text_head.bias[:100], old_bias)
    new_rows = gpt.text_embedding.weight[100:].detach()
    assert new_rows.mean().item() == pytest.approx(old_embedding.mean().item(), abs=0.15)
    assert new_rows.std().item() == pytest.approx(old_embedding.std().item(), rel=0.15)
    assert gpt.text_embedding.weight.requires_grad


def test_amharic_has_a_character_limit_and_long_lines_are_flagged(tmp_path):
    from utils.data.validation import validate_dataset

    assert FineTuneTokenizer().char_limits["amh"] == 150
    csv_path = write_dataset(tmp_path / "data", n=3, texts=["ሰላም ለዓለም።" * 20, "ቡና እጠጣለሁ።", "እናት እና አባት"])
    report = validate_dataset(csv_path, language="am")
    assert report.language == "amh"
    long_rows = [p for p in report.problems if "character limit" in p.reason]
    assert [p.line for p in long_rows] == [2] and "150-character limit for 'amh'" in long_rows[0].reason
    assert any("new language token [amh]" in p.reason for p in report.problems if p.line == 0)


@pytest.mark.slow
def test_amharic_run_with_g2p_reloads_and_inference_uses_the_same_front_end(tmp_path, tiny_base):
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts

    from utils.gpt_train import train_gpt
    from utils.model.inference import synthesize

    csv_path = write_dataset(tmp_path / "data", n=10, texts=AMHARIC)
    common = dict(
        version="tiny",
        num_epochs=1,
        batch_size=4,
        grad_acumm=1,
        enable_mixed_precision=False,
        num_workers=0,
        print_step=50,
        quality_eval=0,
    )
    result = train_gpt(
        language="am", use_amharic_g2p=True, train_csv=str(csv_path), output_path=str(tmp_path / "out"), **common
    )
    assert result.status == "finished"
    run = json.loads((Path(result.run_dir) / "run.json").read_text())
    assert run["language"] == "amh" and run["text_frontend"] == {"language": "amh", "amharic_g2p": True}
    assert run["vocab"]["extended"] and run["vocab"]["size"] > run["vocab"]["base_size"]
    ready = Path(result.ready_dir)
    info = json.loads((ready / "finetune.json").read_text())
    assert info["text_frontend"] == {"language": "amh", "amharic_g2p": True}

    # The slim model reloads into coqui's Xtts with the extended vocab: no shape errors.
    config = XttsConfig()
    config.load_json(str(ready / "config.json"))
    model = Xtts(config)
    model.load_checkpoint(config, checkpoint_dir=str(ready), eval=True)
    assert model.gpt.text_embedding.weight.shape[0] == run["vocab"]["size"]
    assert "amh" in config.languages

    # Inference applies the stored front end: the model receives normalised, phonemised text (synthesize generates
    # each piece of a text with generate_latents).
    import utils.model.inference as inference

    received: list[str] = []
    original = inference.generate_latents

    def recording(model, texts, *args, **kwargs):
        received.extend(texts)
        return original(model, texts, *args, **kwargs)

    inference.generate_latents = recording
    try:
        rate, wav = synthesize(result.run_dir, "፲፪ ሰዎች መጡ።", max_audio_tokens=12)
    finally:
        inference.generate_latents = original
    assert received == [amharic_g2p(normalize_amharic("፲፪ ሰዎች መጡ።"))]
    assert rate == 24000 and wav.size > 0

    # A second run starting from the fine-tuned model keeps the extended vocab and shapes.
    again = train_gpt(
        language="amh",
        use_amharic_g2p=True,
        custom_model=str(ready / "model.pth"),
        train_csv=str(csv_path),
        output_path=str(tmp_path / "out2"),
        **common,
    )
    assert again.status == "finished"
    assert json.loads((Path(again.run_dir) / "run.json").read_text())["vocab"]["extended"] is False


def test_resuming_reuses_the_runs_vocab_even_when_the_text_changed(tmp_path, tiny_base):
    config = json.loads(tiny_base.config.read_text())
    first = prepare_vocab(tiny_base.vocab, config, "amh", AMHARIC[:4], tmp_path, 100)
    (tmp_path / "run").mkdir()
    run_vocab = first.copy_into(tmp_path / "run")
    resumed = prepare_vocab(tiny_base.vocab, config, "amh", AMHARIC + ["ጨረቃ ፀሐይ"], tmp_path, 100, run_vocab=run_vocab)
    assert resumed.path == run_vocab and resumed.size == first.size and resumed.info["reused_from_run"]


def test_whisper_gets_the_codes_it_knows():
    from utils.text.languages import whisper_language

    assert [whisper_language(c) for c in ("amh", "am", "zh-cn", "en", "auto", "")] == [
        "am",
        "am",
        "zh",
        "en",
        None,
        None,
    ]
