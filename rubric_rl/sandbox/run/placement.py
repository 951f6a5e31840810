"""Where and how one evaluation (or one task baseline) runs: what the executor decides, in one object.

The ``SandboxConfig`` says what is checked and within which limits, the same for every candidate; a ``Placement``
says what the executor chose for this one: the device, the warm worker, the device's gate and how it is held,
the CPUs reserved for timing, the task's baseline, and the share of the GPU's memory and of the time left. The
default is an evaluation on its own: a new worker, no gate, the config's memory fraction and run timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rubric_rl.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from rubric_rl.sandbox.measure.baseline import TaskBaseline
    from rubric_rl.sandbox.run.device_gate import DeviceGate
    from rubric_rl.sandbox.run.process import WorkerProcess


@dataclass(frozen=True)
class Placement:
    cuda_visible_devices: str | None = None
    """CUDA_VISIBLE_DEVICES of a worker started for this evaluation (None: this process's)."""
    worker: WorkerProcess | None = None
    """An already started (warm) worker to use, else a new one is started."""
    gate: DeviceGate | None = None
    """The device's gate when other evaluations share it: held shared for the reference, the correctness trials
    and the kernel profile (giving way between two trials to a waiting timing), exclusively for the timed rounds."""
    alone: bool = False
    """Hold the gate exclusively throughout (an evaluation that needs the whole device)."""
    timing_cores: frozenset[int] | None = None
    """CPUs reserved for this device's timings (see ``cpu_cores``): the worker is moved onto them for its timed
    rounds, then back onto ours."""
    baseline: TaskBaseline | None = None
    """The task's measured baseline: torch.compile is then not run again."""
    await_baseline: Callable[[], TaskBaseline | None] | None = None
    """A baseline still being measured: the worker skips torch.compile, the correctness trials run meanwhile, and
    the evaluation blocks, holding no gate, just before timing (None back: the worker times torch.compile itself)."""
    memory_fraction: float | None = None
    """The worker's share of its GPU's memory, where the executor divides a device among workers (None: the
    config's ``gpu_memory_fraction``)."""
    run_timeout_s: float | None = None
    """A tighter limit on the worker's own time than the config's ``run_timeout_s`` (what is left of a deadline)."""

    def __post_init__(self) -> None:
        if self.memory_fraction is not None and not 0 < self.memory_fraction <= 1:
            raise ValueError(f"Placement.memory_fraction: {self.memory_fraction} is not in (0, 1]")
        if self.run_timeout_s is not None and self.run_timeout_s <= 0:
            raise ValueError(f"Placement.run_timeout_s: {self.run_timeout_s} is not positive")

    def memory_fraction_of(self, config: SandboxConfig) -> float:
        return self.memory_fraction if self.memory_fraction is not None else config.limits.gpu_memory_fraction

    def run_timeout_of(self, config: SandboxConfig) -> float:
        return self.run_timeout_s if self.run_timeout_s is not None else config.limits.run_timeout_s
