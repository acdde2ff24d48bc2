"""The text vocabulary of a run: the base model's, or one extended for a language XTTS does not know.

Extending means: the language token (`[amh]`), every character of the new text as a base token (no
`[UNK]`), and new BPE tokens and merges learned from the dataset's text with the `tokenizers`
library, appended after the base vocabulary and merges. The base ids and merge order stay as they
are, so the 17 languages tokenize exactly as before and their embeddings stay valid. The GPT's text
embedding and text head then grow to the new size; new rows start from the statistics of the
trained rows.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from utils.files import write_text_atomic

VOCAB_FILE = "vocab.json"
SPECIAL_TOKEN = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}


@dataclass
class VocabChoice:
    path: Path
    languages: list[str]
    language: str
    base_size: int
    size: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def extended(self) -> bool:
        return self.size > self.base_size

    def adapt_model(self, model: Any) -> None:
        """Grow the GPT's text embedding and head to this vocab, and give the model a tokenizer that
        knows the language. `model` is coqui's GPTTrainer built with the base vocab."""
        from utils.text.tokenizer import tokenizer_for

        xtts = model.xtts
        if self.extended:
            resize_text_tokens(xtts.gpt, self.size)
            xtts.args.gpt_number_text_tokens = self.size
            model.config.model_args.gpt_number_text_tokens = self.size
        xtts.tokenizer = tokenizer_for(self.path, self.language)
        model.config.model_args.tokenizer_file = str(self.path)

    def copy_into(self, run_dir: Path) -> Path:
        target = Path(run_dir) / VOCAB_FILE
        if self.path.resolve() != target.resolve():
            shutil.copyfile(self.path, target)
        return target


def _resized_rows(weight: torch.Tensor, size: int) -> torch.Tensor:
    """`weight` grown to `size` rows; new rows ~ N(mean, std) of the existing rows, per column."""
    old = weight.shape[0]
    if size <= old:
        return weight.detach().clone()
    reference = weight.detach().float()
    mean, std = reference.mean(dim=0), reference.std(dim=0)
    new = torch.randn(size - old, *weight.shape[1:], generator=torch.Generator().manual_seed(old)) * std + mean
    return torch.cat([weight.detach(), new.to(weight.dtype)], dim=0)


def resize_text_tokens(gpt: Any, size: int) -> None:
    """Resize coqui's GPT text embedding and text head (weight and bias) to `size` tokens in place."""
    embedding = gpt.text_embedding
    head = gpt.text_head
    new_embedding = torch.nn.Embedding(size, embedding.embedding_dim).to(embedding.weight.device)
    new_embedding.weight.data = _resized_rows(embedding.weight, size)
    new_head = torch.nn.Linear(head.in_features, size, bias=head.bias is not None).to(head.weight.device)
    new_head.weight.data = _resized_rows(head.weight, size)
    if head.bias is not None:
        new_head.bias.data = _resized_rows(head.bias.unsqueeze(1), size).squeeze(1)
    gpt.text_embedding, gpt.text_head = new_embedding, new_head
    gpt.number_text_tokens = size


def _token_texts(texts: list[str], language: str) -> list[str]:
    """The dataset's text as the XTTS tokenizer sees it before BPE (cleaned, spaces as separators)."""
    from utils.text.tokenizer import FineTuneTokenizer

    tokenizer = FineTuneTokenizer()
    return [tokenizer.preprocess_text(text, language) for text in texts]


def _merge_pair(merge: Any) -> tuple[str, str]:
    return tuple(merge.split(" ", 1)) if isinstance(merge, str) else (merge[0], merge[1])  # type: ignore[return-value]


