"""Captures and builds ahead of execution, shared between the candidates of one executor that need the same one.

In an RL batch a task's responses often share an extension (a group's repeated programs, or the same kernel under
different Python), and identical programs share a capture. Each candidate used to run its whole prebuild on a
build worker: one that needed a build already under way waited for it on the build cache's lock while holding its
build worker, so the candidates queued behind it (a compile error that needs a second) waited for builds that were
not theirs (tests/sandbox/test_prebuilds.py). On an H100 with 7 build workers the first compile error of a 16 x 8
reward batch was scored 228 s in, with most cores idle for the last 60 s of that wait (docs/measurements.md, "The
hang floor and the 16 x 8 batch"); how much of that this explains was not measured. Here a capture or a build
under way is awaited where it runs, and only new work takes a build worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

from rubric_rl.sandbox.evaluate import Evaluator, PrebuildJob
from rubric_rl.sandbox.executors.waits import Waits
from rubric_rl.sandbox.verdict import ExtensionBuild

T = TypeVar("T")


class SharedPrebuilds:
    """One event loop's prebuilds: a capture per distinct program and a build per key at a time, the builds on
    ``pool`` and the captures on ``capture_pool`` (default: ``pool``). On one pool, a batch's captures, all queued at
    its start, run before any build, each build being queued only once its capture is done."""

    def __init__(self, evaluator: Evaluator, pool: Executor, arch: str | None, capture_pool: Executor | None = None):
        self.evaluator = evaluator
        self.pool = pool
        self.capture_pool = capture_pool or pool
        self.arch = arch
        self._captures: dict[str, asyncio.Future[list[PrebuildJob]]] = {}
        self._builds: dict[str, asyncio.Future[ExtensionBuild]] = {}
        self.shared = 0  # captures and builds a candidate awaited instead of running them itself
        # Each capture's and build's wait for a worker of its pool and its time on one (a cache hit's included).
        self.work = Waits(("capture_queued", "capture", "build_queued", "build"))

    async def prebuild(self, program: str) -> list[ExtensionBuild]:
        """Capture and build ``program``'s extensions; what is already under way for another candidate is awaited
        without a build worker. Failures raise as ``Evaluator.prebuild``'s do, to every candidate sharing them."""
        digest = hashlib.sha256(program.encode()).hexdigest()
        jobs = await self._shared(
            self._captures, digest, "capture", lambda: self.evaluator.prebuild_jobs(program, self.arch)
        )
        return [await self._shared(self._builds, job.key, "build", job.run) for job in jobs]

    def stats(self) -> dict[str, object]:
        return {"shared": self.shared, **self.work.summary()}

    async def _shared(self, running: dict[str, asyncio.Future[T]], key: str, kind: str, work: Callable[[], T]) -> T:
        future = running.get(key)
        if future is None:
            pool = self.capture_pool if kind == "capture" else self.pool
            future = asyncio.get_running_loop().run_in_executor(pool, self._timed, kind, time.monotonic(), work)
            running[key] = future
            future.add_done_callback(lambda _: running.pop(key, None))
        else:
            self.shared += 1
        # A waiter that is cancelled (its deadline, its caller gone) leaves the work to the others.
        return await asyncio.shield(future)

    def _timed(self, kind: str, submitted: float, work: Callable[[], T]) -> T:
        began = time.monotonic()
        self.work.add(f"{kind}_queued", began - submitted)
        with self.work.timed(kind):
            return work()
