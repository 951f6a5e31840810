"""Who holds a device's memory: evaluations side by side, each in its share, or one evaluation with all of it.

The workers of one GPU divide its memory (``torch.cuda.set_per_process_memory_fraction``), so that one worker
cannot take the memory of the others. A task whose trials need more than a share (KernelBench L1-19..L1-29 keep
seven 6 GB reference outputs on the device) runs out of it through no fault of the candidate, and is evaluated
again with the whole memory. The device gate cannot give that: it orders the device's *work*, while the other
workers' memory stays allocated until their processes end. So the retry takes the whole memory here: it waits
until every share of the device is given back, and new evaluations wait behind it (it is not starved).

A baseline queues behind a whole-memory request too, except while an evaluation that holds a share of the
device waits for a baseline (``awaiting_baseline``): that evaluation would never let go of its share, so then
baselines pass the request, the one it waits for among them (they all hold baseline lanes it may need). The
whole-memory holder awaits its own baseline before it asks. Nobody who holds a share waits for a whole-memory
holder, so the two kinds of hold cannot deadlock. Baselines used to pass always: measured on an H200, a
stream of 31 baselines kept three whole-memory requests waiting 203-220 s.

asyncio primitives belong to the loop that first waits on them: the executor makes one ``MemoryShares`` per
event loop (see ``LocalExecutor._queues``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager


class MemoryShares:
    def __init__(self, devices: Iterable[str]) -> None:
        self._changed = asyncio.Condition()
        self._shares = {d: 0 for d in devices}
        self._whole = dict.fromkeys(self._shares, False)
        self._whole_waiting = dict.fromkeys(self._shares, 0)
        self._awaiting = dict.fromkeys(self._shares, 0)  # share holders waiting for their task's baseline

    def holders(self, device: str) -> int:
        """Shares of ``device`` held now (0 while it is held whole)."""
        return self._shares[device]

    def held_whole(self, device: str) -> bool:
        return self._whole[device]

    @asynccontextmanager
    async def share(self, device: str, *, baseline: bool = False) -> AsyncIterator[None]:
        """Hold a share of ``device``'s memory, behind a whole-memory request that waits; ``baseline``: not
        behind one that only waits while a share holder of the device awaits a baseline."""

        def may() -> bool:
            if self._whole[device]:
                return False
            return not self._whole_waiting[device] or (baseline and self._awaiting[device] > 0)

        async with self._changed:
            await self._changed.wait_for(may)
            self._shares[device] += 1
        try:
            yield
        finally:
            async with self._changed:
                self._shares[device] -= 1
                self._changed.notify_all()

    @asynccontextmanager
    async def awaiting_baseline(self, device: str) -> AsyncIterator[None]:
        """Held by an evaluation that holds a share of ``device`` while it waits for its task's baseline."""
        async with self._changed:
            self._awaiting[device] += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            async with self._changed:
                self._awaiting[device] -= 1

    @asynccontextmanager
    async def whole(self, device: str) -> AsyncIterator[float]:
        """Hold all of ``device``'s memory; yields the seconds waited for it."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with self._changed:
            self._whole_waiting[device] += 1
            try:
                await self._changed.wait_for(lambda: not self._whole[device] and self._shares[device] == 0)
            finally:
                self._whole_waiting[device] -= 1
                self._changed.notify_all()  # a cancelled request must not leave shares waiting behind it
            self._whole[device] = True
        try:
            yield loop.time() - started
        finally:
            async with self._changed:
                self._whole[device] = False
                self._changed.notify_all()
