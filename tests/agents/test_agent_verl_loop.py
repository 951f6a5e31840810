"""The agent loop inside verl 0.9.1's own ``AgentLoopWorker`` (the class verl's rollout runs as a Ray actor), with
the generations of a real OpenAI-protocol server started here on 127.0.0.1. The server's "model" is a script that
reads the tool answers in its prompt (token ids, decoded with the tokenizer trained here) and acts on them. The
worker gets ``OpenAIServerManager`` in place of its vLLM server manager; everything else is verl's: the config
(composed from verl's ppo_trainer), the registration from ``recipes/agent_loop.yaml``, tokenisation, padding,
``rm_scores``."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("verl")
pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop",
    reason="verl 0.9.1's agent loop imports cachetools, fastapi and uvicorn, which its base install lacks",
)

from stub_server import Reply, StubOpenAIServer  # noqa: E402

from rubric_rl.agents import tool_schemas  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
Model = Callable[[str, int], str]  # (prompt text, max_tokens) -> the model's text


@pytest.fixture(scope="module")
def verl_config(agent_model: Path) -> Any:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose(
            "ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={agent_model}",
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.prompt_length=4096",
                "actor_rollout_ref.rollout.agent.default_agent_loop=rubric_rl_cuda_agent",
            ],
        )


def run_agent(
    verl_config: Any, agent_model: Path, tmp_path: Path, model: Model, reference: str, *, response_length: int, **agent
) -> tuple[Any, StubOpenAIServer, Any]:
    """One trajectory through verl's AgentLoopWorker; the loop's YAML is the bundled one with ``agent`` merged in."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto

    from rubric_rl.agents.completions import CompletionsConfig
    from rubric_rl.agents.verl_loop import OpenAIServerManager
    from rubric_rl.reward.config import deep_merge
    from rubric_rl.skills import load_skill

    entries = yaml.safe_load((REPO / "recipes" / "agent_loop.yaml").read_text())
    entries[0]["agent"] = deep_merge(entries[0]["agent"], {"tools": {"backend": "cpu"}, **agent})
    loops = tmp_path / "agent_loop.yaml"
    loops.write_text(yaml.safe_dump(entries))
    cfg = OmegaConf.create(OmegaConf.to_container(verl_config))
    cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(loops)
    cfg.actor_rollout_ref.rollout.response_length = response_length
    tokenizer = AutoTokenizer.from_pretrained(agent_model)

    def respond(request: dict[str, Any]) -> Reply:
        text = model(tokenizer.decode(request["prompt"]), int(request["max_tokens"]))
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) > request["max_tokens"]:  # a server stops at max_tokens
            return Reply(content=tokenizer.decode(ids[: request["max_tokens"]]), finish_reason="length")
        return Reply(content=text)

    messages = load_skill("agent").render(reference=reference, backend="cpu")
    row = {
        "raw_prompt": messages,
        "data_source": "agent_test",
        "reward_model": {"style": "rule", "ground_truth": reference},
        "extra_info": {"task_id": "fused_add_relu", "skill": "agent", "split": "train", "index": 0},
        "agent_name": "rubric_rl_cuda_agent",
    }
    import numpy as np

    batch = DataProto.from_dict(non_tensors={k: np.array([v], dtype=object) for k, v in row.items()})
    with StubOpenAIServer(respond, model="stub-coder") as server:
        manager = OpenAIServerManager(CompletionsConfig(base_url=server.url, model="stub-coder"), tokenizer)
        worker = AgentLoopWorker(cfg, manager)
        out = asyncio.run(worker.generate_sequences(batch))
    return out, server, tokenizer


def last_tool_answer(prompt: str) -> str | None:
    answers = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL)
    return answers[-1] if answers else None


