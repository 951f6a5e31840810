"""A scripted OpenAI-compatible chat-completions server on the loopback interface, for the judge tests and
``scripts/bench_judge.py`` (test infrastructure: it is not part of the package).

It speaks just enough of the protocol (``POST /v1/chat/completions``, ``POST /v1/completions``,
``GET /v1/models``) for ``openai.AsyncOpenAI`` to talk to it, and answers from a script: a queue of replies
consumed first, then a responder function. A reply can carry any status code, raw body, headers and delay, so
tests can inject 429s, 500s, timeouts, malformed JSON and wrong answers. It counts requests and the peak number
in flight, so a concurrency cap can be checked from outside the client.

It binds only to a loopback address and never makes a connection itself.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@dataclass
class Reply:
    """One scripted answer. ``content`` becomes the assistant message of a chat.completion; ``body`` (raw text)
    replaces the whole response body when set."""

    status: int = 200
    content: str | None = None
    body: str | None = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 100
    completion_tokens: int = 20
    finish_reason: str = "stop"


Responder = Callable[[dict[str, Any]], Reply]


def completion_body(content: str, model: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """A minimal, valid ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text_completion_body(text: str, model: str, finish_reason: str = "stop") -> dict[str, Any]:
    """A minimal, valid ``text_completion`` object (the legacy ``/v1/completions`` endpoint, which takes token ids
    as its prompt: what an agent loop's token-level generation uses)."""
    return {
        "id": f"cmpl-stub-{time.monotonic_ns()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def error_body(status: int, message: str) -> str:
    return json.dumps({"error": {"message": message, "type": "stub_error", "code": status}})


def answer_from_schema(request: dict[str, Any], score: int | None = None) -> str:
    """A well-formed judge answer built from the request's JSON schema: every dimension at ``score`` (default:
    the middle of its enum), every flag false. Requests without a schema get an empty object."""
    fmt = request.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    props = schema.get("properties", {})
    dims = props.get("dimensions", {}).get("properties", {})
    flags = props.get("flags", {}).get("properties", {})
    answer: dict[str, Any] = {"dimensions": {}, "flags": {name: False for name in flags}}
    for name, spec in dims.items():
        levels = spec["properties"]["score"]["enum"]
        value = score if score is not None and score in levels else levels[len(levels) // 2]
        answer["dimensions"][name] = {"rationale": f"stub rationale for {name}", "score": value}
    return json.dumps(answer)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # many clients connect at once (the default backlog of 5 drops connections)


class StubOpenAIServer:
    """``with StubOpenAIServer(responder) as server: AsyncOpenAI(base_url=server.url, ...)``."""

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1", model: str = "stub-judge"):
        if host not in _LOOPBACK:
            raise ValueError(f"host: the stub server binds to loopback only, not {host!r}")
        self.responder: Responder = responder or (lambda request: Reply(content=answer_from_schema(request)))
        self.host = host
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server((host, 0), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        port = self._httpd.server_address[1]
        return f"http://{self.host}:{port}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def script(self, replies: Iterable[Reply]) -> None:
        """Queue replies to be sent, in order, before the responder is used."""
        with self._lock:
            self._queue.extend(replies)

    def reset_counters(self) -> None:
        with self._lock:
            self.requests.clear()
            self.statuses.clear()
            self.max_in_flight = self.in_flight

    def start(self) -> StubOpenAIServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StubOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            scripted = self._queue.popleft() if self._queue else None
        return scripted if scripted is not None else self.responder(request)

    def _done(self, status: int) -> None:
        with self._lock:
            self.in_flight -= 1
            self.statuses.append(status)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                logger.debug("stub: " + format, *args)

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to deliver

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": server.model, "object": "model"}]}))
                else:
                    self._send(404, error_body(404, f"no route {self.path}"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                route = self.path.rstrip("/")
                chat = route.endswith("/chat/completions")
                if not chat and not route.endswith("/completions"):
                    self._send(404, error_body(404, f"no route {self.path}"))
                    return
                try:
                    request = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(400, error_body(400, "request body is not JSON"))
                    return
                reply = server._next_reply(request)
                try:
                    if reply.delay_s > 0 and server._stopping.wait(reply.delay_s):
                        return
                    if reply.body is not None:
                        body = reply.body
                    elif reply.status == 200 and not chat:
                        model = request.get("model", server.model)
                        body = json.dumps(text_completion_body(reply.content or "", model, reply.finish_reason))
                    elif reply.status == 200:
                        body = json.dumps(
                            completion_body(
                                reply.content or "",
                                request.get("model", server.model),
                                reply.prompt_tokens,
                                reply.completion_tokens,
                            )
                        )
                    else:
                        body = error_body(reply.status, f"scripted status {reply.status}")
                    self._send(reply.status, body, reply.headers)
                finally:
                    server._done(reply.status)

        return Handler
