"""Rubric mixes: the rule reward and the judge's total r in [0, 1] combined into one score, selected by name.

- ``stitchcuda``: (rule + offset) x (1 + lambda_skill x (r - 0.5)), where the rule is the clipped speedup
  (min(speedup, cap)); 0 when the sample is not correct or when the rubric's hack gate fired.
- ``weighted``: alpha x rule + beta x r (r = 0 for code that does not compile: it is not judged).
- ``none``: the rule alone; no judge is consulted.

Before any mix: a ``hack`` Verdict gets ``hack_penalty``, whatever else holds (a proven hack is never masked);
a Verdict with ``infra_error`` is masked; so is a sample whose reward needs a judgment the judge failed to give.
A masked sample has no score of its own: the group decides it (rubric_rl.reward.groups).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from rubric_rl.judge import Judgment
from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.rules import rule_reward
from rubric_rl.sandbox import Verdict


class Score(BaseModel):
    """One sample's reward before group masking."""

    score: float | None = Field(description="The reward; None when masked (the group decides it).")
    components: dict[str, float] = Field(default_factory=dict, description="Every term the score was made of.")
    masked: bool = Field(default=False, description="Infrastructure or judge failure: not trained on.")
    mask_reason: str | None = Field(default=None, description="Why it is masked.")


def compiled(verdict: Verdict) -> bool:
    return verdict.status not in ("compile_error",) and verdict.infra_error is None


def needs_judgment(verdict: Verdict, config: RewardConfig) -> bool:
    """Whether this Verdict's reward depends on a judgment under ``config``."""
    if verdict.status == "hack" or verdict.infra_error is not None or not config.mix.uses_judge:
        return False
    if config.mix.name == "stitchcuda":
        return verdict.status == "correct"
    return compiled(verdict)


def _gate_fired(judgment: Judgment, gate: str) -> bool:
    return any(g.name == gate and g.fired for g in judgment.gates)


def _mask(components: dict[str, float], reason: str) -> Score:
    return Score(score=None, components=components, masked=True, mask_reason=reason)


def score_sample(verdict: Verdict, judgment: Judgment | None, skill: str, config: RewardConfig) -> Score:
    """The reward of one sample (before its group fills in a masked score)."""
    if verdict.status == "hack":
        return Score(score=config.hack_penalty, components={"hack_penalty": config.hack_penalty})
    if verdict.infra_error is not None:
        return _mask({}, f"infra: {verdict.infra_error}")
    rule = rule_reward(verdict, config.rule)
    components = {"rule": rule}
    mix = config.mix
    if mix.name == "none":
        return Score(score=rule, components=components)
    if needs_judgment(verdict, config):
        if judgment is None:
            return _mask(components, "judge: no judgment for a sample whose reward needs one")
        if judgment.judge_failed:
            return _mask(components, f"judge: {judgment.failure or 'failed'}")
        components["rubric"] = judgment.total
    r = components.get("rubric", 0.0)
    if mix.name == "weighted":
        return Score(score=mix.alpha * rule + mix.beta * r, components=components)
    # stitchcuda
    if skill not in mix.lambdas:
        raise ValueError(f"mix.lambdas: no lambda for skill {skill!r} (have {sorted(mix.lambdas)})")
    if verdict.status != "correct":
        return Score(score=0.0, components=components)
    assert judgment is not None  # needs_judgment held for a correct sample
    if _gate_fired(judgment, mix.hack_gate):
        components["hack_gate"] = 1.0
        return Score(score=0.0, components=components)
    lam = mix.lambdas[skill]
    multiplier = 1.0 + lam * (r - 0.5)
    components.update({"lambda": lam, "multiplier": multiplier, "hack_gate": 0.0})
    return Score(score=(rule + mix.offset) * multiplier, components=components)
