"""Who holds a device's memory: evaluations side by side, each in its shares of it.

The workers of one GPU divide its memory into equal shares (``torch.cuda.set_per_process_memory_fraction``), so
that one worker cannot take the memory of the others: one share for each execution slot and baseline lane. A
task whose trials need more than a share (KernelBench L1-19..L1-29: 6 GB inputs and outputs, several of them
alive in a timing round) runs out of it through no fault of the candidate, and is evaluated again with more
shares: half the device, then all of it. The device gate cannot give that: it orders the device's *work*, while
the other workers' memory stays allocated until their processes end. So a request for several shares waits
until that many are given back. Held whole, the device ran the eleven L1 tasks of the H200 benchmark one after
another, nothing beside them; in halves, two of them run at once, or one beside three smaller evaluations.

Requests for several shares are served in the order they came, and a new single-share request waits behind them
(they are not starved), with one exception, backfilling: when the next request for several cannot fit beside the
holders of several on the device even once every single share is given back (all of the device while half of it
is held), it has to wait for one of them to leave, whatever the singles do, so single shares pass it. Once it
would fit, new singles wait again: a single that passed delays it by at most the rest of its own run. Without
it, on an H100 (32 KernelBench candidates, 4 slots and 2 baseline lanes), a whole-device request waiting behind
a half holder kept three single-share evaluations waiting while one L1 task ran alone for 15 s. Singles passing
whenever any holder of several was on the device was worse: beside one L1 task's half they took the other half,
and the next L1 task, which would have run beside the first, waited for it to end (the cold pass ran its eleven
L1 tasks one at a time).

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
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager


class MemoryShares:
    def __init__(self, devices: Iterable[str], shares: int) -> None:
        if shares < 1:
            raise ValueError(f"a device needs at least one share, not {shares}")
        self.shares = shares  # per device
        self._changed = asyncio.Condition()
        self._held = {d: 0 for d in devices}
        self._several_held = dict.fromkeys(self._held, 0)  # shares held by holders of several
        self._several_waiting: dict[str, deque[tuple[object, int]]] = {d: deque() for d in self._held}  # (ticket,
        # shares asked), in arrival order
        self._awaiting = dict.fromkeys(self._held, 0)  # share holders waiting for their task's baseline

    def held(self, device: str) -> int:
        """Shares of ``device`` held now."""
        return self._held[device]

    @asynccontextmanager
    async def share(self, device: str, shares: int = 1, *, baseline: bool = False) -> AsyncIterator[float]:
        """Hold ``shares`` of ``device``'s memory; yields the seconds waited for them.

        Several shares wait behind earlier requests for several. One share waits behind a waiting request for
        several unless that request cannot fit beside the holders of several anyway (backfilling, see the module's
        docstring), and a ``baseline`` share not while a share holder of the device awaits a baseline."""
        if not 1 <= shares <= self.shares:
            raise ValueError(f"{shares} shares asked of a device divided into {self.shares}")
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiting = self._several_waiting[device]
        ticket = object()

        def room() -> bool:
            return self._held[device] + shares <= self.shares

        def next_in_line() -> bool:
            return room() and waiting[0][0] is ticket

        def may() -> bool:
            if not room():
                return False
            if not waiting or (baseline and self._awaiting[device] > 0):
                return True
            return self._several_held[device] + waiting[0][1] > self.shares  # it waits for them: backfill

        async with self._changed:
            if shares == 1:
                await self._changed.wait_for(may)
            else:
                waiting.append((ticket, shares))
                try:
                    await self._changed.wait_for(next_in_line)
                finally:
                    waiting.remove((ticket, shares))
                    self._changed.notify_all()  # a cancelled request must not leave shares waiting behind it
                self._several_held[device] += shares
            self._held[device] += shares
        try:
            yield loop.time() - started
        finally:
            async with self._changed:
                self._held[device] -= shares
                if shares > 1:
                    self._several_held[device] -= shares
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
