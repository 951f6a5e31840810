"""Tool calls in a model's text, hermes format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

verl's ``HermesToolParser`` drops a call whose JSON does not parse (it logs an error and the turn looks like
one without a call, so the episode ends). Here every ``<tool_call>`` block becomes a ``ParsedCall``, and one
that cannot be read carries the reason, which the agent loop returns to the model as a tool error: a
malformed call is a mistake the model can see and fix, not a silent end.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


class ParsedCall(BaseModel):
    """One ``<tool_call>`` block: a name and arguments, or why it could not be read."""

    name: str = Field(description="The tool named, or '' when the block names none.")
    arguments: dict[str, Any] | None = Field(default=None, description="The arguments object, when readable.")
    error: str | None = Field(default=None, description="Why the block is not a usable call.")
    raw: str = Field(description="The block's text between the tags, cut to 300 characters.")


def _parse_block(body: str) -> ParsedCall:
    raw = body.strip()[:300]
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return ParsedCall(name="", raw=raw, error=f"the tool call is not valid JSON ({e.msg} at character {e.pos})")
    if not isinstance(obj, dict):
        return ParsedCall(name="", raw=raw, error="the tool call must be a JSON object with 'name' and 'arguments'")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParsedCall(name="", raw=raw, error="the tool call has no 'name'")
    args: Any = obj.get("arguments", {})
    if isinstance(args, str):  # some models send the arguments as JSON text
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            return ParsedCall(
                name=name, raw=raw, error=f"the arguments are not valid JSON ({e.msg} at character {e.pos})"
            )
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ParsedCall(name=name, raw=raw, error="the arguments must be a JSON object")
    return ParsedCall(name=name, arguments=args, raw=raw)


def parse_tool_calls(text: str) -> tuple[str, list[ParsedCall]]:
    """(the text without its tool-call blocks, the calls in order). An opened block never closed (the model ran
    out of tokens or forgot the tag) is a call with an error."""
    calls = [_parse_block(m.group(1)) for m in _BLOCK.finditer(text)]
    content = _BLOCK.sub("", text)
    if OPEN in content:
        tail = content[content.index(OPEN) + len(OPEN) :]
        calls.append(
            ParsedCall(name="", raw=tail.strip()[:300], error=f"the tool call was opened and never closed with {CLOSE}")
        )
        content = content[: content.index(OPEN)]
    return content.strip(), calls
