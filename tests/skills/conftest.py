"""Fixtures for the dataset tests: a tokenizer trained here (no download), task files, a reward ledger."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"relu, then scale{doc}\"\"\"

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * {scale}


def get_inputs():
    return [torch.randn(8, {width})]


def get_init_inputs():
    return []
"""

PROGRAM = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = "torch::Tensor f(torch::Tensor x) {{ return x; }}  // {tag}"
ext = load_inline(name="ext_{tag}", cpp_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.f(x)
"""

COPY = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, y):
        return torch.relu(y) * 2.0
"""


def reference(i: int) -> str:
    return REFERENCE.format(scale=1.0 + i, width=16 * (i + 1), doc=" again" * i)


def program(tag: str) -> str:
    return PROGRAM.format(tag=tag)


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


def verdict(status: str, **fields: Any) -> dict[str, Any]:
    return {"status": status, "candidate_sha256": "0" * 64, **fields}


def judgment(failed: bool = False) -> dict[str, Any]:
    identity = {"kind": "heuristic", "label": "h", "rubric": "r", "rubric_version": 1, "rubric_hash": "x",
                "code_version": "0"}  # fmt: skip
    return {"identity": identity, "skill": "generate", "candidate_sha256": "0" * 64, "dimensions": [],
            "raw_total": 0.5, "total": 0.5, "judge_failed": failed}  # fmt: skip


@pytest.fixture
def make_ledger(tmp_path: Path) -> Callable[[list[dict[str, Any]]], Path]:
    """``make_ledger(rows)``: a run directory whose ledger.jsonl holds the rows (RewardRecord fields)."""

    def make(rows: list[dict[str, Any]]) -> Path:
        run = tmp_path / "run"
        run.mkdir(exist_ok=True)
        (run / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return run

    return make


def ledger_row(task: int, status: str, score: float, tag: str, **fields: Any) -> dict[str, Any]:
    """One RewardRecord-shaped row for task T-<task>, its prompt rendered by the generate card."""
    from rubric_rl.skills import load_skill

    prompt = load_skill("generate").render(reference=reference(task), backend="cpu")
    verdict_fields = fields.pop("verdict", {})
    row = {
        "schema_version": 1,
        "task_id": f"T-{task}",
        "data_source": "rubric_rl/generate",
        "skill": "generate",
        "prompt": prompt,
        "response": f"Here it is.\n```python\n{program(tag)}```\n",
        "program": program(tag),
        "extraction_error": None,
        "verdict": verdict(status, **verdict_fields),
        "judgment": judgment(),
        "components": {"rule": score},
        "score": score,
        "masked": False,
        "mask_reason": None,
        "config_hash": "abc",
    }
    row.update(fields)
    return row
