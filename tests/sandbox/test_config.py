"""The sandbox config: sections, the keys of the flat layout and retired ones refused by name, the README's sample."""

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.executors import ExecutorConfig

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize(
    "data, words",
    [
        ({"perf_trials": 5}, "'perf_trials' is now 'timing.trials'"),
        ({"memory_limit_mb": 512}, "'memory_limit_mb' is now 'limits.memory_mb'"),
        ({"cache_dir": "/tmp/x"}, "'cache_dir' is now 'build.cache_dir'"),
        ({"worker_aslr": False}, "'worker_aslr' was retired"),
        ({"min_timing_s": 1.0}, "'min_timing_s' was retired"),
        ({"timing": {"perf_trials": 5}}, "timing.perf_trials"),
        ({"no_such_key": 1}, "no_such_key"),
        ({"build": {"arch": "sm_90"}}, "build.arch"),
        ({"policy": {"rulez": {}}}, "policy.rulez"),
    ],
)
def test_an_old_or_unknown_key_fails_naming_it(data, words):
    with pytest.raises(ValidationError) as e:
        SandboxConfig.model_validate(data)
    text = str(e.value).replace("\n", " ")
    assert words in text or words.replace(".", " ") in re.sub(r"\s+", " ", text), text


def test_updated_merges_a_section_and_validates():
    cfg = SandboxConfig(backend="cpu", timing={"trials": 7})
    new = cfg.updated(timing={"warmup_trials": 1}, seed=3)
    assert (new.timing.trials, new.timing.warmup_trials, new.seed) == (7, 1, 3)
    with pytest.raises(ValidationError):
        cfg.updated(timing={"trials": 0})


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readmes_sandbox_sample_is_a_valid_config():
    sample = next(b for b in _yaml_blocks() if "sandbox.yaml" in b)
    cfg = SandboxConfig.model_validate(yaml.safe_load(sample))
    assert cfg.timing.trials == 100 and cfg.limits.memory_mb == 16384


def test_the_readmes_executor_sample_is_a_valid_config():
    sample = next(b for b in _yaml_blocks() if "executor settings" in b)
    cfg = ExecutorConfig.model_validate(yaml.safe_load(sample))
    assert cfg.kind == "local" and cfg.ray.resource == "rubric_rl_eval"
    with pytest.raises(ValidationError, match="kind"):
        ExecutorConfig(kind="slurm")
    with pytest.raises(ValidationError, match="ray_address"):
        ExecutorConfig.model_validate({"ray_address": "auto"})
