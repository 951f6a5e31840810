"""The final reward of a trajectory: a fresh full evaluation of the program it ends with, through the reward
verl trains on (``rubric_rl.reward.verl.compute_score``; the milestone rule by default).

Nothing the tools computed enters it: the program is evaluated again, by the reward's executor, with the
reward's seed (which the tools' seed keeps away from), so a program that is right only on what the tools
showed is scored on inputs it never met.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from rubric_rl.reward.verl import compute_score

AGENT_KEYS = ("agent_submitted", "agent_scored_last_written", "agent_turns", "agent_tool_calls", "agent_tool_errors")


class FinalReward(BaseModel):
    """The score of a trajectory and verl's extra keys for it (the reward's own, then ``AGENT_KEYS``)."""

    score: float
    source: str = Field(description="Which program was scored: submitted, last_written or none.")
    info: dict[str, float] = Field(description="compute_score's keys plus the agent's, all floats.")


def as_response(program: str | None) -> str:
    """A coder response holding exactly ``program`` (fenced longer than any backtick run inside it)."""
    if program is None:
        return ""
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", program)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}python\n{program.rstrip()}\n{fence}\n"


async def final_reward(
    program: str | None,
    source: str,
    *,
    data_source: str,
    reference: str,
    extra_info: Mapping[str, Any] | None,
    reward_kwargs: Mapping[str, Any],
    turns: int,
    tool_calls: int,
    tool_errors: int,
) -> FinalReward:
    """Score ``program`` (None: a response with no program, the reward's extraction failure) as verl would."""
    result = await compute_score(
        data_source=data_source,
        solution_str=as_response(program),
        ground_truth=reference,
        extra_info=dict(extra_info or {}),
        **dict(reward_kwargs),
    )
    info = {k: float(v) for k, v in result.items()}
    info.update(
        agent_submitted=float(source == "submitted"),
        agent_scored_last_written=float(source == "last_written"),
        agent_turns=float(turns),
        agent_tool_calls=float(tool_calls),
        agent_tool_errors=float(tool_errors),
    )
    return FinalReward(score=float(result["score"]), source=source, info=info)
