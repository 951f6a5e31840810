"""A tiny model folder made in the test, never downloaded: a byte-level BPE tokenizer trained on a given corpus
(lossless decoding of any text, as Qwen's) and, optionally, a two-layer Qwen2-shaped ``config.json``. Recipes
estimate memory from the config, verl and the agent loop load the tokenizer with ``AutoTokenizer``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CHATML_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def save_tokenizer(
    path: Path,
    corpus: Iterable[str],
    *,
    vocab_size: int,
    specials: Sequence[str] = CHATML_SPECIALS,
    eos: str = "<|im_end|>",
    pad: str = "<|endoftext|>",
    chat_template: str | None = CHATML_TEMPLATE,
) -> int:
    """Train a byte-level BPE tokenizer on ``corpus`` and save it into ``path``; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(corpus), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token=pad)
    if chat_template is not None:
        tok.chat_template = chat_template
    path.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(path)
    return core.get_vocab_size()


def save_qwen2_config(path: Path, vocab_size: int, **overrides: Any) -> None:
    """A two-layer Qwen2 ``config.json`` (hidden size 64) beside the tokenizer: transformers then picks
    Qwen2Tokenizer for the folder, as for the real models."""
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": vocab_size,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        **overrides,
    }
    (path / "config.json").write_text(json.dumps(config))
