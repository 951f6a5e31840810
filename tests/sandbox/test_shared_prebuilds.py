"""SharedPrebuilds' bookkeeping (pure: jobs that build nothing, a thread pool for the build workers)."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from rubric_rl.sandbox.executors.prebuilds import SharedPrebuilds


@dataclass
class Job:
    key: str
    release: threading.Event
    runs: list[str]

    def run(self) -> str:
        self.runs.append(self.key)
        if not self.release.wait(10):
            raise TimeoutError("never released")
        if self.key == "broken":
            raise RuntimeError("the build raised")
        return f"built {self.key}"


class Evaluator:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.captured: list[str] = []
        self.builds: list[str] = []

    def prebuild_jobs(self, program: str, arch: str | None) -> list[Job]:
        self.captured.append(program)
        return [Job(key, self.release, self.builds) for key in program.split("+")]


def test_candidates_sharing_a_program_or_an_extension_share_its_capture_and_build() -> None:
    evaluator = Evaluator()

    async def scenario():
        with ThreadPoolExecutor(4) as pool:
            shared = SharedPrebuilds(evaluator, pool, None)  # type: ignore[arg-type]
            running = [asyncio.ensure_future(shared.prebuild(p)) for p in ("a", "a", "a+b")]
            await asyncio.sleep(0.2)
            evaluator.release.set()
            return await asyncio.gather(*running), shared.stats()

    results, stats = asyncio.run(scenario())
    assert results == [["built a"], ["built a"], ["built a", "built b"]]
    assert evaluator.captured == ["a", "a+b"] and sorted(evaluator.builds) == ["a", "b"]
    assert stats["shared"] == 3  # the second "a" awaited the first one's capture and build; "a+b" the build of a
    assert stats["capture"]["n"] == 2 and stats["build"]["n"] == 2


def test_a_failed_build_reaches_every_sharer_and_a_cancelled_waiter_leaves_it_to_the_others() -> None:
    evaluator = Evaluator()

    async def scenario():
        with ThreadPoolExecutor(2) as pool:
            shared = SharedPrebuilds(evaluator, pool, None)  # type: ignore[arg-type]
            first, second = (asyncio.ensure_future(shared.prebuild("x")) for _ in range(2))
            broken = [asyncio.ensure_future(shared.prebuild("broken")) for _ in range(2)]
            await asyncio.sleep(0.2)
            first.cancel()  # its deadline passed: the build it started goes on for the second
            evaluator.release.set()
            with pytest.raises(asyncio.CancelledError):
                await first
            outcomes = await asyncio.gather(*broken, return_exceptions=True)
            return await second, outcomes

    second, outcomes = asyncio.run(scenario())
    assert second == ["built x"] and evaluator.builds.count("x") == 1
    assert [str(e) for e in outcomes] == ["the build raised", "the build raised"]
    assert evaluator.builds.count("broken") == 1


class SlowCaptures(Evaluator):
    """Evaluator whose capture of "slow" waits for ``capture_release``; every build is free to run."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()
        self.capture_release = threading.Event()

    def prebuild_jobs(self, program: str, arch: str | None) -> list[Job]:
        if program == "slow" and not self.capture_release.wait(10):
            raise TimeoutError("never released")
        return super().prebuild_jobs(program, arch)


@pytest.mark.parametrize("own_capture_pool", [True, False])
def test_a_captured_candidates_build_does_not_wait_behind_captures_on_their_own_workers(own_capture_pool) -> None:
    # A batch queues all its captures at once; a build is queued when its capture is done. On one pool the build
    # waited for every capture queued before it (here one held until the build is done, in vain).
    evaluator = SlowCaptures()

    async def scenario():
        with ThreadPoolExecutor(1) as builds, ThreadPoolExecutor(1) as captures:
            shared = SharedPrebuilds(evaluator, builds, None, captures if own_capture_pool else None)  # type: ignore[arg-type]
            # Both captures queued before the fast one is done and its build queued.
            fast, slow = asyncio.ensure_future(shared.prebuild("fast")), asyncio.ensure_future(shared.prebuild("slow"))
            try:
                return await asyncio.wait_for(asyncio.shield(fast), 1.0)
            except TimeoutError:
                return None
            finally:
                evaluator.capture_release.set()
                await asyncio.gather(fast, slow)

    built = asyncio.run(scenario())
    assert built == (["built fast"] if own_capture_pool else None)
