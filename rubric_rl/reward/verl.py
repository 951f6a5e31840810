"""The reward function verl 0.9.1 calls: ``reward.custom_reward_function.path=pkg://rubric_rl.reward.verl``,
``name=compute_score``.

verl awaits ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **reward_kwargs)`` per
sample (``experimental/reward_loop/reward_manager/naive.py``); ``ground_truth`` is the reference program's
source, ``reward_kwargs`` are RewardConfig fields (``config`` names a YAML file of them). It returns
``{"score": ...}`` plus the same extra keys for every sample (verl takes the key set from the first one):
see ``extra_keys``. With no configuration at all it runs on the defaults, so
``from rubric_rl.reward.verl import compute_score`` works as it is in a notebook.

Group means for masked samples need the prompt's group id (verl's ``uid``) and size, which verl's own
managers do not pass: set ``reward.reward_manager`` to ``rubric_rl.reward.verl_manager.RubricRewardManager``
(``check_verl_config`` says so). This module imports nothing of verl; ``verl_manager`` does.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from rubric_rl.judge import load_rubric
from rubric_rl.reward.config import RewardConfig, RewardConfigError, plain
from rubric_rl.reward.mix import compiled
from rubric_rl.reward.record import RewardRecord
from rubric_rl.reward.runtime import get_scorer
from rubric_rl.reward.scorer import SampleInfo

log = logging.getLogger(__name__)

ENV_CONFIG = "RUBRIC_RL_REWARD_CONFIG"
MODULE_PATH = "pkg://rubric_rl.reward.verl"
MANAGER_PATH = "pkg://rubric_rl.reward.verl_manager"
MANAGER_NAME = "RubricRewardManager"
# Passed by our reward manager per sample, not reward config.
SAMPLE_KWARGS = ("group_id", "group_size", "prompt")
# Passed by verl's managers when a reward model is hosted; the judge is configured by RewardConfig.judge instead.
VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")
FLAGS = ("compiled", "correct", "hack", "judged", "judge_failed", "infra_error", "masked")
STAGES = ("extract_s", "evaluate_s", "judge_s", "group_wait_s", "total_s")

_config_lock = threading.Lock()
_configs: dict[str, RewardConfig] = {}


def config_from_kwargs(kwargs: Mapping[str, Any]) -> RewardConfig:
    """The RewardConfig of verl's reward_kwargs (or of ``$RUBRIC_RL_REWARD_CONFIG``, or the defaults), parsed
    once per distinct kwargs."""
    data = plain(kwargs)
    if not data and os.environ.get(ENV_CONFIG):
        data = {"config": os.environ[ENV_CONFIG]}
    key = json.dumps(data, sort_keys=True, default=str)
    with _config_lock:
        if key not in _configs:
            _configs[key] = RewardConfig.from_reward_kwargs(data)
        return _configs[key]


@lru_cache(maxsize=16)
def rubric_dimensions(rubric: str) -> tuple[str, ...]:
    return tuple(d.name for d in load_rubric(rubric).dimensions)


def extra_keys(config: RewardConfig) -> list[str]:
    """The keys of every result for ``config``, ``score`` first."""
    dims = [f"rubric_{d}" for d in rubric_dimensions(config.judge.rubric)] if config.mix.uses_judge else []
    return ["score", *FLAGS, "speedup_eager", "speedup_compile", "rubric_total", *dims, *STAGES]


def reward_info(record: RewardRecord, config: RewardConfig) -> dict[str, float]:
    """A record as verl's result: every key of ``extra_keys``, all floats (0 for what was not measured: a
    speedup of a sample that was not timed, the rubric of one that was not judged; ``judged`` says which)."""
    v, j = record.verdict, record.judgment
    flags = {
        "compiled": compiled(v),
        "correct": v.status == "correct",
        "hack": v.status == "hack",
        "judged": j is not None,
        "judge_failed": j is not None and j.judge_failed,
        "infra_error": v.infra_error is not None,
        "masked": record.masked,
    }
    out: dict[str, float] = {"score": float(record.score)}
    out.update({k: float(flags[k]) for k in FLAGS})
    out["speedup_eager"] = float(v.speedup_eager or 0.0)
    out["speedup_compile"] = float(v.speedup_compile or 0.0)
    out["rubric_total"] = float(j.total) if j is not None and not j.judge_failed else 0.0
    if config.mix.uses_judge:
        scores = {d.name: d.normalised for d in j.dimensions} if j is not None and not j.judge_failed else {}
        for d in rubric_dimensions(config.judge.rubric):
            out[f"rubric_{d}"] = float(scores.get(d, 0.0))
    seconds = record.seconds.model_dump()
    out.update({k: float(seconds[k]) for k in STAGES})
    return out


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response to a task whose reference program is ``ground_truth``."""
    sample = {k: kwargs.pop(k) for k in SAMPLE_KWARGS if k in kwargs}
    for k in VERL_KWARGS:
        kwargs.pop(k, None)
    config = config_from_kwargs(kwargs)
    info = SampleInfo.model_validate(plain(extra_info or {}))
    group_id = sample.get("group_id")
    if info.split == "val":
        group_id = None  # validation scores are only logged; nothing to wait for
    record = await get_scorer(config).score(
        data_source=str(data_source),
        response=solution_str,
        reference=ground_truth,
        info=info,
        prompt=list(plain(sample.get("prompt") or [])),
        group_id=str(group_id) if group_id is not None else None,
        group_size=int(sample["group_size"]) if sample.get("group_size") is not None else None,
    )
    return reward_info(record, config)


