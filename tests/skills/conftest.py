"""Fixtures for the dataset tests: a tokenizer trained here (no download), task files, a reward ledger."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from skill_rows import CHAT_TEMPLATE, COPY, program, reference


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A WordLevel tokenizer with a chat template, trained on the skill cards and saved like a model's."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from rubric_rl.skills import bundled_skills

    corpus = [p.read_text() for p in bundled_skills()] + [reference(i) for i in range(3)] + [program("a"), COPY]
    specials = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=specials))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    fast.chat_template = CHAT_TEMPLATE
    out = tmp_path_factory.mktemp("tokenizer")
    fast.save_pretrained(str(out))
    return out


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    """Twelve tasks of no level (trainable) and two levelled ones (KernelBench evaluation problems)."""
    rows = [{"level": None, "problem_id": i, "name": f"relu_scale_{i}", "code": reference(i)} for i in range(12)]
    rows += [{"level": 1, "problem_id": i, "name": f"{i}_KB_like", "code": reference(20 + i)} for i in (1, 2)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def make_ledger(tmp_path: Path) -> Callable[[list[dict[str, Any]]], Path]:
    """``make_ledger(rows)``: a run directory whose ledger.jsonl holds the rows (RewardRecord fields)."""

    def make(rows: list[dict[str, Any]]) -> Path:
        run = tmp_path / "run"
        run.mkdir(exist_ok=True)
        (run / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return run

    return make
