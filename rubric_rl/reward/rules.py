"""Rule rewards: what a Verdict alone is worth, selected by name (``RuleConfig.name``).

- ``milestone`` (CUDA Agent): ``fail`` for a compile error, a wrong result, a crash or a timeout; ``correct``;
  ``faster_than_eager`` when the speedup over eager is strictly above 1 + margin; ``faster_than_both`` when the
  speedup over torch.compile is too. A speedup exactly at 1 + margin is not faster.
- ``speedup``: 0 unless correct; a correct sample's speedup over the chosen baseline, clipped to
  [clip_min, clip_max] (over eager where no compile timing exists; ``untimed`` where nothing was timed).

A ``hack`` Verdict never reaches a rule: the mix gives it the hack penalty (rubric_rl.reward.mix).
"""

from __future__ import annotations

from collections.abc import Callable

from rubric_rl.reward.config import RuleConfig
from rubric_rl.sandbox import Verdict

RuleFn = Callable[[Verdict, RuleConfig], float]


def speedup_over(verdict: Verdict, baseline: str) -> float | None:
    """The Verdict's speedup over ``baseline`` (compile falls back to eager when compile was not timed)."""
    if baseline == "compile" and verdict.speedup_compile is not None:
        return verdict.speedup_compile
    return verdict.speedup_eager


def milestone(verdict: Verdict, config: RuleConfig) -> float:
    if verdict.status != "correct":
        return config.fail
    threshold = 1.0 + config.margin
    eager, compiled = verdict.speedup_eager, verdict.speedup_compile
    if eager is None or eager <= threshold:
        return config.correct
    if compiled is not None and compiled > threshold:
        return config.faster_than_both
    return config.faster_than_eager


def speedup(verdict: Verdict, config: RuleConfig) -> float:
    if verdict.status != "correct":
        return 0.0
    value = speedup_over(verdict, config.baseline)
    if value is None:
        value = config.untimed
    return min(max(value, config.clip_min), config.clip_max)


RULES: dict[str, RuleFn] = {"milestone": milestone, "speedup": speedup}


def rule_reward(verdict: Verdict, config: RuleConfig) -> float:
    """The configured rule's reward for a Verdict that is not a hack."""
    return RULES[config.name](verdict, config)
