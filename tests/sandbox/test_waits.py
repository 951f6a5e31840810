"""The executor's per-stage queue times (pure)."""

import asyncio

import pytest

from rubric_rl.sandbox.executors.waits import STAGES, Waits


def test_each_stage_sums_its_own_seconds_and_an_empty_one_reads_zero():
    waits = Waits()
    waits.add("slot", 2.0)
    waits.add("slot", 4.0)
    waits.add("prebuild", 1.5)
    summary = waits.summary()
    assert list(summary) == list(STAGES)
    assert summary["slot"] == {"now": 0, "n": 2, "sum": 6.0, "mean": 3.0, "max": 4.0}
    assert summary["prebuild"] == {"now": 0, "n": 1, "sum": 1.5, "mean": 1.5, "max": 1.5}
    assert summary["run"] == {"now": 0, "n": 0, "sum": 0.0, "mean": 0.0, "max": 0.0}


def test_a_timed_block_is_recorded_when_it_raises_and_an_unknown_stage_is_refused():
    waits = Waits(("build",))
    with pytest.raises(RuntimeError), waits.timed("build"):
        raise RuntimeError("the build failed")
    assert waits.summary()["build"]["n"] == 1
    with pytest.raises(ValueError, match="unknown stage 'slot' \\(have build\\)"):
        waits.add("slot", 1.0)


def test_a_stage_counts_who_is_in_it_now_and_a_semaphores_wait_is_timed():
    waits = Waits()

    async def scenario():
        semaphore = asyncio.Semaphore(1)
        async with waits.acquiring("pending", semaphore):
            second = asyncio.ensure_future(waits.acquiring("pending", semaphore).__aenter__())
            await asyncio.sleep(0.05)
            during = waits.summary()["pending"]
        await second  # the first let go: the second holds it now
        return during, semaphore.locked()

    during, locked = asyncio.run(scenario())
    assert (during["now"], during["n"]) == (1, 1)  # one waiting, one done waiting
    assert locked
    after = waits.summary()["pending"]
    assert (after["now"], after["n"]) == (0, 2) and after["max"] >= 0.04
