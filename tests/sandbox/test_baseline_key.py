"""A task baseline is reused only under the timing settings it was measured with."""

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.executors.baselines import baseline_key


def _key(**sections) -> str:
    return baseline_key("class Model: ...", SandboxConfig(backend="cpu", **sections), "cpu", "2.13")


def test_timing_settings_are_part_of_the_key_and_other_settings_are_not():
    base = _key()
    assert _key(timing={"trials": 50}) != base and _key(timing={"l2_flush": False}) != base
    assert _key(timing={"compile_mode": "max-autotune"}) != base and _key(seed=1) != base
    assert _key(limits={"run_timeout_s": 999.0}) == base
    assert _key(timing={"profile_kernels": False}) == base
