"""A task baseline is reused only under the timing settings it was measured with."""

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.executors.baselines import baseline_key


def _key(**overrides) -> str:
    return baseline_key("class Model: ...", SandboxConfig(backend="cpu", **overrides), "cpu", "2.13")


def test_timing_settings_are_part_of_the_key_and_other_settings_are_not():
    base = _key()
    assert _key(min_timing_s=1.0) != base  # rounds spanning a second read other medians than 100 quick ones
    assert _key(perf_trials=50) != base and _key(l2_flush=False) != base
    assert _key(run_timeout_s=999.0) == base
