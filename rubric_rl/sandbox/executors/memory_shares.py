"""Who holds a device's memory: evaluations side by side, each in its shares of it.

The workers of one GPU divide its memory into equal shares (``torch.cuda.set_per_process_memory_fraction``), so
that one worker cannot take the memory of the others: one share for each execution slot and baseline lane. A
task whose trials need more than a share (KernelBench L1-19..L1-29 keep seven 6 GB reference outputs on the
device) runs out of it through no fault of the candidate, and is evaluated again with more shares: half the
device, then all of it. The device gate cannot give that: it orders the device's *work*, while the other
workers' memory stays allocated until their processes end. So a request for several shares waits until that
many are given back, and new single-share requests wait behind it (it is not starved). Held whole, the device
ran the eleven L1 tasks of the H200 benchmark one after another, nothing beside them; in halves, two of them run
at once, or one beside three smaller evaluations.

A baseline queues behind a waiting request for several shares too, except while an evaluation that holds a share
of the device waits for a baseline (``awaiting_baseline``): that evaluation would never let go of its share, so
then baselines pass the request, the one it waits for among them (they all hold baseline lanes it may need). An
evaluation that asks for several shares awaits its own baseline first, and nobody who holds a share waits for one
that holds several, so the two kinds of hold cannot deadlock. Baselines used to pass always: measured on an H200,
a stream of 31 baselines kept three whole-memory requests waiting 203-220 s.

asyncio primitives belong to the loop that first waits on them: the executor makes one ``MemoryShares`` per
event loop (see ``LocalExecutor._queues``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager


class MemoryShares:
    def __init__(self, devices: Iterable[str], shares: int) -> None:
        if shares < 1:
            raise ValueError(f"a device needs at least one share, not {shares}")
        self.shares = shares  # per device
        self._changed = asyncio.Condition()
        self._held = {d: 0 for d in devices}
        self._large_waiting = dict.fromkeys(self._held, 0)  # requests for several shares
        self._awaiting = dict.fromkeys(self._held, 0)  # share holders waiting for their task's baseline

    def held(self, device: str) -> int:
        """Shares of ``device`` held now."""
        return self._held[device]

    @asynccontextmanager
    async def share(self, device: str, shares: int = 1, *, baseline: bool = False) -> AsyncIterator[float]:
        """Hold ``shares`` of ``device``'s memory; yields the seconds waited for them.

        One share waits behind a waiting request for several; ``baseline``: not while a share holder of the
        device awaits a baseline."""
        if not 1 <= shares <= self.shares:
            raise ValueError(f"{shares} shares asked of a device divided into {self.shares}")
        loop = asyncio.get_running_loop()
        started = loop.time()

        def room() -> bool:
            return self._held[device] + shares <= self.shares

        def may() -> bool:
            if not room():
                return False
            return not self._large_waiting[device] or (baseline and self._awaiting[device] > 0)

        async with self._changed:
            if shares == 1:
                await self._changed.wait_for(may)
            else:
                self._large_waiting[device] += 1
                try:
                    await self._changed.wait_for(room)
                finally:
                    self._large_waiting[device] -= 1
                    self._changed.notify_all()  # a cancelled request must not leave shares waiting behind it
            self._held[device] += shares
        try:
            yield loop.time() - started
        finally:
            async with self._changed:
                self._held[device] -= shares
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
