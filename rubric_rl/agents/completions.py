"""Token-level generation from an OpenAI-protocol server's ``/v1/completions`` endpoint.

verl's agent loops generate through a server manager whose ``generate(prompt_ids=...)`` returns token ids
(its vLLM or SGLang replicas). This client gives the same from any OpenAI-compatible server, so an agent loop
can run against a ``vllm serve`` endpoint (evaluation, debugging) or a scripted test server: the prompt goes as
token ids, and the answer's token ids are the server's own when it returns them (vLLM's ``return_token_ids``),
else its text encoded with the tokenizer, followed by the end-of-sequence token when the server stopped on it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)


class CompletionsConfig(BaseModel):
    """Where generations come from."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="The server's OpenAI API root, e.g. http://127.0.0.1:8000/v1.")
    model: str = Field(description="Model name the server serves.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(default=600.0, gt=0, description="Bound on one request.")
    max_retries: int = Field(default=2, ge=0, description="Retries of a failed request (the client's backoff).")


class Generation(BaseModel):
    """One generation: token ids, their log-probabilities when asked for, and why it stopped."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    finish_reason: str | None = None
    text: str


class CompletionsClient:
    """``await client.generate(prompt_ids, sampling_params, tokenizer)``: one generation."""

    def __init__(self, config: CompletionsConfig) -> None:
        from openai import AsyncOpenAI

        self.config = config
        self.client = AsyncOpenAI(
            base_url=config.base_url,
            api_key=os.environ.get(config.api_key_env) or "EMPTY",
            timeout=config.timeout_s,
            max_retries=config.max_retries,
        )

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], tokenizer: Any) -> Generation:
        params = dict(sampling_params)
        extra: dict[str, Any] = {"return_token_ids": True}
        for key in ("top_k", "repetition_penalty", "stop_token_ids"):
            if params.get(key) is not None:
                extra[key] = params[key]
        want_logprobs = bool(params.get("logprobs"))
        response = await self.client.completions.create(
            model=self.config.model,
            prompt=list(prompt_ids),
            max_tokens=int(params.get("max_tokens") or 1024),
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            logprobs=1 if want_logprobs else None,
            extra_body=extra,
        )
        choice = response.choices[0]
        text = choice.text or ""
        extras = choice.model_extra or {}
        ids = extras.get("token_ids")
        if ids is None:
            ids = list(tokenizer.encode(text, add_special_tokens=False))
            if choice.finish_reason == "stop" and tokenizer.eos_token_id is not None:
                ids.append(int(tokenizer.eos_token_id))
        log_probs = None
        if want_logprobs and choice.logprobs is not None and choice.logprobs.token_logprobs is not None:
            log_probs = [float(x or 0.0) for x in choice.logprobs.token_logprobs]
            if len(log_probs) != len(ids):
                log.warning("server returned %d logprobs for %d tokens: dropping them", len(log_probs), len(ids))
                log_probs = None
        return Generation(
            token_ids=[int(i) for i in ids], log_probs=log_probs, finish_reason=choice.finish_reason, text=text
        )
