"""The tools behind an OpenAI tool-calling client, against a real chat-completions server on 127.0.0.1: server-parsed
tool calls, hermes blocks left in the text, malformed arguments, an endpoint that fails."""

from __future__ import annotations

import asyncio
import json
import time

from stub_server import Reply, StubOpenAIServer

from rubric_rl.agents import SandboxTools, ToolsConfig, ToolSession, tool_schemas
from rubric_rl.agents.chat import run_chat_episode
from rubric_rl.tasks import Task


def tool_calls_body(calls: list[tuple[str, str]]) -> str:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ],
    }
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "stub-coder",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls", "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


def episode(task: Task, tools: SandboxTools, replies: list[Reply], **kwargs):
    from openai import AsyncOpenAI

    session = ToolSession(task, tools, ToolsConfig(backend="cpu"))
    with StubOpenAIServer(model="stub-coder") as server:
        server.script(replies)
        client = AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)
        messages = [{"role": "user", "content": "Make it fast."}]
        result = asyncio.run(run_chat_episode(client, "stub-coder", session, messages, **kwargs))
        return result, session, server.requests


def test_server_parsed_and_hermes_calls_drive_the_same_session(task, sandbox_tools, call) -> None:
    replies = [
        Reply(body=tool_calls_body([("write_program", json.dumps({"program": "print(1)"})), ("check", "{oops")])),
        Reply(content="Done. " + call("submit")),
    ]
    result, session, requests = episode(task, sandbox_tools, replies)
    assert result.stop == "submitted" and result.turns == 2 and session.submitted
    assert requests[0]["tools"] == tool_schemas()
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert tool_messages[0]["tool_call_id"] == "c0" and "Saved program version 1" in tool_messages[0]["content"]
    assert tool_messages[1]["content"].startswith("Error (bad_arguments): check: the arguments are not valid JSON")
    assert "Submitted program version 1" in tool_messages[2]["content"]
    assert [r.name for r in session.records] == ["write_program", "check", "submit"]
    # the second request carried the answers to the first turn's calls
    assert [m["role"] for m in requests[1]["messages"]] == ["user", "assistant", "tool", "tool"]


def test_no_call_budget_and_endpoint_failure_end_the_episode(task, sandbox_tools, call) -> None:
    result, _, _ = episode(task, sandbox_tools, [Reply(content="I give up.")])
    assert result.stop == "no_tool_call" and result.turns == 1
    result, session, _ = episode(task, sandbox_tools, [Reply(content=call("frobnicate"))] * 3, max_turns=3)
    assert result.stop == "turn_budget" and [r.error for r in session.records] == ["unknown_tool"] * 3
    result, session, _ = episode(task, sandbox_tools, [Reply(content=call("compile")), Reply(status=500)])
    assert result.stop == "endpoint_error: InternalServerError" and result.turns == 1
    assert session.records[0].error == "no_program"
