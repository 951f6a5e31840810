"""The tools as OpenAI function-calling schemas, made from their pydantic argument models.

The same list goes to a chat template (``tools=``, which renders it into the system prompt for hermes-style
models), to verl's agent loop, and to an OpenAI tool-calling client (``chat.completions.create(tools=...)``).
"""

from __future__ import annotations

import inspect
from typing import Any

from rubric_rl.agents.tools import TOOLS, ToolSpec


def _clean(node: Any) -> Any:
    """Pydantic's JSON schema without titles (noise to the model)."""
    if isinstance(node, dict):
        return {k: _clean(v) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """``{"type": "function", "function": {"name", "description", "parameters"}}`` of one tool."""
    params = _clean(spec.args.model_json_schema())
    params.pop("description", None)
    params.setdefault("properties", {})
    params.setdefault("required", [])
    description = " ".join(inspect.cleandoc(spec.args.__doc__ or spec.name).split())
    return {"type": "function", "function": {"name": spec.name, "description": description, "parameters": params}}


def tool_schemas(names: list[str] | None = None) -> list[dict[str, Any]]:
    """The schemas of the named tools (default: all, in their order)."""
    chosen = names if names is not None else list(TOOLS)
    unknown = [n for n in chosen if n not in TOOLS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; the tools are {list(TOOLS)}")
    return [tool_schema(TOOLS[n]) for n in chosen]
