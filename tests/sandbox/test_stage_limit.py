"""How long a worker may stay silent in each stage, from the reference's own times (``stage_limit``)."""

import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.run.conversation import stage_limit
from rubric_rl.sandbox.run.state import RunState


def state(stage: str, **limits: float | None) -> tuple[RunState, SandboxConfig]:
    config = SandboxConfig(backend="cpu", limits={"stage_timeout_factor": 50, **limits})
    run = RunState(config=config, candidate="", stage=stage, reference_trial_s=0.001, reference_model_s=0.1)
    return run, config


@pytest.mark.parametrize(
    ("stage", "floors", "expected_s"),
    [
        # 50 x 1 ms or 50 x 0.1 s are under every floor: the floor decides.
        ("correctness", {"stage_timeout_floor_s": 20}, 20),
        ("correctness", {"stage_timeout_floor_s": 20, "correctness_timeout_floor_s": 10}, 10),
        ("load", {"stage_timeout_floor_s": 20, "correctness_timeout_floor_s": 10}, 20),
        ("timing", {"stage_timeout_floor_s": 20, "correctness_timeout_floor_s": 10}, 20),
        # A trials' floor above the stage floor holds too: it is the trials' own.
        ("correctness", {"stage_timeout_floor_s": 5, "correctness_timeout_floor_s": 12}, 12),
    ],
)
def test_a_correctness_trial_has_its_own_floor_and_the_other_stages_keep_theirs(stage, floors, expected_s) -> None:
    run, config = state(stage, **floors)
    limit = stage_limit(run, config, ceiling_s=300)
    assert limit is not None and limit.s == expected_s
    assert f"at least {expected_s:g} s" in limit.why


def test_the_reference_time_wins_over_the_floor_and_the_ceiling_over_both() -> None:
    run, config = state("correctness", stage_timeout_floor_s=20, correctness_timeout_floor_s=10)
    run.reference_trial_s = 0.5  # x50: 25 s
    assert stage_limit(run, config, ceiling_s=300).s == 25  # type: ignore[union-attr]
    assert stage_limit(run, config, ceiling_s=15).s == 15  # type: ignore[union-attr]


def test_no_floor_below_zero() -> None:
    with pytest.raises(ValueError, match="correctness_timeout_floor_s"):
        SandboxConfig(limits={"correctness_timeout_floor_s": 0})
