"""The Planner: profiles the reference and asks its model for a structured plan (``plan.Plan``), or a new one.

The prompts are files (``rollouts/prompts/planner_*.md``) filled with the reference, its profile, the device,
the history of the task so far (for a replan) and the plan's JSON schema. An answer that does not validate gets
``repair_attempts`` follow-ups saying what is wrong; if none validates, the turn records why and the loop goes on
without a plan (the coder still has the reference).
"""

from __future__ import annotations

import json
import time

from rubric_rl.agents.pcv.chat import ChatClient, ChatReply, Message
from rubric_rl.agents.pcv.config import PlannerConfig
from rubric_rl.agents.pcv.plan import Plan, parse_plan, plan_schema
from rubric_rl.agents.pcv.profiling import ReferenceProfile, profile_reference, render_profile
from rubric_rl.agents.pcv.prompts import PLANNER_FIELDS, fill, load_prompt
from rubric_rl.agents.pcv.records import Turn
from rubric_rl.tasks import Task


def merge_replies(a: ChatReply | None, b: ChatReply) -> ChatReply:
    """Two calls of one turn as one record: tokens, attempts and seconds added; the last answer kept."""
    if a is None:
        return b
    return b.model_copy(
        update={
            "prompt_tokens": a.prompt_tokens + b.prompt_tokens,
            "completion_tokens": a.completion_tokens + b.completion_tokens,
            "attempts": a.attempts + b.attempts,
            "seconds": a.seconds + b.seconds,
        }
    )


class Planner:
    def __init__(self, config: PlannerConfig, device: str, client: ChatClient) -> None:
        self.config = config
        self.device = device
        self.client = client
        self.system = load_prompt(config.system_prompt, PLANNER_FIELDS)
        self.user = load_prompt(config.user_prompt, PLANNER_FIELDS)
        self.schema = plan_schema()

    async def profile(self, task: Task) -> ReferenceProfile | None:
        if not self.config.profile:
            return None
        return await profile_reference(
            task.code, self.device, top=self.config.profile_top_ops, timeout_s=self.config.profile_timeout_s
        )

    def messages(self, task: Task, profile: ReferenceProfile | None, history: str) -> list[Message]:
        values = {
            "reference": task.code.strip(),
            "profile": render_profile(profile, self.config.profile_top_ops),
            "device": self.device,
            "history": history,
            "schema": json.dumps(self.schema, separators=(",", ":")),
        }
        return [
            {"role": "system", "content": fill(self.system, values)},
            {"role": "user", "content": fill(self.user, values)},
        ]

    def _response_format(self) -> dict | None:
        if self.config.structured_output == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "plan", "schema": self.schema}}
        if self.config.structured_output == "json_object":
            return {"type": "json_object"}
        return None

    async def plan(
        self, task: Task, *, index: int, history: str, reason: str | None, profile: ReferenceProfile | None = None
    ) -> Turn:
        """One planner turn: a plan (or why none). The first (``reason`` None) profiles the reference and records
        the profile; a replan shows the earlier ``profile`` again."""
        started, wall = time.time(), time.perf_counter()
        stages: dict[str, float] = {}
        if reason is None:
            profile = await self.profile(task)
            stages["profile_s"] = time.perf_counter() - wall
        conversation = self.messages(task, profile, history)
        reply: ChatReply | None = None
        plan: Plan | None = None
        error: str | None = None
        for attempt in range(self.config.repair_attempts + 1):
            answer = await self.client.complete(conversation, self._response_format())
            reply = merge_replies(reply, answer)
            if answer.error is not None:
                break
            plan, error = parse_plan(answer.content)
            if plan is not None or attempt == self.config.repair_attempts:
                break
            conversation = [
                *conversation,
                {"role": "assistant", "content": answer.content or ""},
                {"role": "user", "content": f"That is not a valid plan: {error}. Answer with the JSON object only."},
            ]
        assert reply is not None
        stages["planner_llm_s"] = reply.seconds
        return Turn(
            task_id=task.id,
            index=index,
            role="planner",
            kind="plan" if reason is None else "replan",
            started_at=started,
            seconds=time.perf_counter() - wall,
            stages=stages,
            llm=reply,
            response=reply.content,
            endpoint_error=reply.error,
            replan_reason=reason,
            profile=profile if reason is None else None,
            plan=plan,
            plan_error=None if plan is not None or reply.error else error,
        )
