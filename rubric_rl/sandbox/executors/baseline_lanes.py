"""Which task's baseline is measured next: the one a candidate needs soonest.

Every candidate asks for its task's baseline as it arrives, so that the measurement runs beside its build. A
batch of many tasks queues many baselines on few lanes (``baseline_workers_per_gpu`` per GPU), and first come,
first served measures them in arrival order while candidates finish building in another. A candidate that
reaches its timing before its baseline waits, holding its execution slot and its share of the GPU's memory
(measured on an H200: 75-94 s for two of 32 candidates, and a whole-memory retry waited 283 s for such holders
to let go). So each request carries an urgency that the candidate raises as it advances: ``QUEUED`` when
asked, ``BUILT`` when its extensions are built, ``AWAITED`` when it waits for the baseline; a free lane goes
to the most urgent request, the earliest asked among equals.

asyncio primitives belong to the loop that first waits on them: the executor makes one ``BaselineLanes`` per
event loop (see ``LocalExecutor._queues``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

QUEUED, BUILT, AWAITED = 0, 1, 2


class BaselineLanes:
    def __init__(self, lanes: Iterable[str]) -> None:
        self._free = list(lanes)
        if not self._free:
            raise ValueError("BaselineLanes needs at least one lane")
        self._changed = asyncio.Condition()
        self._order = itertools.count()
        self._urgency: dict[str, int] = {}  # raised before or while the key waits; dropped once it has a lane
        self._waiting: dict[str, int] = {}  # key -> arrival order

    def urgency(self, key: str) -> int:
        return self._urgency.get(key, QUEUED)

    def raise_urgency(self, key: str, urgency: int) -> None:
        """Make ``key``'s measurement at least this urgent (also before it has asked for a lane)."""
        if urgency <= self.urgency(key):
            return
        self._urgency[key] = urgency
        if key in self._waiting:
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _next(self) -> str:
        return min(self._waiting, key=lambda k: (-self.urgency(k), self._waiting[k]))

    @asynccontextmanager
    async def lane(self, key: str) -> AsyncIterator[str]:
        """Hold a lane for ``key``'s measurement; yields the lane's name. One request per key at a time."""
        if key in self._waiting:
            raise RuntimeError(f"baseline {key} already waits for a lane")
        async with self._changed:
            self._waiting[key] = next(self._order)
            try:
                await self._changed.wait_for(lambda: bool(self._free) and self._next() == key)
            finally:
                del self._waiting[key]
                self._changed.notify_all()  # a cancelled request must not leave the next one waiting
            lane = self._free.pop(0)
            self._urgency.pop(key, None)
        try:
            yield lane
        finally:
            async with self._changed:
                self._free.append(lane)
                self._changed.notify_all()
