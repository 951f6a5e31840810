"""The judge plug-in point: anything that turns a JudgeRequest into a Judgment.

Implementations: ``LLMJudge`` (an OpenAI-compatible endpoint, rubric_rl.judge.client) and ``HeuristicJudge``
(offline rules, rubric_rl.judge.offline). ``judge`` never raises for a failure of the judge itself (it returns
a Judgment with ``judge_failed``); it raises only for a programming or configuration error, such as a request
for a skill the rubric does not cover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rubric_rl.judge.record import JudgeIdentity, Judgment
from rubric_rl.judge.request import JudgeRequest
from rubric_rl.judge.rubric import Rubric


@runtime_checkable
class Judge(Protocol):
    """Scores candidates against one rubric."""

    rubric: Rubric
    identity: JudgeIdentity

    async def judge(self, request: JudgeRequest) -> Judgment: ...

    async def aclose(self) -> None: ...


async def judge_all(judge: Judge, requests: Sequence[JudgeRequest]) -> list[Judgment]:
    """Judgments in request order; concurrency is bounded by the judge itself."""
    return list(await asyncio.gather(*(judge.judge(r) for r in requests)))
