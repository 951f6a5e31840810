"""Execution workers started before they are needed, per execution slot and baseline lane."""

from __future__ import annotations

import logging
import threading
from collections import deque

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.run.process import WorkerProcess

log = logging.getLogger(__name__)


class WarmWorkers:
    """``depth`` started workers waiting per execution slot and per baseline lane, replaced in the background as
    they are taken. More than one: a worker starts in 3-11 s on a busy GPU host (torch and torch._dynamo
    imported), longer than many evaluations run, so with one spare the next evaluation of a slot waited for it
    (on an H100, 21 s summed over a warm pass of 32 candidates, 8 s for one)."""

    def __init__(self, config: SandboxConfig, depth: int) -> None:
        self.config = config
        self.depth = depth
        self._spares: dict[str, deque[WorkerProcess]] = {}
        self._starting: dict[str, int] = {}  # spares being started per slot
        self._lock = threading.Lock()
        self._closed = False

    def _spawn(self, slot: str, cuda: str | None, compiles: bool) -> None:
        w = WorkerProcess(self.config, cuda_visible_devices=cuda, ahead=True, compiles=compiles)
        started = False
        try:
            w.start()
            started = True
        except Exception as e:  # no spare then: the slot starts its next worker itself (and reports why not)
            log.warning("a spare worker for %s did not start: %s", slot, e)
        with self._lock:
            self._starting[slot] -= 1
            keep = started and not self._closed
            if keep:
                self._spares.setdefault(slot, deque()).append(w)
        if not keep:
            w.close()

    def spares(self, slot: str) -> list[WorkerProcess]:
        """The started workers waiting for ``slot``, the next one first."""
        with self._lock:
            return list(self._spares.get(slot, ()))

    def take(self, slot: str, cuda: str | None, *, compiles: bool = False) -> WorkerProcess:
        """``slot``'s oldest spare, or a new worker; ``compiles``: its replacement imports torch.compile's machinery
        too (a baseline lane's: candidates reuse their task's compile timing)."""
        with self._lock:
            queue = self._spares.setdefault(slot, deque())
            w = queue.popleft() if queue else None
            missing = max(0, self.depth - len(queue) - self._starting.get(slot, 0))
            self._starting[slot] = self._starting.get(slot, 0) + missing
        if w is None or not w.alive():
            if w is not None:
                w.close()
            w = WorkerProcess(self.config, cuda_visible_devices=cuda)
        for _ in range(missing):
            threading.Thread(target=self._spawn, args=(slot, cuda, compiles), daemon=True).start()
        return w

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares = [w for queue in self._spares.values() for w in queue]
            self._spares = {}
        for w in spares:
            w.close()
