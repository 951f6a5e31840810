"""The records a rollout writes: one ``Turn`` per planner or coder step (``turns.jsonl``) and one ``TaskResult``
per finished task (``results.jsonl``). Reports read only these; nothing re-runs a program to report on it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from rubric_rl.agents.pcv.chat import ChatReply
from rubric_rl.agents.pcv.config import Track
from rubric_rl.agents.pcv.plan import Plan
from rubric_rl.agents.pcv.profiling import ReferenceProfile
from rubric_rl.sandbox import Verdict

SCHEMA_VERSION = 1
StopReason = Literal["target_speedup", "max_turns", "wall_time", "max_tokens"]


class Citation(BaseModel):
    """A documentation passage the Verifier's optimisation feedback cites."""

    index: int = Field(description="Its number in the feedback: [1], [2], ...")
    source: str = Field(description="File, relative to the docs folder.")
    heading: str = Field(default="", description="Nearest heading above the passage.")
    score: float = Field(description="BM25 score of the passage for the query.")
    excerpt: str


class Turn(BaseModel):
    """One step of a task's loop: a plan (planner) or a program with its Verdict and feedback (coder + verifier)."""

    schema_version: int = SCHEMA_VERSION
    task_id: str
    index: int = Field(ge=0, description="Position among the task's turns (planner and coder), from 0.")
    role: Literal["planner", "coder"]
    kind: Literal["plan", "replan", "generate", "refine"]
    coder_turn: int | None = Field(default=None, description="Coder turns so far, this one included (coder only).")
    started_at: float = Field(description="Unix time the turn began.")
    seconds: float = Field(description="Wall time of the whole turn.")
    stages: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds per stage: profile_s, planner_llm_s (planner); coder_llm_s, sandbox_s, verifier_s.",
    )
    llm: ChatReply | None = Field(default=None, description="The model call(s): tokens, attempts, error.")
    response: str | None = Field(default=None, description="The model's answer as received.")
    endpoint_error: str | None = Field(default=None, description="The endpoint failed after retries.")
    # planner
    replan_reason: str | None = None
    profile: ReferenceProfile | None = None
    plan: Plan | None = None
    plan_error: str | None = Field(default=None, description="Why the answer is no valid plan.")
    # coder + verifier
    refined_turn: int | None = Field(default=None, description="Index of the turn whose program was refined.")
    program: str | None = None
    extraction_error: str | None = Field(default=None, description="Why no program was found in the answer.")
    verdict: Verdict | None = None
    feedback: str | None = Field(default=None, description="The Verifier's feedback on this program.")
    citations: list[Citation] = Field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.llm.tokens if self.llm is not None else 0

    @property
    def infra_failed(self) -> bool:
        return self.verdict is not None and self.verdict.infra_error is not None


class TaskResult(BaseModel):
    """A finished task: its best program's Verdict (the best correct one, else the last), and how it got there."""

    schema_version: int = SCHEMA_VERSION
    task_id: str
    task_name: str
    level: int | None = None
    run: str = Field(description="The run definition's name.")
    track: Track
    status: str = Field(description="Status of the kept program's Verdict ('none': no program at all).")
    best_turn: int | None = Field(default=None, description="Index of the turn whose program is kept.")
    program: str | None = None
    verdict: Verdict | None = None
    coder_turns: int
    plans: int
    first_correct_turn: int | None = Field(default=None, description="Coder turn (1-based) of the first correct.")
    statuses: list[str] = Field(default_factory=list, description="Verdict status of every coder turn, in order.")
    stop_reason: StopReason
    tokens: int
    seconds: float = Field(description="Wall time of the task's turns.")
    stage_seconds: dict[str, float] = Field(default_factory=dict, description="Seconds per stage, summed.")
    finished_at: float
