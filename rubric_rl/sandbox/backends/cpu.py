"""CPU backend: C++/OpenMP extensions, host timers. Same pipeline as the GPU, so it runs without one."""

from __future__ import annotations

import os
import platform
from typing import Any

from rubric_rl.sandbox.backends.base import DeviceBackend


class CpuBackend(DeviceBackend):
    name = "cpu"
    device = "cpu"
    timer = "host"

    def setup(self, *, memory_fraction: float, threads: int | None) -> None:
        import torch

        n = threads or os.cpu_count() or 1
        torch.set_num_threads(n)

    def synchronize(self) -> None:
        pass

    def poison_free_memory(self) -> None:
        # glibc returns large blocks to the OS on free (fresh pages read as zero) and the worker poisons the
        # reference's outputs in place before freeing them; there is no allocator pool to overwrite here.
        pass

    def describe(self) -> dict[str, Any]:
        return {"device": platform.processor() or platform.machine(), "arch": None, "cuda": None}
