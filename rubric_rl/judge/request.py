"""A judge request: one candidate with everything a judge may see about it.

``build_request`` fills the skill's part from its card: the instructions the coder was given, rendered with
the programs left out (they travel in their own data blocks), and the card's output contract.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.skills.cards import SkillCard, SkillContract, load_skill

Backend = Literal["cuda", "cpu"]


class JudgeRequest(BaseModel):
    """One candidate to judge."""

    reference: str = Field(description="The task's reference program (Model, get_inputs, get_init_inputs).")
    candidate: str = Field(description="The program being judged (ModelNew); untrusted.")
    skill: str = Field(default="generate", description="Skill card the candidate answered.")
    skill_description: str = Field(default="", description="The card's one-line description.")
    instructions: str = Field(default="", description="What the coder was told, with the programs left out.")
    contract: SkillContract = Field(
        default_factory=lambda: SkillContract(from_scratch=True), description="The card's output contract."
    )
    backend: Backend = Field(default="cuda", description="cuda: CUDA kernels; cpu: C++/OpenMP extensions.")
    previous: str | None = Field(default=None, description="refine: the program that was being refined.")
    feedback: str | None = Field(default=None, description="refine: the feedback the candidate answers.")
    verdict: Verdict | None = Field(default=None, description="The sandbox's Verdict on the candidate, if run.")
    task_id: str | None = Field(default=None, description="Task id, copied into the Judgment.")

    @model_validator(mode="after")
    def _consistent(self) -> JudgeRequest:
        env = self.verdict.environment if self.verdict is not None else None
        if "backend" not in self.model_fields_set and env is not None and env.backend in ("cuda", "cpu"):
            self.backend = env.backend  # type: ignore[assignment]
        if not self.contract.from_scratch and not (self.feedback and self.feedback.strip()):
            raise ValueError(f"feedback: skill {self.skill!r} refines a program and needs the feedback it answered")
        return self

    @property
    def candidate_sha256(self) -> str:
        return hashlib.sha256(self.candidate.encode()).hexdigest()


def build_request(
    skill: SkillCard | str,
    reference: str,
    candidate: str,
    *,
    feedback: str | None = None,
    previous: str | None = None,
    verdict: Verdict | None = None,
    backend: Backend | None = None,
    task_id: str | None = None,
) -> JudgeRequest:
    """A request for a candidate that answered ``skill`` (a card, or a bundled name or path)."""
    card = skill if isinstance(skill, SkillCard) else load_skill(skill)
    if backend is None:
        env = verdict.environment if verdict is not None else None
        backend = "cpu" if env is not None and env.backend == "cpu" else "cuda"
    messages = card.render(
        reference="(the REFERENCE data block)",
        backend=backend,
        candidate="(the PREVIOUS data block)" if "candidate" in card.inputs else None,
        feedback="(the FEEDBACK data block)" if "feedback" in card.inputs else None,
    )
    instructions = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
    return JudgeRequest(
        reference=reference,
        candidate=candidate,
        skill=card.name,
        skill_description=card.description,
        instructions=instructions,
        contract=card.contract,
        backend=backend,
        previous=previous,
        feedback=feedback,
        verdict=verdict,
        task_id=task_id if task_id is not None else (verdict.task_id if verdict is not None else None),
    )
