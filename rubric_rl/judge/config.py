"""Typed configuration of a rubric judge: which rubric, which endpoint, and the limits of the client.

Built once (YAML, CLI flags or a Hydra node converted to a dict) and passed down. The endpoint may come from
the environment: ``resolved()`` fills ``base_url`` and ``model`` from ``RUBRIC_RL_JUDGE_BASE_URL`` and
``RUBRIC_RL_JUDGE_MODEL`` where they are not set; with no endpoint at all the judge is the offline heuristic.
The API key is never part of the config (it would end up in logs): only the name of the variable holding it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubric_rl.sandbox.config import default_cache_dir

ENV_BASE_URL = "RUBRIC_RL_JUDGE_BASE_URL"
ENV_MODEL = "RUBRIC_RL_JUDGE_MODEL"
StructuredOutput = Literal["auto", "json_schema", "json_object", "none"]


def default_judge_cache() -> Path:
    """The judgment cache beside the build cache (``$RUBRIC_RL_CACHE`` or ``~/.cache/rubric-rl``)."""
    return default_cache_dir().parent / "judge" / "judgments.sqlite3"


class JudgeConfig(BaseModel):
    """Everything needed to build a judge."""

    model_config = ConfigDict(extra="forbid")

    rubric: str = Field(default="stitchcuda", description="Rubric file: a path or a bundled judges/ name.")
    offline: bool = Field(default=False, description="Use the offline heuristic judge even if an endpoint is set.")
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vllm serve)."
    )
    model: str | None = Field(default=None, description="Model name sent to the endpoint.")
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="Environment variable holding the API key ('EMPTY' when unset)."
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Sampling temperature of the judge.")
    samples: int = Field(default=1, ge=1, le=16, description="Independent samples per judgment; scores are averaged.")
    seed: int | None = Field(default=None, description="Base sampling seed (sample i uses seed + i); None: unset.")
    max_tokens: int = Field(default=2048, ge=64, description="Completion token limit of one judge answer.")
    timeout_s: float = Field(default=120.0, gt=0, description="Limit of one HTTP request, seconds.")
    max_retries: int = Field(
        default=4, ge=0, le=20, description="Retries of one request on 429/5xx/timeouts/connection errors."
    )
    backoff_initial_s: float = Field(default=1.0, gt=0, description="First retry delay (exponential, with jitter).")
    backoff_max_s: float = Field(default=30.0, gt=0, description="Largest retry delay, Retry-After included.")
    concurrency: int = Field(default=16, ge=1, description="Requests in flight at once, per judge and event loop.")
    repair_attempts: int = Field(
        default=1, ge=0, le=3, description="Follow-ups asking for valid JSON after an unparseable answer."
    )
    structured_output: StructuredOutput = Field(
        default="auto",
        description="json_schema | json_object | none; auto: json_schema, falling back (once, for the judge's "
        "lifetime) when the server rejects it.",
    )
    max_block_chars: int = Field(
        default=40_000, ge=1000, description="Longest program or feedback shown to the judge (head and tail kept)."
    )
    cache: bool = Field(default=True, description="Keep judgments in a persistent cache and reuse them.")
    cache_path: Path | None = Field(default=None, description="SQLite file of the cache; None: the default location.")
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request fields for the server, e.g. {'chat_template_kwargs': {'enable_thinking': False}}.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> JudgeConfig:
        if self.offline and self.base_url is not None:
            raise ValueError("offline: cannot be combined with base_url (pick the LLM endpoint or the heuristic)")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_max_s: must be at least backoff_initial_s")
        return self

    @property
    def kind(self) -> Literal["llm", "heuristic"]:
        return "llm" if self.base_url is not None and not self.offline else "heuristic"

    def resolved(self, environ: Mapping[str, str] | None = None) -> JudgeConfig:
        """The config with the endpoint completed from the environment; an incomplete endpoint fails here."""
        if self.offline:
            return self
        env = os.environ if environ is None else environ
        base_url = self.base_url or env.get(ENV_BASE_URL) or None
        model = self.model or env.get(ENV_MODEL) or None
        if base_url is not None and not model:
            raise ValueError(f"model: the endpoint {base_url} needs a model name (or set {ENV_MODEL})")
        if model and base_url is None:
            raise ValueError(
                f"base_url: model {model!r} needs an endpoint, e.g. http://localhost:8000/v1 (or set {ENV_BASE_URL})"
            )
        if (base_url, model) == (self.base_url, self.model):
            return self
        return self.model_copy(update={"base_url": base_url, "model": model})

    def api_key(self, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env) or "EMPTY"

    def cache_file(self) -> Path:
        return self.cache_path if self.cache_path is not None else default_judge_cache()
