"""The RewardRecord: one scored sample, with everything its reward was made from.

It is what the reward ledger holds (one JSON line each) and what later stages read by field name: the skill
dataset builder (refine rows from failed or slow programs, rejection fine-tuning from good ones) and
``rubric-rl reward recompute``. A reward is recomputable from records alone: ``recompute`` scores each record's
Verdict and Judgment under a config and fills masked samples from the recomputed scores of the same peers
their group mean was taken over, so the same config gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from rubric_rl.judge import Judgment
from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.groups import group_mean
from rubric_rl.reward.mix import score_sample
from rubric_rl.sandbox import Verdict

RECORD_SCHEMA_VERSION = 1


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class StageSeconds(BaseModel):
    """Wall-clock seconds of the reward's stages for one sample."""

    extract_s: float = Field(default=0.0, description="Finding the program in the response.")
    evaluate_s: float = Field(default=0.0, description="The evaluation (queueing in the service included).")
    judge_s: float = Field(default=0.0, description="The judge call (0 when not judged).")
    group_wait_s: float = Field(default=0.0, description="A masked sample waiting for its group.")
    total_s: float = Field(default=0.0, description="The whole reward call.")


class RewardRecord(BaseModel):
    """One scored sample. Field names are a contract: the dataset builder reads ledgers by them."""

    schema_version: int = Field(default=RECORD_SCHEMA_VERSION, description="Version of this schema.")
    sample_id: str = Field(description="Unique id of this scored sample (joins group peers).")
    task_id: str | None = Field(default=None, description="Task id from the dataset row's extra_info.")
    data_source: str = Field(description="verl's data_source of the row.")
    skill: str = Field(description="generate | refine (the row's skill).")
    split: str | None = Field(default=None, description="train | val, from the row's extra_info.")
    level: int | None = Field(default=None, description="KernelBench level of the task, when it has one.")
    index: int | None = Field(default=None, description="The row's index in its dataset (extra_info.index).")
    prompt: list[dict[str, Any]] = Field(default_factory=list, description="The chat messages the coder saw.")
    response: str = Field(description="The coder's whole response.")
    program: str | None = Field(default=None, description="The program extracted from the response.")
    extraction_error: str | None = Field(default=None, description="Why no program was found (then compile_error).")
    previous: str | None = Field(default=None, description="refine: the program that was being refined.")
    feedback: str | None = Field(default=None, description="refine: the feedback the response answers.")
    verdict: Verdict = Field(description="The sandbox's Verdict (for an extraction failure, one built here).")
    judgment: Judgment | None = Field(default=None, description="The rubric judgment, when one was used.")
    components: dict[str, float] = Field(default_factory=dict, description="Every term of the score.")
    own_score: float | None = Field(default=None, description="The sample's own score; None when masked.")
    score: float = Field(description="The reward given to the trainer (a masked sample's is its group's mean).")
    masked: bool = Field(default=False, description="Infrastructure or judge failure: must not be trained on.")
    mask_reason: str | None = Field(default=None, description="Why it is masked.")
    group_id: str | None = Field(default=None, description="verl's uid: the prompt's GRPO group.")
    group_size: int | None = Field(default=None, description="Samples per group (rollout.n).")
    group_peers: list[str] | None = Field(
        default=None, description="Masked samples: the sample_ids whose own scores made the group mean."
    )
    config_hash: str = Field(description="RewardConfig.scoring_hash() of the config that scored it.")
    seconds: StageSeconds = Field(default_factory=StageSeconds, description="Stage times.")
    created_at: str = Field(default_factory=utc_now, description="When it was scored (UTC, ISO 8601).")


def recompute(records: Sequence[RewardRecord], config: RewardConfig) -> list[RewardRecord]:
    """Every record scored again under ``config``; masked samples take the mean of their recorded peers'
    recomputed scores (or, where the config turns group means off or none is left, the fallback score)."""
    own: dict[str, float | None] = {}
    groups: dict[str, list[str]] = {}
    rescored = []
    for r in records:
        s = score_sample(r.verdict, r.judgment, r.skill, config)
        own[r.sample_id] = s.score
        if r.group_id is not None:
            groups.setdefault(r.group_id, []).append(r.sample_id)
        rescored.append((r, s))
    out = []
    for r, s in rescored:
        update: dict[str, Any] = {
            "components": s.components,
            "own_score": s.score,
            "masked": s.masked,
            "mask_reason": s.mask_reason,
            "config_hash": config.scoring_hash(),
            "score": s.score,
            "group_peers": None,
        }
        if s.score is None:
            grouped = config.masking.group_mean and r.group_id is not None
            # The peers recorded when it was scored, else (masked only under this config) its group in the records.
            candidates = r.group_peers if r.group_peers is not None else groups.get(r.group_id or "", [])
            peers = [p for p in candidates if p != r.sample_id and own.get(p) is not None] if grouped else []
            scores = [own[p] for p in peers]
            update.update(
                score=group_mean([x for x in scores if x is not None], config.masking.fallback_score),
                group_peers=peers if grouped else None,
            )
        out.append(r.model_copy(update=update))
    return out
