"""A stand-in for ``rubric_rl.reward.verl`` (issue 35, built in parallel): the same call signature and a
``RewardConfig`` with the fields recipes set, so that pre-flight can import a reward function and load its config
before the real adapter lands. Loaded by path, as verl loads ``reward.custom_reward_function.path`` (so without
``from __future__ import annotations``: a module loaded by file is not in sys.modules for pydantic to resolve)."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class RewardConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: Literal["milestone", "speedup"] = "speedup"
    mix: Literal["stitchcuda", "weighted", "none"] = "stitchcuda"
    judge: dict[str, Any] = {}
    ledger_dir: str | None = None


async def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **kw: Any):
    RewardConfig.model_validate({k: v for k, v in kw.items() if k in RewardConfig.model_fields})
    return {"score": 1.0 if "ModelNew" in solution_str else -1.0}
