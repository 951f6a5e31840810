"""The executor's per-stage queue times (pure)."""

import pytest

from rubric_rl.sandbox.executors.waits import STAGES, Waits


def test_each_stage_sums_its_own_seconds_and_an_empty_one_reads_zero():
    waits = Waits()
    waits.add("slot", 2.0)
    waits.add("slot", 4.0)
    waits.add("prebuild", 1.5)
    summary = waits.summary()
    assert list(summary) == list(STAGES)
    assert summary["slot"] == {"n": 2, "sum": 6.0, "mean": 3.0, "max": 4.0}
    assert summary["prebuild"] == {"n": 1, "sum": 1.5, "mean": 1.5, "max": 1.5}
    assert summary["run"] == {"n": 0, "sum": 0.0, "mean": 0.0, "max": 0.0}


def test_a_timed_block_is_recorded_when_it_raises_and_an_unknown_stage_is_refused():
    waits = Waits(("build",))
    with pytest.raises(RuntimeError), waits.timed("build"):
        raise RuntimeError("the build failed")
    assert waits.summary()["build"]["n"] == 1
    with pytest.raises(ValueError, match="unknown stage 'slot' \\(have build\\)"):
        waits.add("slot", 1.0)
