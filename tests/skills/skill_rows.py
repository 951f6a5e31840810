"""Programs, Verdicts and reward-ledger rows the dataset tests build their inputs from."""

from __future__ import annotations

from typing import Any

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


def verdict(status: str, **fields: Any) -> dict[str, Any]:
    return {"status": status, "candidate_sha256": "0" * 64, **fields}


def judgment(failed: bool = False) -> dict[str, Any]:
    identity = {"kind": "heuristic", "label": "h", "rubric": "r", "rubric_version": 1, "rubric_hash": "x",
                "code_version": "0"}  # fmt: skip
    return {"identity": identity, "skill": "generate", "candidate_sha256": "0" * 64, "dimensions": [],
            "raw_total": 0.5, "total": 0.5, "judge_failed": failed}  # fmt: skip


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
