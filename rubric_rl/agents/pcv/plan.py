"""The Planner's structured plan: what the LLM must answer, validated, and how it is shown to the Coder."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Bottleneck(BaseModel):
    model_config = ConfigDict(extra="ignore")

    op: str = Field(description="Operator or region of the reference, as the profile names it.")
    share: float | None = Field(default=None, ge=0, le=1, description="Its share of the reference's time.")
    reason: str = Field(description="Why it is slow: memory-bound, launch-bound, compute-bound, ...")


class FusionGroup(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="Name of the kernel this group becomes.")
    ops: list[str] = Field(min_length=1, description="Reference operators computed inside this one kernel.")
    boundary: str = Field(description="Why the kernel ends here (a reduction, a GEMM, a sync point, ...).")


class TensorSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    shape: list[int | str] = Field(description="Dimensions (numbers, or names of constructor arguments).")
    dtype: str


class Orchestration(BaseModel):
    model_config = ConfigDict(extra="ignore")

    launch: str = Field(description="Grid/block configuration and how it follows the shapes.")
    cuda_graphs: bool = Field(default=False, description="Capture the forward's launches in a CUDA graph.")
    streams: str = Field(default="the current stream only", description="Stream use.")
    data_movement: str = Field(default="", description="Host/device copies, layouts, buffers reused across calls.")


class Plan(BaseModel):
    """A program plan: the answer the Planner's LLM must give, as one JSON object."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(description="The approach in two sentences.")
    bottlenecks: list[Bottleneck] = Field(default_factory=list)
    fusion_groups: list[FusionGroup] = Field(min_length=1, description="Kernels of the program, in order.")
    tensors: list[TensorSpec] = Field(default_factory=list, description="Shapes and dtypes the kernels handle.")
    orchestration: Orchestration
    risks: list[str] = Field(default_factory=list, description="Correctness risks: precision, bounds, aliasing...")


def plan_schema() -> dict[str, Any]:
    return Plan.model_json_schema()


def render_plan(plan: Plan) -> str:
    """The plan as the Markdown section the Coder reads."""
    lines = [f"Summary: {plan.summary}"]
    if plan.bottlenecks:
        lines.append("Bottlenecks:")
        for b in plan.bottlenecks:
            share = f" ({100 * b.share:.0f}% of time)" if b.share is not None else ""
            lines.append(f"- {b.op}{share}: {b.reason}")
    lines.append("Kernels (fusion groups, in order):")
    for i, g in enumerate(plan.fusion_groups, start=1):
        lines.append(f"{i}. {g.name}: {', '.join(g.ops)} (boundary: {g.boundary})")
    if plan.tensors:
        lines.append("Tensors:")
        lines += [f"- {t.name}: [{', '.join(str(d) for d in t.shape)}] {t.dtype}" for t in plan.tensors]
    o = plan.orchestration
    lines.append(f"Launch: {o.launch}")
    lines.append(f"CUDA graphs: {'yes' if o.cuda_graphs else 'no'}; streams: {o.streams}")
    if o.data_movement:
        lines.append(f"Data movement: {o.data_movement}")
    if plan.risks:
        lines.append("Correctness risks:")
        lines += [f"- {r}" for r in plan.risks]
    return "\n".join(lines)


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)
_THINK = re.compile(r"^.*</think\s*>", re.DOTALL | re.IGNORECASE)


def parse_plan(text: str | None) -> tuple[Plan | None, str | None]:
    """(plan, None) or (None, why not): the last JSON object of the answer (fenced or bare), validated."""
    if not text or not text.strip():
        return None, "the answer is empty"
    body = _THINK.sub("", text).strip()
    candidates = [m.group(1) for m in _FENCE.finditer(body)] or [body]
    if body not in candidates:
        candidates.append(body)
    last_error = "no JSON object in the answer"
    for chunk in reversed(candidates):
        start, end = chunk.find("{"), chunk.rfind("}")
        if start < 0 or end <= start:
            continue
        try:
            data = json.loads(chunk[start : end + 1])
        except json.JSONDecodeError as e:
            last_error = f"not valid JSON: {e.msg} at line {e.lineno}"
            continue
        try:
            return Plan.model_validate(data), None
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            last_error = f"the plan does not validate: field {loc}: {err['msg']}"
    return None, last_error
