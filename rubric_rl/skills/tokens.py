"""Prompt lengths in the tokens of the model a recipe trains.

verl drops (``filter_overlong_prompts``) or fails on prompts over ``data.max_prompt_length``, measured as the
chat template applied with the generation prompt, tokenized. The datasets measure the same way, with the same
tokenizer, so that a row kept here is a row verl keeps, and the count of dropped rows is known before training.
"""

from __future__ import annotations

from typing import Any


class TokenizerError(ValueError):
    """The tokenizer cannot be loaded or has no chat template."""


def load_tokenizer(name_or_path: str) -> Any:
    """A Hugging Face tokenizer by model name or local path (``transformers.AutoTokenizer``)."""
    try:
        from transformers import AutoTokenizer  # deferred: heavy, and only the train extra installs it
    except ImportError as e:
        raise TokenizerError("measuring prompt lengths needs transformers (pip install 'rubric-rl[train]')") from e
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except Exception as e:  # transformers raises OSError, ValueError, HF hub errors...
        raise TokenizerError(f"tokenizer {name_or_path!r}: cannot load ({type(e).__name__}: {e})") from e
    if not getattr(tokenizer, "chat_template", None):
        raise TokenizerError(f"tokenizer {name_or_path!r} has no chat template (verl applies one to every prompt)")
    return tokenizer


def _token_ids(encoded: Any) -> list[int]:
    """``apply_chat_template(tokenize=True)`` returns a list or a BatchEncoding depending on the version."""
    ids = encoded["input_ids"] if isinstance(encoded, dict) or hasattr(encoded, "keys") else encoded
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    return list(ids)


def prompt_tokens(tokenizer: Any, messages: list[dict[str, str]]) -> int:
    """Tokens of a chat prompt as verl counts them (template applied, generation prompt added)."""
    return len(_token_ids(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)))


def text_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of plain text (no special tokens): the feedback renderer's counter."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])