def extend_vocab(base_vocab: Path, language: str, texts: list[str], new_tokens: int, target: Path) -> dict[str, Any]:
    """Write `target`: the base vocab plus the language token, the text's characters and up to
    `new_tokens` BPE tokens (with their merges) learned from `texts`. Returns what was added."""
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.trainers import BpeTrainer

    data = json.loads(Path(base_vocab).read_text(encoding="utf-8"))
    vocab: dict[str, int] = data["model"]["vocab"]
    merges = data["model"]["merges"]
    string_merges = bool(merges) and isinstance(merges[0], str)
    known_merges = {_merge_pair(m) for m in merges}
    next_id = max([*vocab.values(), *(t["id"] for t in data.get("added_tokens", []))]) + 1

    cleaned = _token_texts(texts, language)
    alphabet = sorted({ch for text in cleaned for ch in text if not ch.isspace()})
    learner = Tokenizer(BPE(unk_token="[UNK]"))
    learner.pre_tokenizer = Whitespace()
    learner.train_from_iterator(
        cleaned,
        trainer=BpeTrainer(vocab_size=len(alphabet) + new_tokens, initial_alphabet=alphabet, show_progress=False),
    )
    learned = json.loads(learner.to_str())["model"]

    added_chars, added_tokens, added_merges = [], [], []
    language_token = f"[{language}]"
    for token in [language_token, *alphabet]:
        if token not in vocab:
            vocab[token] = next_id
            next_id += 1
            (added_chars if token != language_token else added_tokens).append(token)
    for pair in (_merge_pair(m) for m in learned["merges"]):
        merged = pair[0] + pair[1]
        if pair in known_merges or pair[0] not in vocab or pair[1] not in vocab:
            continue
        if merged not in vocab:
            vocab[merged] = next_id
            next_id += 1
            added_tokens.append(merged)
        known_merges.add(pair)
        added_merges.append(" ".join(pair) if string_merges else list(pair))
    merges.extend(added_merges)
    if not any(t["content"] == language_token for t in data.get("added_tokens", [])):
        data.setdefault("added_tokens", []).append(
            {"id": vocab[language_token], "content": language_token, **SPECIAL_TOKEN}
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, json.dumps(data, ensure_ascii=False))
    return {
        "language_token": language_token,
        "new_characters": len(added_chars),
        "new_bpe_tokens": len(added_tokens) - 1,
        "new_merges": len(added_merges),
        "size": next_id,
    }


def vocab_size(path: Path) -> int:
    """Number of text token ids (coqui's get_number_tokens: highest id + 1)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    ids = [*data["model"]["vocab"].values(), *(t["id"] for t in data.get("added_tokens", []))]
    return max(ids) + 1


def prepare_vocab(
    base_vocab: Path,
    base_config: dict[str, Any],
    language: str,
    texts: list[str],
    output_path: Path,
    new_tokens: int,
    run_vocab: Path | None = None,
) -> VocabChoice:
    """The vocab for a run: the base one when the model knows `language`, else an extended copy.

    Extended vocabs are content-addressed under `output_path/vocabs/`, so resuming a run (same base
    vocab, same text) reuses the same file.
    """
    base_vocab = Path(base_vocab)
    languages = list(base_config.get("languages") or [])
    base_size = vocab_size(base_vocab)
    if run_vocab is not None and run_vocab.is_file() and language not in languages:
        # Resuming: the checkpoint's embeddings match the run's vocab, whatever the text is now.
        size = vocab_size(run_vocab)
        return VocabChoice(
            run_vocab,
            [*languages, language],
            language,
            base_size,
            size,
            {
                "base_vocab": str(base_vocab),
                "extended": True,
                "path": str(run_vocab),
                "size": size,
                "base_size": base_size,
                "reused_from_run": True,
            },
        )
    if language in languages:
        return VocabChoice(
            base_vocab, languages, language, base_size, base_size, {"base_vocab": str(base_vocab), "extended": False}
        )
    digest = hashlib.sha256()
    digest.update(base_vocab.read_bytes())
    digest.update(f"{language}|{new_tokens}".encode())
    for text in texts:
        digest.update(text.encode("utf-8") + b"\n")
    target = Path(output_path) / "vocabs" / f"{language}-{digest.hexdigest()[:16]}.json"
    info: dict[str, Any] = {"base_vocab": str(base_vocab), "extended": True}
    if not target.is_file():
        info.update(extend_vocab(base_vocab, language, texts, new_tokens, target))
    size = vocab_size(target)
    info.update(path=str(target), size=size, base_size=base_size)
    return VocabChoice(target, [*languages, language], language, base_size, size, info)