def segments(out: Any) -> list[tuple[int, list[int]]]:
    """The response's (mask, token ids) runs, padding left out."""
    n = int(out.batch["attention_mask"][0, out.batch["prompts"].shape[1] :].sum())
    ids = out.batch["responses"][0, :n].tolist()
    mask = out.batch["response_mask"][0, :n].tolist()
    runs: list[tuple[int, list[int]]] = []
    for i, m in zip(ids, mask, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(i)
        else:
            runs.append((m, [i]))
    return runs


def info(out: Any) -> dict[str, float]:
    return {k: float(out.non_tensor_batch[k][0]) for k in out.meta_info["reward_extra_keys"]}


def test_agent_fixes_its_compile_error_then_checks_benchmarks_and_submits(
    verl_config, agent_model, tmp_path, programs, reference, call
) -> None:
    turns: list[str] = []

    def coder(prompt: str, max_tokens: int) -> str:
        last = last_tool_answer(prompt)
        if last is None:
            text = "A fused kernel." + call("write_program", program=programs["broken"])
        elif last.startswith("Saved program version 1"):
            text = call("compile")
        elif "compile_error" in last and "candidate line 17" in last:
            text = "Line 17 misses a semicolon." + call("write_program", program=programs["correct"]) + call("check")
        elif "Status: correct" in last and "trials passed" in last:
            text = call("benchmark")
        elif "speedup" in last:
            text = "Faster than eager." + call("submit")
        else:
            text = f"Unexpected answer: {last}"
        turns.append(text)
        return text

    out, server, tokenizer = run_agent(verl_config, agent_model, tmp_path, coder, reference, response_length=6000)
    assert out.non_tensor_batch["agent_stop"][0] == "submitted", turns
    assert len(turns) == 5 and server.request_count == 5

    # The prompt is the chat template of the row's messages with the tools' schemas.
    from rubric_rl.skills import load_skill

    messages = load_skill("agent").render(reference=reference, backend="cpu")
    expected = tokenizer.apply_chat_template(messages, tools=tool_schemas(), add_generation_prompt=True)
    expected = expected["input_ids"] if isinstance(expected, dict) or hasattr(expected, "keys") else expected
    prompt_n = int(out.batch["attention_mask"][0, : out.batch["prompts"].shape[1]].sum())
    assert out.batch["prompts"][0, -prompt_n:].tolist() == list(expected)

    # The response: the model's turns (mask 1), the tool answers between them (mask 0), ending on the model.
    runs = segments(out)
    assert [m for m, _ in runs] == [1, 0] * 4 + [1]
    generated = [tokenizer.decode(ids) for m, ids in runs if m == 1]
    assert generated == [t + tokenizer.eos_token for t in turns]
    answers = [tokenizer.decode(ids) for m, ids in runs if m == 0]
    assert "Saved program version 1" in answers[0]
    assert "Status: compile_error" in answers[1] and "candidate line 17: error" in answers[1]
    assert "Saved program version 2" in answers[2] and "trials passed" in answers[2]
    assert "PyTorch eager" in answers[3] and "torch.compile" in answers[3]
    # Each generation saw everything before it: prompt, its own tokens, the answers.
    prompts = [r["prompt"] for r in server.requests]
    assert all(b[: len(a)] == a for a, b in zip(prompts, prompts[1:], strict=False))
    assert [r["max_tokens"] for r in server.requests] == sorted(
        (r["max_tokens"] for r in server.requests), reverse=True
    )

    # The reward: a fresh evaluation of the submitted program, on the last token, with the agent's keys.
    got = info(out)
    score = float(out.batch["rm_scores"][0].sum())
    n = sum(len(ids) for _, ids in runs)
    assert float(out.batch["rm_scores"][0, n - 1]) == score == got["score"]
    assert got["correct"] == 1.0 and got["agent_submitted"] == 1.0 and got["agent_scored_last_written"] == 0.0
    assert got["agent_turns"] == 5.0 and got["agent_tool_calls"] == 6.0 and got["agent_tool_errors"] == 0.0
    faster_eager, faster_compile = got["speedup_eager"] > 1.05, got["speedup_compile"] > 1.05
    assert score == (3.0 if faster_eager and faster_compile else 2.0 if faster_eager else 1.0)
    calls = out.non_tensor_batch["agent_call_records"][0]
    assert [c["name"] for c in calls] == ["write_program", "compile", "write_program", "check", "benchmark", "submit"]
    assert calls[1]["status"] == "compile_error" and calls[3]["status"] == "correct"


def test_misbehaving_model_gets_tool_errors_and_a_bounded_trajectory(
    verl_config, agent_model, tmp_path, programs, reference, call
) -> None:
    script = [
        '<tool_call>{"name": "compile", "arguments": {</tool_call>',
        call("frobnicate"),
        call("write_program", program="x = 1\n" * 600),
        call("check", verbose=True),
        call("write_program", program=programs["broken"]) + call("write_program", program=5) + call("compile"),
        call("write_program", program=programs["broken"]),
    ]
    seen: list[str] = []

    def misbehaving(prompt: str, max_tokens: int) -> str:
        seen.append(prompt)
        return script[len(seen) - 1]

    out, server, tokenizer = run_agent(
        verl_config,
        agent_model,
        tmp_path,
        misbehaving,
        reference,
        response_length=6000,
        max_turns=6,
        max_calls_per_turn=2,
        tools={"backend": "cpu", "max_program_chars": 2000},
    )
    assert out.non_tensor_batch["agent_stop"][0] == "turn_budget" and server.request_count == 6
    last_prompt = seen[-1]
    for error in (
        "Error (bad_arguments): the tool call is not valid JSON",
        "Error (unknown_tool): No tool named 'frobnicate'",
        "Error (too_long): the program has 3600 characters; the limit is 2000.",
        "Error (bad_arguments): check: unexpected argument 'verbose'",
        "Error (bad_arguments): write_program: program: Input should be a valid string",
        "Error (call_limit): only 2 tool calls run per turn; not run.",
    ):
        assert error in last_prompt
    runs = segments(out)
    assert runs[-1][0] == 1 and sum(len(ids) for _, ids in runs) <= 6000
    got = info(out)
    assert got["agent_submitted"] == 0.0 and got["agent_scored_last_written"] == 1.0
    assert got["score"] == -1.0 and got["compiled"] == 0.0  # the last program written does not build
    assert got["agent_turns"] == 6.0 and got["agent_tool_calls"] == 8.0 and got["agent_tool_errors"] == 6.0


def test_flooding_model_is_cut_at_the_token_budget(verl_config, agent_model, tmp_path, reference, call) -> None:
    def flood(prompt: str, max_tokens: int) -> str:
        return "Thinking. " * 5000 + call("submit")

    out, server, _ = run_agent(verl_config, agent_model, tmp_path, flood, reference, response_length=500)
    assert out.non_tensor_batch["agent_stop"][0] == "token_budget"
    assert server.request_count == 1 and server.requests[0]["max_tokens"] == 500
    runs = segments(out)
    assert runs == [(1, runs[0][1])] and len(runs[0][1]) == 500
    got = info(out)
    assert got["score"] == -1.0 and got["agent_tool_calls"] == 0.0 and got["agent_scored_last_written"] == 0.0
    assert json.dumps(out.non_tensor_batch["agent_scored"].tolist()) == '["none"]'
