"""The Judgment: what a rubric judge concluded about one candidate.

It crosses process boundaries (reward workers, JSONL logs, the cache), so every field is documented. A
Judgment is returned for every request and never raised: when the judge itself fails, the scores are the
rubric's neutral values and ``judge_failed`` is set, so that rewards can mask the sample instead of scoring it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

JUDGMENT_SCHEMA_VERSION = 1
JudgeKind = Literal["llm", "heuristic"]


class Usage(BaseModel):
    """Tokens spent, as reported by the endpoint (0 for the heuristic judge)."""

    prompt_tokens: int = Field(default=0, description="Prompt tokens over every request made.")
    completion_tokens: int = Field(default=0, description="Completion tokens over every request made.")
    total_tokens: int = Field(default=0, description="prompt_tokens + completion_tokens.")

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class JudgeIdentity(BaseModel):
    """Who judged, with what rubric and prompt: enough to reproduce or invalidate a judgment."""

    kind: JudgeKind = Field(description="llm: a model behind an OpenAI-compatible endpoint; heuristic: offline rules.")
    label: str = Field(description="One line for people, e.g. 'heuristic (offline rules, not an LLM)'.")
    model: str | None = Field(default=None, description="Model name sent to the endpoint (llm).")
    base_url: str | None = Field(default=None, description="Endpoint base URL (llm).")
    rubric: str = Field(description="Rubric name.")
    rubric_version: int = Field(description="Rubric version.")
    rubric_hash: str = Field(description="sha256 of the rubric's validated content.")
    prompt: str | None = Field(default=None, description="Prompt template name (llm).")
    prompt_version: int | None = Field(default=None, description="Prompt template version (llm).")
    prompt_hash: str | None = Field(default=None, description="sha256 of the prompt template (llm).")
    temperature: float | None = Field(default=None, description="Sampling temperature (llm).")
    samples: int = Field(default=1, description="Samples requested per judgment; scores are their mean.")
    code_version: str = Field(description="rubric-rl version (and heuristic version) that produced the judgment.")


class DimensionScore(BaseModel):
    """One dimension's score: the mean over the successful samples, on the dimension's own level range."""

    name: str = Field(description="Dimension name from the rubric.")
    score: float = Field(description="Mean score over successful samples (the neutral score on failure).")
    normalised: float = Field(ge=0.0, le=1.0, description="score mapped to [0, 1] over the level range.")
    weight: float = Field(description="The rubric's weight (before normalisation by the sum).")
    min_score: int = Field(description="Lowest level of the dimension.")
    max_score: int = Field(description="Highest level of the dimension.")
    sample_scores: list[int] = Field(default_factory=list, description="Each successful sample's score.")
    rationale: str = Field(description="Rationale of the sample closest to the mean (or why it is a fallback).")


class GateResult(BaseModel):
    """One rubric gate and whether it fired."""

    name: str = Field(description="Gate name from the rubric.")
    fired: bool = Field(description="The gate's condition held; its effect was applied to the total.")
    effect: Literal["zero", "cap"] = Field(description="What a fired gate does to the total.")
    cap: float | None = Field(default=None, description="Upper bound of the total (effect cap).")
    reasons: list[str] = Field(default_factory=list, description="Which triggers held (empty when not fired).")


class SampleRecord(BaseModel):
    """One sample of the judge: its answer, or why it has none."""

    index: int = Field(description="Sample index within the judgment.")
    ok: bool = Field(description="The sample produced a valid answer.")
    error: str | None = Field(
        default=None,
        description="Why not: 'http_<status>', 'timeout', 'connection', 'bad_response', 'unparseable:<code>'.",
    )
    error_detail: str | None = Field(default=None, description="The last error message (bounded).")
    attempts: int = Field(default=0, description="HTTP requests made for this sample, retries and repairs included.")
    repairs: int = Field(default=0, description="Repair prompts sent after unparseable answers.")
    response_format: str | None = Field(default=None, description="json_schema | json_object | none (llm).")
    latency_s: float = Field(default=0.0, description="Wall time of the sample, retries and backoff included.")
    usage: Usage = Field(default_factory=Usage, description="Tokens spent by this sample.")
    scores: dict[str, int] = Field(default_factory=dict, description="Dimension -> score (ok samples).")
    flags: dict[str, bool] = Field(default_factory=dict, description="Gate flag -> value (ok samples).")
    rationales: dict[str, str] = Field(default_factory=dict, description="Dimension -> rationale (ok samples).")


class Judgment(BaseModel):
    """What a judge concluded about one candidate. Returned for every request; never raised."""

    schema_version: int = Field(default=JUDGMENT_SCHEMA_VERSION, description="Version of this schema.")
    identity: JudgeIdentity = Field(description="The judge, rubric and prompt that produced this judgment.")
    task_id: str | None = Field(default=None, description="Task id from the request, when given.")
    skill: str = Field(description="Skill the candidate answered (generate | refine | ...).")
    candidate_sha256: str = Field(description="sha256 of the candidate program (joins with the Verdict).")
    prompt_sha256: str | None = Field(default=None, description="sha256 of the messages sent (llm).")
    dimensions: list[DimensionScore] = Field(description="Per-dimension scores, in rubric order.")
    raw_total: float = Field(ge=0.0, le=1.0, description="Weighted mean of normalised scores, before gates.")
    total: float = Field(ge=0.0, le=1.0, description="raw_total after the fired gates' effects.")
    gates: list[GateResult] = Field(default_factory=list, description="Every rubric gate, fired or not.")
    judge_failed: bool = Field(
        default=False,
        description="No sample succeeded: the scores are neutral fallbacks. Rewards should mask this sample.",
    )
    failure: str | None = Field(default=None, description="Why the judge failed (judge_failed).")
    samples: list[SampleRecord] = Field(default_factory=list, description="Every sample, failed ones included.")
    usage: Usage = Field(default_factory=Usage, description="Tokens over all samples (of the original call on a hit).")
    latency_s: float = Field(default=0.0, description="Wall time of this judge call (a cache lookup on a hit).")
    cache_hit: bool = Field(default=False, description="Served from the cache or an identical in-flight request.")
    verdict_status: str | None = Field(default=None, description="Status of the Verdict the judge saw, if any.")
    notes: list[str] = Field(default_factory=list, description="Caveats: heuristic, no Verdict, truncated input...")

    @property
    def gates_fired(self) -> list[str]:
        return [g.name for g in self.gates if g.fired]

    @property
    def scores(self) -> dict[str, float]:
        return {d.name: d.score for d in self.dimensions}
