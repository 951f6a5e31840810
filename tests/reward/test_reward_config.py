"""RewardConfig: loads from YAML and from verl's reward_kwargs; a bad combination fails at load naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubric_rl.reward import RewardConfig, RewardConfigError


def test_defaults_are_stitchcuda_over_clipped_speedup() -> None:
    c = RewardConfig()
    assert (c.rule.name, c.mix.name, c.mix.lambdas, c.hack_penalty) == (
        "speedup",
        "stitchcuda",
        {"generate": 1.0, "refine": 0.7},
        -1.0,
    )
    assert c.mix.uses_judge


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"rule": {"name": "milestone"}}, "mix.name"),  # stitchcuda multiplies a speedup
        ({"hack_penalty": 0.5}, "hack_penalty"),  # pays more than an honest 0
        ({"rule": {"name": "milestone"}, "mix": {"name": "weighted"}, "hack_penalty": -0.5}, "hack_penalty"),
        ({"rule": {"name": "milestone"}, "mix": {"name": "none"}, "hack_penalty": -0.99}, "hack_penalty"),
        ({"mix": {"lambdas": {"generate": 2.5}}}, "mix.lambdas.generate"),
        ({"mix": {"hack_gate": "nope"}}, "mix.hack_gate"),
        ({"rule": {"clip_min": 3.0, "clip_max": 2.0}}, "rule.clip_min"),
        ({"rule": {"name": "milestone", "correct": 5.0}, "mix": {"name": "none"}}, "rule.fail/correct"),
        ({"rule": {"margin": -0.1}}, "rule.margin"),
        ({"mixx": {}}, "mixx"),
        ({"mix": {"name": "rubric"}}, "mix.name"),
        ({"sandbox": {"no_such_field": 1}}, "sandbox.no_such_field"),
        ({"sandbox": {"backend": "cuda"}}, "sandbox.backend"),
        ({"executor": {"no_such_field": 1}}, "executor.no_such_field"),
        ({"judge": {"offline": True, "base_url": "http://127.0.0.1:1/v1"}}, "offline"),
        ({"judge": {"rubric": "no_such_rubric"}}, "judge.rubric"),
        ({"service": {"mode": "kubernetes"}}, "service.mode"),
        ({"metrics": {"window": 0}}, "metrics.window"),
    ],
)
def test_bad_combination_names_the_field(data: dict, field: str) -> None:
    with pytest.raises(RewardConfigError) as e:
        RewardConfig.load(data, where="test.yaml")
    assert "test.yaml" in str(e.value) and field in str(e.value)


def test_yaml_with_overrides(tmp_path: Path, write_yaml) -> None:
    path = write_yaml(
        tmp_path / "reward.yaml", {"rule": {"name": "milestone"}, "mix": {"name": "weighted", "beta": 0.5}}
    )
    c = RewardConfig.from_yaml(path, {"mix": {"alpha": 2.0}, "hack_penalty": -2.0})
    assert (c.rule.name, c.mix.name, c.mix.alpha, c.mix.beta) == ("milestone", "weighted", 2.0, 0.5)
    with pytest.raises(RewardConfigError, match="hack_penalty: -1.0 would pay more than an honest failure"):
        RewardConfig.from_yaml(path, {"mix": {"alpha": 2.0}})  # alpha x fail = -2


def test_yaml_error_names_the_file(tmp_path: Path, write_yaml) -> None:
    path = write_yaml(tmp_path / "bad.yaml", {"rule": {"name": "milestone"}})
    with pytest.raises(RewardConfigError, match=r"bad\.yaml: mix\.name"):
        RewardConfig.from_yaml(path)


def test_from_reward_kwargs_omegaconf(tmp_path: Path, write_yaml) -> None:
    """verl hands ``dict(reward_kwargs)``: a shallow dict whose values may still be DictConfig/ListConfig."""
    omegaconf = pytest.importorskip("omegaconf")
    path = write_yaml(tmp_path / "reward.yaml", {"rule": {"name": "milestone"}, "mix": {"name": "none"}})
    node = omegaconf.OmegaConf.create(
        {"config": str(path), "rule": {"margin": 0.1}, "mix": {"lambdas": {"generate": 1.0}}, "hack_penalty": -2}
    )
    c = RewardConfig.from_reward_kwargs(dict(node))
    assert (c.rule.name, c.rule.margin, c.mix.name, c.hack_penalty) == ("milestone", 0.1, "none", -2.0)
    assert RewardConfig.from_reward_kwargs({}) == RewardConfig()


def test_scoring_hash_covers_scoring_only() -> None:
    base = RewardConfig()
    assert (
        base.scoring_hash()
        == RewardConfig.load({"ledger": {"dir": "/tmp/x"}, "service": {"mode": "ray"}}).scoring_hash()
    )
    assert (
        base.scoring_hash() != RewardConfig.load({"mix": {"lambdas": {"generate": 0.9, "refine": 0.7}}}).scoring_hash()
    )
    assert base.scoring_hash() != RewardConfig.load({"hack_penalty": -2}).scoring_hash()


def test_the_rewards_executor_has_its_own_slots_default_and_the_users_setting_wins() -> None:
    from rubric_rl.reward.config import REWARD_SLOTS_PER_GPU
    from rubric_rl.sandbox.executors import ExecutorConfig

    assert REWARD_SLOTS_PER_GPU != ExecutorConfig().slots_per_gpu  # otherwise the constant says nothing
    assert RewardConfig.load({}).executor_config().slots_per_gpu == REWARD_SLOTS_PER_GPU
    mine = RewardConfig.load({"executor": {"slots_per_gpu": 1, "build_workers": 3}}).executor_config()
    assert (mine.slots_per_gpu, mine.build_workers) == (1, 3)
    assert RewardConfig.load({"executor": {"build_workers": 3}}).executor_config().slots_per_gpu == REWARD_SLOTS_PER_GPU


def test_the_rewards_sandbox_has_its_own_stage_floor_and_the_users_setting_wins() -> None:
    from rubric_rl.reward.config import REWARD_STAGE_FLOOR_S
    from rubric_rl.sandbox import SandboxConfig

    assert REWARD_STAGE_FLOOR_S < SandboxConfig().limits.stage_timeout_floor_s  # otherwise the constant says nothing
    default = RewardConfig.load({}).sandbox_config("cpu")
    assert default.limits.stage_timeout_floor_s == REWARD_STAGE_FLOOR_S and default.backend == "cpu"
    other = RewardConfig.load({"sandbox": {"limits": {"run_timeout_s": 60}}}).sandbox_config("cuda")
    assert (other.limits.stage_timeout_floor_s, other.limits.run_timeout_s) == (REWARD_STAGE_FLOOR_S, 60)
    mine = RewardConfig.load({"sandbox": {"limits": {"stage_timeout_floor_s": 30}}}).sandbox_config("cpu")
    assert mine.limits.stage_timeout_floor_s == 30
