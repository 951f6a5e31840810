"""The agent loop verl 0.9.1 runs for CUDA Agent's multi-turn stage: the model writes, compiles, checks,
benchmarks and profiles a program with tools over the sandbox, then submits it; the trajectory is rewarded
once, at the end, by a fresh evaluation of that program. The only module of ``rubric_rl.agents`` that imports
verl.

Enable it with ``actor_rollout_ref.rollout.agent.agent_loop_config_path=recipes/agent_loop.yaml`` and
``actor_rollout_ref.rollout.agent.default_agent_loop=rubric_rl_cuda_agent`` (or a dataset column
``agent_name``). The YAML entry's ``agent`` mapping is an ``AgentConfig``.

One trajectory:

- the prompt (the dataset row's ``raw_prompt``) is rendered with the tools' schemas by verl's Continuous Token
  builder; every generation is appended as the model's tokens (``response_mask`` 1), every tool answer as
  context tokens (``response_mask`` 0, no loss);
- tool calls are read in hermes format (``rubric_rl.agents.calls``: a malformed call is answered with a tool
  error instead of silently ending the turn) and run one after another on one ``ToolSession``;
- it ends on submit, after ``max_turns`` generations, when the response would pass ``rollout.response_length``
  tokens, or on a turn without a tool call; the answers to the last turn's calls are not appended, so the
  response ends on the model's own last token, where verl puts the score;
- ``reward_score`` is set from ``rubric_rl.agents.reward.final_reward`` on the submitted program, or, without a
  submit, on the last program written (``AgentConfig.unsubmitted``), so verl's reward workers are skipped; the
  reward's keys and the agent's (``agent_submitted`` says which program was scored) go to
  ``extra_fields['reward_extra_info']``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.workers.rollout.replica import TokenOutput

from rubric_rl.agents.backend import final_sandbox_seed, get_sandbox_tools
from rubric_rl.agents.calls import ParsedCall, parse_tool_calls
from rubric_rl.agents.completions import CompletionsClient, CompletionsConfig
from rubric_rl.agents.config import AgentConfig
from rubric_rl.agents.reward import final_reward
from rubric_rl.agents.schemas import tool_schemas
from rubric_rl.agents.tools import ToolResult, ToolSession
from rubric_rl.reward.config import plain
from rubric_rl.reward.scorer import SampleInfo, make_reference_task

log = logging.getLogger(__name__)

AGENT_NAME = "rubric_rl_cuda_agent"


@lru_cache(maxsize=16)
def _final_seed(reward_kwargs_json: str, backend: str) -> int:
    return final_sandbox_seed(json.loads(reward_kwargs_json), backend)


@dataclass
class _Trajectory:
    """Token state of one trajectory (verl's layout: the prompt, then the response tokens with their mask)."""

    ids: list[int]
    prompt_len: int
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    assistant_turns: int = 0
    tool_turns: int = 0
    stop: str = ""
    generate_s: float = 0.0
    tools_s: float = 0.0


@register(AGENT_NAME)
class CudaAgentLoop(AgentLoopBase):
    """verl's ``AgentLoopBase`` over ``ToolSession``. verl instantiates one per trajectory (cheap: the sandbox
    behind the tools is built once per process)."""

    def __init__(self, *args: Any, agent: Any = None, tools: Any = None, name: str | None = None, **kwargs: Any):
        # ``tools`` (verl's ToolListWrap of multi_turn.tool_config_path tools) is not used: the tools are ours.
        super().__init__(*args, **kwargs)
        self.agent = AgentConfig.load(agent, where=f"agent loop {name or AGENT_NAME}: agent")
        self.response_length = int(self.rollout_config.response_length)
        verl_turns = self.rollout_config.multi_turn.get("max_assistant_turns")
        self.max_turns = min(self.agent.max_turns, int(verl_turns)) if verl_turns else self.agent.max_turns
        self.schemas = tool_schemas()

    def count_tokens(self, text: str) -> int:
        tokenizer: Any = self.tokenizer
        return len(tokenizer.encode(text, add_special_tokens=False))

    def _session(self, kwargs: dict[str, Any]) -> tuple[ToolSession, dict[str, Any]]:
        reward_model = plain(kwargs.get("reward_model") or {})
        reference = reward_model.get("ground_truth")
        if not isinstance(reference, str):
            raise ValueError("the dataset row has no reward_model.ground_truth (the reference program)")
        extra_info = plain(kwargs.get("extra_info") or {})
        data_source = str(kwargs.get("data_source") or "rubric_rl")
        task = make_reference_task(reference, SampleInfo.model_validate(extra_info), data_source)
        cfg = self.agent
        seed = _final_seed(json.dumps(cfg.reward_kwargs, sort_keys=True, default=str), cfg.tools.backend)
        tools = get_sandbox_tools(cfg.tools, seed)
        row = {"data_source": data_source, "reference": reference, "extra_info": extra_info}
        return ToolSession(task, tools, cfg.tools, count_tokens=self.count_tokens), row

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        session, row = self._session(kwargs)
        messages = list(plain(kwargs["raw_prompt"]))
        prompt_ids = await self.ct_build_initial_tokens(messages, tools=self.schemas)
        t = _Trajectory(ids=list(prompt_ids), prompt_len=len(prompt_ids), messages=messages)
        request_id = uuid4().hex
        while not t.stop:
            calls = await self._generate(t, sampling_params, str(request_id))
            if t.stop:
                break
            if calls is None:
                t.stop = "no_tool_call"
                break
            results = await self._run_calls(t, session, calls)
            # The episode ends on the model's own last token: the answers to its final turn are not appended.
            if session.submitted:
                t.stop = "submitted"
            elif t.assistant_turns >= self.max_turns:
                t.stop = "turn_budget"
            else:
                await self._append_answers(t, results)
        return await self._output(t, session, row)

    async def _generate(
        self, t: _Trajectory, sampling_params: dict[str, Any], request_id: str
    ) -> list[ParsedCall] | None:
        """One assistant turn: its tokens appended with mask 1; its tool calls (None: it made none)."""
        remaining = self.response_length - len(t.mask)
        params = {**sampling_params, "max_tokens": max(1, remaining)}
        started = time.monotonic()
        out: TokenOutput = await self.server_manager.generate(
            request_id=request_id, prompt_ids=t.ids, sampling_params=params
        )
        t.generate_s += time.monotonic() - started
        t.assistant_turns += 1
        track = bool(t.logprobs or out.log_probs)
        merged, t.mask, logprobs = await self.ct_merge_assistant_token(
            t.ids, out.token_ids, t.mask, t.logprobs if track else None, assistant_logprobs=out.log_probs or None
        )
        t.ids = merged.token_ids
        t.logprobs = list(logprobs or [])
        tokenizer: Any = self.tokenizer
        text = tokenizer.decode(out.token_ids, skip_special_tokens=False)
        for special in (tokenizer.eos_token, tokenizer.pad_token):
            if special:
                text = text.replace(special, "")
        content, calls = parse_tool_calls(text)
        t.messages.append(_assistant_message(content, calls))
        if len(t.mask) >= self.response_length:
            t.stop = "token_budget"
        return calls or None

    async def _run_calls(self, t: _Trajectory, session: ToolSession, calls: list[ParsedCall]) -> list[ToolResult]:
        """The turn's calls, run in order (a malformed one or one over the turn's limit answered with an error)."""
        started = time.monotonic()
        results: list[ToolResult] = []
        limit = self.agent.max_calls_per_turn
        for i, call in enumerate(calls):
            name = call.name or "invalid"
            if i >= limit:
                results.append(session.refuse(name, "call_limit", f"only {limit} tool calls run per turn; not run."))
            elif call.error is not None:
                results.append(session.refuse(name, "bad_arguments", f"{call.error}. Received: {call.raw}"))
            else:
                results.append(await session.call(call.name, call.arguments))
        t.tools_s += time.monotonic() - started
        return results

    async def _append_answers(self, t: _Trajectory, results: list[ToolResult]) -> None:
        """The answers as context tokens (mask 0), if the response stays within its length; else the end."""
        previous = list(t.messages)
        t.messages += [{"role": "tool", "name": r.name, "content": r.text} for r in results]
        merged, mask, logprobs = await self.ct_merge_context_msg(
            previous, t.messages, t.ids, t.mask, t.logprobs or None, tools=self.schemas
        )
        if len(mask) >= self.response_length:
            del t.messages[len(previous) :]
            t.stop = "token_budget"
            return
        t.ids, t.mask = merged.token_ids, mask
        if t.logprobs:
            t.logprobs = list(logprobs or [])
        t.tool_turns += 1

    async def _output(self, t: _Trajectory, session: ToolSession, row: dict[str, Any]) -> AgentLoopOutput:
        program, source = session.final_program(self.agent.unsubmitted)
        started = time.monotonic()
        reward = await final_reward(
            program,
            source,
            data_source=row["data_source"],
            reference=row["reference"],
            extra_info=row["extra_info"],
            reward_kwargs=self.agent.reward_kwargs,
            turns=t.assistant_turns,
            tool_calls=len(session.records),
            tool_errors=sum(not r.ok for r in session.records),
        )
        log.info(
            "agent trajectory on %s: %s after %d turns, %d tool calls; scored %s program: %.3f",
            session.task.id,
            t.stop,
            t.assistant_turns,
            len(session.records),
            source,
            reward.score,
        )
        n = self.response_length
        response_ids = t.ids[t.prompt_len :]
        metrics = AgentLoopMetrics(
            generate_sequences=t.generate_s, tool_calls=t.tools_s, compute_score=time.monotonic() - started
        )
        return AgentLoopOutput(
            prompt_ids=t.ids[: t.prompt_len],
            response_ids=response_ids[:n],
            response_mask=t.mask[:n],
            response_logprobs=t.logprobs[:n] if t.logprobs else None,
            reward_score=reward.score,
            num_turns=t.assistant_turns + t.tool_turns + 1,
            metrics=metrics,
            extra_fields={
                "reward_extra_info": reward.info,
                "agent_stop": t.stop,
                "agent_scored": source,
                "agent_call_records": [r.model_dump(mode="json") for r in session.records],
            },
        )


def _assistant_message(content: str, calls: list[ParsedCall]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": c.name or "invalid", "arguments": c.arguments or {}}}
            for c in calls
        ]
    return message


class OpenAIServerManager:
    """verl's server manager (``generate(request_id, *, prompt_ids, sampling_params) -> TokenOutput``) over an
    OpenAI-protocol ``/v1/completions`` endpoint, for running an agent loop outside verl's rollout workers
    (a ``vllm serve`` endpoint, a scripted test server)."""

    def __init__(self, config: CompletionsConfig, tokenizer: Any) -> None:
        self.client = CompletionsClient(config)
        self.tokenizer = tokenizer

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> TokenOutput:
        g = await self.client.generate(list(prompt_ids), sampling_params, self.tokenizer)
        return TokenOutput(token_ids=g.token_ids, log_probs=g.log_probs, stop_reason="completed")
