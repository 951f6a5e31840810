"""Where an executor's candidates spent their time before and in their execution slot, summed per stage.

A Verdict's durations are its worker's: they start when the candidate has a slot. What came before (the pending
queue, the static checks, the capture and build, the wait for a slot) is recorded here, per stage, so that a
batch whose samples wait minutes for seconds of work says where they waited (``LocalExecutor.stats()['waits_s']``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

STAGES = ("pending", "static", "prebuild", "slot", "run")  # in the order a candidate passes them


class Waits:
    """Seconds per stage (``STAGES`` unless told others): how many, summed, the mean and the longest."""

    def __init__(self, stages: Iterable[str] = STAGES) -> None:
        self._seconds: dict[str, list[float]] = {stage: [] for stage in stages}
        self._lock = threading.Lock()

    def add(self, stage: str, seconds: float) -> None:
        if stage not in self._seconds:
            raise ValueError(f"unknown stage {stage!r} (have {', '.join(self._seconds)})")
        with self._lock:
            self._seconds[stage].append(seconds)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Record the time the block took under ``stage``, however it ends."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(stage, time.monotonic() - started)

    def summary(self) -> dict[str, dict[str, float]]:
        with self._lock:
            seen = {stage: list(values) for stage, values in self._seconds.items()}
        return {
            stage: {
                "n": len(values),
                "sum": round(sum(values), 3),
                "mean": round(sum(values) / len(values), 3) if values else 0.0,
                "max": round(max(values), 3) if values else 0.0,
            }
            for stage, values in seen.items()
        }
