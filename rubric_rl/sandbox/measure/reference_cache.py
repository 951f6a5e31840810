"""Reference outputs computed once per task and reused by its later candidates.

An RL step evaluates many candidates of the same task, and every evaluation ran the reference on the same
seeded trial inputs and shipped the same outputs: on an H200 with four evaluations at once that was 5 s per
evaluation on average and up to 15 s on 256 MB outputs, on the device all candidates share. The outputs
depend only on the reference program, the trial plan (seed, trial count, extra distributions) and where it
runs (backend, device, torch), so they are keyed by exactly those and kept in the evaluator's memory, least
recently used first out, within a byte budget. A worker whose reference is known draws the same seeded
inputs for its candidate and never runs the reference's trials; the reference outputs never enter its
process at all.

Not cached: trials whose outputs were kept on the device (too large to ship: each worker needs them there),
and anything from a worker that did not finish its reference phase.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.run.messages import ReferenceTrial


@dataclass(frozen=True)
class KnownReference:
    """What a finished reference phase produced: the per-trial records, the host outputs, the task flags."""

    meta: list[ReferenceTrial]
    values: list[list[Any]]
    task_flags: list[str]
    trial_s: float | None = None  # the reference's seconds per trial where it ran (stage limits derive from it)

    @property
    def nbytes(self) -> int:
        return sum(v.numel() * v.element_size() for outs in self.values for v in outs if v is not None)


def reference_key(reference: str, config: SandboxConfig, where: str) -> str:
    """The cache key: the reference source, the settings its trials depend on, and ``where`` (the device)."""
    plan = {
        "backend": config.backend,
        "seed": config.seed,
        "correctness_trials": config.correctness.trials,
        "extra_distributions": list(config.correctness.extra_distributions),
        "ship_outputs_bytes": config.ship_outputs_limit_bytes(),
        "cpu_threads": config.cpu_threads,
    }
    text = json.dumps({"reference": reference, "plan": plan, "where": where}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class ReferenceCache:
    """A thread-safe, byte-bounded LRU of KnownReference, with hit and miss counters."""

    def __init__(self, max_mb: float) -> None:
        self.max_bytes = int(max_mb * 2**20)
        self._entries: OrderedDict[str, KnownReference] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> KnownReference | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: str, entry: KnownReference) -> bool:
        """Keep ``entry`` unless it alone exceeds the budget (or a trial was kept on the device); evicts the
        least recently used to make room. Returns whether it is kept."""
        size = entry.nbytes
        if size > self.max_bytes or any(m.on_device for m in entry.meta):
            return False
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            while self._entries and self._bytes + size > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes
            self._entries[key] = entry
            self._bytes += size
        return True

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries), "bytes": self._bytes}
