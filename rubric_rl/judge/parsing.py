"""The judge's answer: its JSON schema (built from the rubric) and its strict parsing.

The answer is one JSON object::

    {"dimensions": {"<dimension>": {"rationale": "...", "score": <int>}, ...}, "flags": {"<gate>": <bool>, ...}}

``flags`` holds one boolean per gate with ``judge_flag`` (it is absent from the schema when there are none).
Parsing accepts the object bare, inside one fenced block, or after a ``<think>`` section; everything else is
strict: every dimension present and no unknown ones, integer scores within the levels, a non-empty rationale
for each, every flag a boolean. A failure names what is wrong with a stable ``error_code``, which becomes the
text of the repair prompt and the sample's recorded error.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from rubric_rl.judge.rubric import Rubric
from rubric_rl.skills.parsing import find_code_blocks, strip_thinking

ParseErrorCode = Literal[
    "empty",  # no content at all
    "not_json",  # the content is not a JSON object (bare, fenced, or after reasoning)
    "not_object",  # JSON, but not an object, or `dimensions`/`flags` is not an object
    "missing_dimension",  # a rubric dimension has no entry
    "unknown_dimension",  # an entry names no rubric dimension
    "bad_score",  # a score is missing or not an integer
    "out_of_range",  # a score is outside the dimension's levels
    "bad_rationale",  # a rationale is missing, empty or not a string
    "missing_flag",  # a gate flag has no entry
    "unknown_flag",  # a flag names no judge-flag gate
    "bad_flag",  # a flag is not a boolean
]

MAX_RATIONALE_CHARS = 2000


class ParsedAnswer(BaseModel):
    """A valid answer, checked against the rubric."""

    scores: dict[str, int] = Field(description="Dimension -> integer score within its levels.")
    rationales: dict[str, str] = Field(description="Dimension -> rationale (bounded).")
    flags: dict[str, bool] = Field(default_factory=dict, description="Judge-flag gate -> value.")


class ParseResult(BaseModel):
    """A parsed answer, or why the text is not one."""

    answer: ParsedAnswer | None = Field(default=None, description="The answer, when valid.")
    error_code: ParseErrorCode | None = Field(default=None, description="Stable reason code, when invalid.")
    error: str | None = Field(default=None, description="What is wrong, in one sentence (for the repair prompt).")

    @property
    def ok(self) -> bool:
        return self.answer is not None


def answer_schema(rubric: Rubric) -> dict[str, Any]:
    """JSON schema of a valid answer (integer scores as enums: widely supported by guided decoding)."""
    dims = {
        d.name: {
            "type": "object",
            "properties": {"rationale": {"type": "string"}, "score": {"type": "integer", "enum": list(d.levels)}},
            "required": ["rationale", "score"],
            "additionalProperties": False,
        }
        for d in rubric.dimensions
    }
    properties: dict[str, Any] = {
        "dimensions": {
            "type": "object",
            "properties": dims,
            "required": list(dims),
            "additionalProperties": False,
        }
    }
    flags = [g.name for g in rubric.flag_gates]
    if flags:
        properties["flags"] = {
            "type": "object",
            "properties": {name: {"type": "boolean"} for name in flags},
            "required": flags,
            "additionalProperties": False,
        }
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def answer_skeleton(rubric: Rubric) -> str:
    """The answer's shape, for the prompt."""
    dims = ", ".join(
        f'"{d.name}": {{"rationale": "<evidence-based reason>", "score": <integer {d.min_score}-{d.max_score}>}}'
        for d in rubric.dimensions
    )
    text = f'{{"dimensions": {{{dims}}}'
    if rubric.flag_gates:
        text += ', "flags": {' + ", ".join(f'"{g.name}": <true|false>' for g in rubric.flag_gates) + "}"
    return text + "}"


def _fail(code: ParseErrorCode, message: str) -> ParseResult:
    return ParseResult(error_code=code, error=message)


def _load_object(text: str) -> tuple[Any, ParseResult | None]:
    answer, _ = strip_thinking(text)
    answer = answer.strip()
    if not answer:
        return None, _fail("empty", "the answer is empty")
    candidates = [answer]
    blocks = find_code_blocks(answer)
    if len(blocks) == 1 and blocks[0].info in ("", "json"):
        candidates.append(blocks[0].code)
    for c in candidates:
        try:
            return json.loads(c), None
        except json.JSONDecodeError:
            continue
    return None, _fail("not_json", "the answer is not a JSON object (no prose or code fences around it)")


def parse_answer(text: str | None, rubric: Rubric) -> ParseResult:
    """Parse and validate one answer against the rubric."""
    if text is None or not text.strip():
        return _fail("empty", "the answer is empty")
    data, failure = _load_object(text)
    if failure is not None:
        return failure
    if not isinstance(data, dict):
        return _fail("not_object", f"the answer is a JSON {type(data).__name__}, not an object")
    dims = data.get("dimensions")
    if not isinstance(dims, dict):
        return _fail("not_object", "`dimensions` is missing or not an object")

    names = [d.name for d in rubric.dimensions]
    unknown = sorted(set(dims) - set(names))
    if unknown:
        return _fail("unknown_dimension", f"unknown dimension(s) {unknown}; the dimensions are {names}")
    missing = [n for n in names if n not in dims]
    if missing:
        return _fail("missing_dimension", f"missing dimension(s) {missing}")

    scores: dict[str, int] = {}
    rationales: dict[str, str] = {}
    for d in rubric.dimensions:
        entry = dims[d.name]
        if not isinstance(entry, dict):
            return _fail("bad_score", f"{d.name}: expected an object with `rationale` and `score`")
        score = entry.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            return _fail("bad_score", f"{d.name}: score {score!r} is not an integer")
        if isinstance(score, float):
            if not score.is_integer():
                return _fail("bad_score", f"{d.name}: score {score!r} is not an integer")
            score = int(score)
        if not d.min_score <= score <= d.max_score:
            return _fail("out_of_range", f"{d.name}: score {score} is outside {d.min_score}..{d.max_score}")
        rationale = entry.get("rationale")
        if not isinstance(rationale, str) or not rationale.strip():
            return _fail("bad_rationale", f"{d.name}: `rationale` must be a non-empty string")
        scores[d.name] = score
        rationales[d.name] = rationale.strip()[:MAX_RATIONALE_CHARS]

    flag_names = [g.name for g in rubric.flag_gates]
    flags: dict[str, bool] = {}
    if flag_names:
        raw_flags = data.get("flags")
        if not isinstance(raw_flags, dict):
            return _fail("missing_flag", f"`flags` is missing or not an object; it needs {flag_names}")
        unknown = sorted(set(raw_flags) - set(flag_names))
        if unknown:
            return _fail("unknown_flag", f"unknown flag(s) {unknown}; the flags are {flag_names}")
        for name in flag_names:
            if name not in raw_flags:
                return _fail("missing_flag", f"missing flag {name!r}")
            if not isinstance(raw_flags[name], bool):
                return _fail("bad_flag", f"flag {name!r} must be true or false, not {raw_flags[name]!r}")
            flags[name] = raw_flags[name]
    return ParseResult(answer=ParsedAnswer(scores=scores, rationales=rationales, flags=flags))
