"""Fixtures of the agent tests: the bundled example task, the tools on the cpu backend (one per process, as in
training), a build cache kept across runs by RUBRIC_RL_TEST_CACHE, and for the verl loop a tokenizer trained
here with a hermes tool-calling chat template, saved as a Qwen2-typed model folder (so verl picks its Qwen
Continuous Token builder, as for the real models)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tiny_model import save_qwen2_config, save_tokenizer

from rubric_rl.agents import SandboxTools, ToolsConfig, get_sandbox_tools
from rubric_rl.agents.backend import final_sandbox_seed
from rubric_rl.tasks import Task

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
EXAMPLE = REPO / "examples" / "fused_add_relu"
ADVERSARIAL = TESTS / "adversarial" / "cpu"
REWARD_KWARGS: dict[str, Any] = {"rule": {"name": "milestone"}, "mix": {"name": "none"}}

# ChatML with tools in the system turn, assistant tool calls as <tool_call>{json}</tool_call>, tool answers as
# <tool_response> in a user turn: the hermes layout of Qwen2.5's template, reduced to what the loop renders.
CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n"
    "{% endif %}# Tools\n<tools>\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools><|im_end|>\n"
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'system' and loop.first %}"
    "{%- elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{%- elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    '{%- for tc in m.tool_calls or [] %}<tool_call>\n{"name": "{{ tc.function.name }}", "arguments": '
    "{{ tc.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, build_cache: Path) -> None:
    """No judge endpoint or reward config from the environment; builds and baselines in the test cache."""
    for name in ("RUBRIC_RL_JUDGE_BASE_URL", "RUBRIC_RL_JUDGE_MODEL", "OPENAI_API_KEY", "RUBRIC_RL_REWARD_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUBRIC_RL_CACHE", str(build_cache))
    monkeypatch.setenv("WANDB_MODE", "offline")


@pytest.fixture(scope="session")
def reference() -> str:
    return (EXAMPLE / "reference.py").read_text()


@pytest.fixture(scope="session")
def programs() -> dict[str, str]:
    """Candidate programs by what they are."""
    return {
        "broken": (EXAMPLE / "candidate_compile_error.py").read_text(),
        "correct": (EXAMPLE / "candidate_correct.py").read_text(),
        "tuned": (ADVERSARIAL / "tuned_to_tool_seed.py").read_text(),
    }


@pytest.fixture(scope="session")
def task(reference: str) -> Task:
    return Task(id="fused_add_relu", problem_id=0, name="fused_add_relu", origin="examples", code=reference)


@pytest.fixture
def tools_config() -> ToolsConfig:
    return ToolsConfig(backend="cpu")


@pytest.fixture
def sandbox_tools(tools_config: ToolsConfig) -> SandboxTools:
    """The process's tools on the cpu backend (built on first use, shared by every test, as across trajectories)."""
    return get_sandbox_tools(tools_config, final_sandbox_seed(REWARD_KWARGS, "cpu"))


def hermes_call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@pytest.fixture(scope="session")
def call() -> Callable[..., str]:
    """``call(name, **arguments)``: a hermes tool call as a model writes it."""
    return hermes_call


@pytest.fixture(scope="session")
def agent_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder: a byte-level BPE tokenizer trained here with the tool-calling template, a Qwen2 config."""
    pytest.importorskip("tokenizers")
    path = tmp_path_factory.mktemp("agent-model")
    corpus = [(EXAMPLE / "candidate_correct.py").read_text(), (REPO / "skills" / "agent.yaml").read_text()]
    vocab = save_tokenizer(path, corpus * 5, vocab_size=1000, chat_template=CHAT_TEMPLATE)
    save_qwen2_config(path, vocab)
    return path
