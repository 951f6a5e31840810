"""The device interface the worker's correctness and timing code is written against."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any


class DeviceBackend(ABC):
    name: str
    device: str
    timer: str

    @abstractmethod
    def setup(self, *, memory_fraction: float, threads: int | None) -> None:
        """Prepare the device in a fresh worker (memory caps, thread counts)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for all work on the device, on every stream."""

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    def flush_cache(self) -> None:  # noqa: B027 - a no-op by default, on purpose
        """Evict the candidate's data from the last-level cache before a timed call (no-op where not done)."""

    @abstractmethod
    def poison_free_memory(self) -> None:
        """Overwrite memory the allocator holds free (or will hand out next) with NaN, so a candidate that
        returns uninitialised memory cannot find a previous model's results there."""

    def seed(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)

    def describe(self) -> dict[str, Any]:
        return {}
