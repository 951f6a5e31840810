"""Rewards: rule rewards (milestone, speedup), rubric mixes (stitchcuda, weighted, none), the hack penalty,
masking of infrastructure failures, the reward ledger; the verl adapter lives in ``rubric_rl.reward.verl``.

    config = RewardConfig.from_yaml("reward.yaml")
    s = score_sample(verdict, judgment, skill="generate", config=config)     # pure: no I/O
    records = recompute(read_ledger(run_dir), config)                      # another scheme, same rollouts
"""

from rubric_rl.reward.config import (
    LedgerConfig,
    MaskingConfig,
    MetricsConfig,
    MixConfig,
    RewardConfig,
    RewardConfigError,
    RuleConfig,
    ServiceConfig,
)
from rubric_rl.reward.groups import GroupBoard, group_mean
from rubric_rl.reward.ledger import LedgerWriter, read_ledger, write_ledger
from rubric_rl.reward.mix import Score, needs_judgment, score_sample
from rubric_rl.reward.record import RewardRecord, StageSeconds, recompute
from rubric_rl.reward.rules import milestone, rule_reward, speedup

__all__ = [
    "GroupBoard",
    "LedgerConfig",
    "LedgerWriter",
    "MaskingConfig",
    "MetricsConfig",
    "MixConfig",
    "RewardConfig",
    "RewardConfigError",
    "RewardRecord",
    "RuleConfig",
    "Score",
    "ServiceConfig",
    "StageSeconds",
    "group_mean",
    "milestone",
    "needs_judgment",
    "read_ledger",
    "recompute",
    "rule_reward",
    "score_sample",
    "speedup",
    "write_ledger",
]
