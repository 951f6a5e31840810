"""The planner's and coder's client: one chat completion from an OpenAI-compatible endpoint, with retries.

The retry policy is the judge's (``rubric_rl.judge.client``): tenacity on 429, 5xx, timeouts, connection errors
and garbled bodies, exponential backoff with jitter, Retry-After honoured up to the cap, one concurrency slot
held per attempt. The endpoint is a trust boundary: a call that still fails comes back as a ``ChatReply`` with
``error`` set, never as an exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import openai
from pydantic import BaseModel, Field
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from rubric_rl.agents.pcv.config import EndpointConfig
from rubric_rl.judge.client import Backoff, error_code, is_retryable

log = logging.getLogger(__name__)

Message = dict[str, str]


class ChatReply(BaseModel):
    """One answer (or why there is none), with what it cost."""

    model: str
    content: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    seconds: float = 0.0
    error: str | None = Field(default=None, description="Error code after retries: timeout, http_503, ...")
    error_detail: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatClient:
    """Chat completions from one endpoint; safe to share between tasks of one event loop."""

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self._client: openai.AsyncOpenAI | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _state(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._semaphore is None or self._loop is not loop:
            c = self.config
            self._client = openai.AsyncOpenAI(
                base_url=c.base_url, api_key=c.api_key(), timeout=c.timeout_s, max_retries=0
            )
            self._semaphore = asyncio.Semaphore(c.concurrency)
            self._loop = loop
        return self._client, self._semaphore

    async def complete(self, messages: list[Message], response_format: dict[str, Any] | None = None) -> ChatReply:
        c = self.config
        kwargs: dict[str, Any] = {
            "model": c.model,
            "messages": messages,
            "temperature": c.temperature,
            "max_tokens": c.max_tokens,
        }
        if c.seed is not None:
            kwargs["seed"] = c.seed
        if c.extra_body:
            kwargs["extra_body"] = c.extra_body
        if response_format is not None:
            kwargs["response_format"] = response_format
        reply = ChatReply(model=c.model)
        started = time.perf_counter()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(c.max_retries + 1),
            wait=Backoff(c.backoff_initial_s, c.backoff_max_s),
            retry=retry_if_exception(is_retryable),
            reraise=True,
        )
        try:
            completion: Any = await retrying(self._request, kwargs, reply)
        except (openai.OpenAIError, ValueError) as e:  # trust boundary: the endpoint, after retries
            reply.error, reply.error_detail = error_code(e), str(e)[:500]
            log.warning("%s at %s failed after %d attempt(s): %s", c.model, c.base_url, reply.attempts, reply.error)
        else:
            if completion.usage is not None:
                reply.prompt_tokens = completion.usage.prompt_tokens
                reply.completion_tokens = completion.usage.completion_tokens
            choice = completion.choices[0] if completion.choices else None
            reply.content = choice.message.content if choice is not None else None
            reply.finish_reason = choice.finish_reason if choice is not None else None
        reply.seconds = time.perf_counter() - started
        return reply

    async def _request(self, kwargs: dict[str, Any], reply: ChatReply) -> Any:
        client, semaphore = self._state()
        async with semaphore:
            reply.attempts += 1
            return await client.chat.completions.create(**kwargs)

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = None
