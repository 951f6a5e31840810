"""Asking an OpenAI-compatible endpoint whether it is up and what it serves.

One request, ``GET {base_url}/models``, answers both for ``vllm serve`` and for hosted APIs; vLLM's own
``GET /health`` (at the server root) is asked too where it exists. The endpoint is a trust boundary: every
failure becomes an ``EndpointError`` with a sentence saying what happened.
"""

from __future__ import annotations

import httpx


class EndpointError(RuntimeError):
    """The endpoint did not answer as an OpenAI-compatible server would."""


def server_root(base_url: str) -> str:
    """``http://h:p`` for ``http://h:p/v1``."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def list_models(base_url: str, timeout_s: float = 5.0, api_key: str | None = None) -> list[str]:
    """The model ids ``{base_url}/models`` lists."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, timeout=timeout_s, headers=headers)
    except httpx.HTTPError as e:
        raise EndpointError(f"GET {url} failed: {type(e).__name__}: {e}") from None
    if response.status_code != 200:
        raise EndpointError(f"GET {url} answered {response.status_code}: {response.text[:200]}")
    try:
        return [str(m["id"]) for m in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise EndpointError(f"GET {url} answered 200 without an OpenAI model list: {response.text[:200]}") from None


def healthy(base_url: str, model: str, timeout_s: float = 2.0) -> bool:
    """Whether the server says it is healthy (``/health`` 200, or no such route) and lists ``model``."""
    try:
        health = httpx.get(server_root(base_url) + "/health", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    if health.status_code not in (200, 404):
        return False
    try:
        return model in list_models(base_url, timeout_s)
    except EndpointError:
        return False