class VerlConfigError(ValueError):
    """A composed verl config that would not score with rubric-rl as intended; names the key."""


def _get(cfg: Any, dotted: str) -> Any:
    node = cfg
    for part in dotted.split("."):
        if node is None:
            return None
        node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
    return node


LEGACY_KEYS = (
    "custom_reward_function.path",
    "custom_reward_function.name",
    "reward_model.reward_manager",
    "reward_model.reward_loop_source",
    "reward_model.reward_loop_module_path",
    "reward_model.reward_loop_class_name",
    "reward_model.num_workers",
    "reward_model.reward_kwargs",
)


def check_verl_config(cfg: Any) -> list[str]:
    """Check a composed verl 0.9.1 config (a DictConfig or a plain mapping) for the rubric-rl reward. Raises
    VerlConfigError naming the key for what would silently not work; returns warnings for what works worse."""
    for key in LEGACY_KEYS:
        if _get(cfg, key) is not None:
            raise VerlConfigError(
                f"{key}: verl 0.9.1's main_ppo never reads the legacy top-level reward keys (only the fully-async "
                "trainer migrates them); set reward.custom_reward_function.*, reward.reward_manager.* and "
                "reward.num_workers instead"
            )
    path = _get(cfg, "reward.custom_reward_function.path")
    name = _get(cfg, "reward.custom_reward_function.name")
    if path is None:
        raise VerlConfigError(f"reward.custom_reward_function.path: not set (expected {MODULE_PATH})")
    if not (path == MODULE_PATH or str(path).replace("\\", "/").endswith("rubric_rl/reward/verl.py")):
        raise VerlConfigError(f"reward.custom_reward_function.path: {path!r} is not {MODULE_PATH}")
    if name != "compute_score":
        raise VerlConfigError(f"reward.custom_reward_function.name: {name!r}, expected 'compute_score'")
    kwargs = plain(_get(cfg, "reward.custom_reward_function.reward_kwargs") or {})
    try:
        RewardConfig.from_reward_kwargs(kwargs)
    except RewardConfigError as e:
        raise VerlConfigError(f"reward.custom_reward_function.reward_kwargs: {e}") from None
    warnings = []
    source, manager = _get(cfg, "reward.reward_manager.source"), _get(cfg, "reward.reward_manager.name")
    if source == "register" and manager == "remote":
        raise VerlConfigError("reward.reward_manager.name: 'remote' rejects async reward functions")
    if not (source == "importlib" and manager == MANAGER_NAME and _get(cfg, "reward.reward_manager.module.path")):
        warnings.append(
            f"reward.reward_manager: {source}:{manager} passes no group id, so masked samples get the fallback "
            f"score instead of their group's mean; set source=importlib, name={MANAGER_NAME}, "
            f"module.path={MANAGER_PATH}"
        )
    return warnings
