"""Fixtures for the task tests: a scripted OpenAI-compatible chat server on 127.0.0.1 (the LLM composer's)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class ChatServer:
    url: str
    requests: list[dict[str, Any]]
    script: Callable[[list[tuple[int, str]]], None]  # [(status, assistant content or error body)]


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[int], str]], ChatServer]]:
    """``chat_server(answer)``: a server answering request k (0-based) with ``answer(k)``; ``.script`` queues
    replies (status, content) to send first."""
    from stub_server import Reply, StubOpenAIServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    servers: list[StubOpenAIServer] = []

    def start(answer: Callable[[int], str]) -> ChatServer:
        server = StubOpenAIServer(responder=lambda request: Reply(content=answer(len(server.requests) - 1)))
        server.start()
        servers.append(server)

        def script(replies: list[tuple[int, str]]) -> None:
            server.script(Reply(status=s, content=c) if s == 200 else Reply(status=s, body=c) for s, c in replies)

        return ChatServer(url=server.url, requests=server.requests, script=script)

    yield start
    for s in servers:
        s.stop()
