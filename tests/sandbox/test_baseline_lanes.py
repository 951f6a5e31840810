"""Baseline lanes go to the measurement a candidate needs soonest, the earliest asked among equals."""

import asyncio

import pytest

from rubric_rl.sandbox.executors.baseline_lanes import AWAITED, BUILT, BaselineLanes


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _measure(lanes: BaselineLanes, key: str, order: list[str], release: asyncio.Event) -> str:
    async with lanes.lane(key) as lane:
        order.append(key)
        await release.wait()
        return lane


def test_a_free_lane_goes_to_the_most_urgent_request_then_to_the_earliest():
    async def main():
        lanes = BaselineLanes(["b0.0"])
        order: list[str] = []
        gates = {k: asyncio.Event() for k in "abcde"}
        tasks = {}
        for k in "abcde":
            tasks[k] = asyncio.ensure_future(_measure(lanes, k, order, gates[k]))
            await _settle()
        assert order == ["a"]  # the lane is busy: the rest wait
        lanes.raise_urgency("d", BUILT)
        lanes.raise_urgency("e", AWAITED)
        lanes.raise_urgency("e", BUILT)  # urgency never drops
        await _settle()
        for k in "aedbc":
            gates[k].set()
            await _settle()
        await asyncio.gather(*tasks.values())
        assert order == ["a", "e", "d", "b", "c"]

    asyncio.run(main())


def test_urgency_raised_before_the_request_counts_and_lanes_serve_side_by_side():
    async def main():
        lanes = BaselineLanes(["b0.0", "b1.0"])
        order: list[str] = []
        gates = {k: asyncio.Event() for k in "abcd"}
        lanes.raise_urgency("d", AWAITED)  # its candidate waits before its measurement asked for a lane
        a = asyncio.ensure_future(_measure(lanes, "a", order, gates["a"]))
        b = asyncio.ensure_future(_measure(lanes, "b", order, gates["b"]))
        await _settle()
        assert sorted(order) == ["a", "b"]  # two lanes: two at once
        c = asyncio.ensure_future(_measure(lanes, "c", order, gates["c"]))
        await _settle()
        d = asyncio.ensure_future(_measure(lanes, "d", order, gates["d"]))
        await _settle()
        gates["a"].set()
        await _settle()
        assert order[2] == "d"
        assert lanes.urgency("d") == 0  # dropped once it had its lane
        for g in gates.values():
            g.set()
        used = await asyncio.gather(a, b, c, d)
        assert set(used) == {"b0.0", "b1.0"}

    asyncio.run(main())


def test_a_cancelled_request_does_not_hold_up_the_next():
    async def main():
        lanes = BaselineLanes(["b0.0"])
        order: list[str] = []
        gates = {k: asyncio.Event() for k in "abc"}
        a = asyncio.ensure_future(_measure(lanes, "a", order, gates["a"]))
        await _settle()
        b = asyncio.ensure_future(_measure(lanes, "b", order, gates["b"]))
        c = asyncio.ensure_future(_measure(lanes, "c", order, gates["c"]))
        await _settle()
        b.cancel()
        await _settle()
        gates["a"].set()
        gates["c"].set()
        await asyncio.gather(a, c)
        assert order == ["a", "c"] and b.cancelled()

    asyncio.run(main())


def test_one_request_per_key_and_at_least_one_lane():
    with pytest.raises(ValueError):
        BaselineLanes([])

    async def main():
        lanes = BaselineLanes(["b0.0"])
        hold = asyncio.Event()
        first = asyncio.ensure_future(_measure(lanes, "a", [], hold))
        second = asyncio.ensure_future(_measure(lanes, "x", [], hold))
        await _settle()
        with pytest.raises(RuntimeError, match="already waits"):
            async with lanes.lane("x"):
                pass
        hold.set()
        await asyncio.gather(first, second)

    asyncio.run(main())
