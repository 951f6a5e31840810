"""The tools served to an OpenAI tool-calling client: one episode of chat completions over a ``ToolSession``.

The schemas go in ``tools=``; the server's parsed ``tool_calls`` are run in order and answered as ``tool``
messages. A server that does not parse tool calls (``vllm serve`` without a tool parser) leaves hermes
``<tool_call>`` blocks in the text; those are read with ``parse_tool_calls``, as the verl loop reads them, so
training and inference see the same environment either way. The episode ends on submit, on a reply without a
call, after ``max_turns`` replies, or when the endpoint fails (the error is the episode's ``stop``, not an
exception: the session and its records survive it).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from rubric_rl.agents.calls import parse_tool_calls
from rubric_rl.agents.schemas import tool_schemas
from rubric_rl.agents.tools import ToolResult, ToolSession

log = logging.getLogger(__name__)


class ChatEpisode(BaseModel):
    """How an episode went; the session holds the program and the calls."""

    messages: list[dict[str, Any]] = Field(description="The conversation, tool answers included.")
    turns: int = Field(description="Assistant replies.")
    stop: str = Field(description="submitted | no_tool_call | turn_budget | endpoint_error: <reason>.")


async def _run(session: ToolSession, name: str, arguments: Any, error: str | None = None) -> ToolResult:
    if error is not None:
        return session.refuse(name or "invalid", "bad_arguments", error)
    return await session.call(name, arguments)


async def run_chat_episode(
    client: Any,
    model: str,
    session: ToolSession,
    messages: list[dict[str, Any]],
    *,
    max_turns: int = 16,
    **create_kwargs: Any,
) -> ChatEpisode:
    """Drive ``session`` with the model behind ``client`` (an ``openai.AsyncOpenAI``) from ``messages``."""
    import openai

    messages = list(messages)
    for turn in range(1, max_turns + 1):
        try:
            reply = await client.chat.completions.create(
                model=model, messages=messages, tools=tool_schemas(), **create_kwargs
            )
        except openai.OpenAIError as e:  # the network boundary: the episode ends, the session stays
            log.warning("chat endpoint failed on task %s: %s", session.task.id, e)
            return ChatEpisode(messages=messages, turns=turn - 1, stop=f"endpoint_error: {type(e).__name__}")
        message = reply.choices[0].message
        content = message.content or ""
        parsed: list[tuple[str, str, Any, str | None]] = [
            (c.id, c.function.name, c.function.arguments, None) for c in message.tool_calls or []
        ]
        if not parsed:
            content, calls = parse_tool_calls(content)
            parsed = [(f"call_{turn}_{i}", c.name, c.arguments, c.error) for i, c in enumerate(calls)]
        assistant: dict[str, Any] = {"role": "assistant", "content": content}
        if parsed:
            assistant["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name or "invalid", "arguments": _text(args)}}
                for cid, name, args, _ in parsed
            ]
        messages.append(assistant)
        if not parsed:
            return ChatEpisode(messages=messages, turns=turn, stop="no_tool_call")
        for cid, name, args, error in parsed:
            result = await _run(session, name, args, error)
            messages.append({"role": "tool", "tool_call_id": cid, "content": result.text})
        if session.submitted:
            return ChatEpisode(messages=messages, turns=turn, stop="submitted")
    return ChatEpisode(messages=messages, turns=max_turns, stop="turn_budget")


def _text(arguments: Any) -> str:
    import json

    return arguments if isinstance(arguments, str) else json.dumps(arguments or {})
