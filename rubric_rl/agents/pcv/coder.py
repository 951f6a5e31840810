"""The Coder: the trained model, prompted with the skill cards it was trained on.

The first program of a task (and the first after a replan that left no correct program) comes from the
``generate`` card, every later one from the ``refine`` card with the previous program and the Verifier's
feedback: the prompts of training, so the model meets at inference the format it learned. The plan, when the
run has one and a ``plan_prompt`` file, is appended to the card's user message.
"""

from __future__ import annotations

from pydantic import BaseModel

from rubric_rl.agents.pcv.chat import ChatClient, ChatReply, Message
from rubric_rl.agents.pcv.config import CoderConfig
from rubric_rl.agents.pcv.plan import Plan, render_plan
from rubric_rl.agents.pcv.prompts import fill, load_prompt
from rubric_rl.skills import Extraction, extract_program, load_skill
from rubric_rl.tasks import Task


class Draft(BaseModel):
    """The coder's answer and the program found in it (or why none was)."""

    reply: ChatReply
    extraction: Extraction | None = None


class Coder:
    def __init__(self, config: CoderConfig, backend: str, client: ChatClient) -> None:
        self.config = config
        self.backend = backend
        self.client = client
        self.generate_card = load_skill(config.generate_skill)
        self.refine_card = load_skill(config.refine_skill)
        self.plan_prompt = load_prompt(config.plan_prompt, frozenset({"plan"})) if config.plan_prompt else None

    def messages(
        self, task: Task, plan: Plan | None, *, program: str | None = None, feedback: str | None = None
    ) -> list[Message]:
        """generate when ``program`` is None, else refine of ``program`` with ``feedback``."""
        if program is None:
            messages = self.generate_card.render(reference=task.code, backend=self.backend)  # type: ignore[arg-type]
        else:
            messages = self.refine_card.render(
                reference=task.code,
                backend=self.backend,  # type: ignore[arg-type]
                candidate=program,
                feedback=feedback or "",
            )
        if plan is not None and self.plan_prompt is not None:
            last = messages[-1]
            messages[-1] = {
                **last,
                "content": last["content"] + "\n\n" + fill(self.plan_prompt, {"plan": render_plan(plan)}),
            }
        return messages

    async def write(
        self, task: Task, plan: Plan | None, *, program: str | None = None, feedback: str | None = None
    ) -> Draft:
        reply = await self.client.complete(self.messages(task, plan, program=program, feedback=feedback))
        if reply.error is not None:
            return Draft(reply=reply)
        return Draft(reply=reply, extraction=extract_program(reply.content or ""))
