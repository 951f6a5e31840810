"""The evaluation executor: one interface for turning many candidates into Verdicts, two implementations.

``local`` runs build workers on this machine's cores feeding one execution worker per GPU; ``ray`` runs the
same work as Ray actors across a cluster. Both call the same ``Evaluator`` methods, so they return the same
Verdicts. The async API (``await executor.evaluate(task, program)``) is what the reward and the agents use.
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubric_rl.sandbox.measure.ncu import KernelMetricsReport, NcuOptions
from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.tasks.task import Task

log = logging.getLogger(__name__)


def default_build_workers(backend: str, cores: int | None = None) -> int:
    """Concurrent builds on ``cores`` (default: all of this machine's), bounded by memory (a torch-extension build
    peaks near 2-3 GB). On cuda, a build per two cores: ninja compiles a split candidate's kernel (``.cu``) and its
    torch glue (``.cpp``) at once, so a build per core ran two compilers per core (on a 16-core H100 host, the
    32 builds of a cold pass took 1,197 s summed at 16 at a time and 651 s at 7). On cpu a candidate has one
    unit: a build per core."""
    cores = cores or os.cpu_count() or 1
    per_build = 2 if backend == "cuda" else 1
    try:
        import psutil

        by_memory = int(psutil.virtual_memory().total / (3 << 30))
    except Exception:  # psutil missing fields on exotic platforms: fall back to cores
        by_memory = cores
    return max(1, min(cores // per_build, by_memory))


class RaySettings(BaseModel):
    """Where and how the ray executor places its actors."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(default=None, description="Ray cluster address; None: connect or start local.")
    namespace: str = Field(default="rubric_rl", description="Namespace of the named actors.")
    resource: str = Field(
        default="rubric_rl_eval",
        description="Custom resource execution actors require, so they land only on nodes that offer it (never on "
        "the trainer's GPUs).",
    )
    execution_actors: int | None = Field(
        default=None, ge=1, description="Execution actors; None: one per GPU (cuda) or cpu_slots (cpu)."
    )
    build_actors: int | None = Field(default=None, ge=1, description="Build actors; None: build_workers.")


class ExecutorConfig(BaseModel):
    """How evaluation work is spread over processes, GPUs and machines."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = Field(default="local", description="local: this machine; ray: a Ray cluster.")
    build_workers: int | None = Field(
        default=None,
        ge=1,
        description="Concurrent builds. None: one per two cores on cuda (ninja compiles a split candidate's kernel "
        "and torch glue at once), one per core on cpu; bounded by memory (see default_build_workers).",
    )
    capture_workers: int | None = Field(
        default=None,
        ge=0,
        description="Concurrent captures (each a sandboxed process importing a candidate to record its load_inline "
        "calls, ahead of its build), beside the build workers. None: as many as build workers; 0: captures take "
        "build workers. Local executor only.",
    )
    devices: list[int] | None = Field(default=None, description="GPU indices to execute on; None: all visible.")
    slots_per_gpu: int = Field(
        default=2,
        ge=1,
        description="Execution workers per GPU: their correctness checks overlap, timings take turns "
        "(a DeviceGate per GPU); GPU memory is divided among them.",
    )
    baseline_workers_per_gpu: int = Field(
        default=2,
        ge=1,
        description="Task baselines measured at once per GPU (their start and torch.compile warm-up are CPU work "
        "that holds no gate; their timings take turns with the candidates').",
    )
    timing_cores_per_device: int | None = Field(
        default=None,
        ge=0,
        description="Logical CPUs reserved per device for the worker that is timing on it (whole physical cores; "
        "this process and everything it starts run on the rest). None: 2 on cuda, 0 on cpu (where the timed "
        "code itself is CPU work that wants every core). Nothing is reserved where the cores are too few.",
    )
    cpu_slots: int = Field(
        default=1, ge=1, description="Execution workers on the cpu backend (one gate: timings take turns)."
    )
    max_pending: int = Field(default=1024, ge=1, description="Candidates accepted before evaluate() waits.")
    prebuild: bool = Field(default=True, description="Capture and build on build workers before execution.")
    spare_workers: int | None = Field(
        default=None,
        ge=0,
        description="Started workers (torch imported) kept waiting per execution slot and baseline lane; 0: none. "
        "None: 2 on cuda (a worker starts in 3-11 s on a busy GPU host, longer than many evaluations), 1 on cpu.",
    )
    reuse_baselines: bool = Field(default=True, description="Measure eager/compile once per task and device.")
    ray: RaySettings = Field(default_factory=lambda: RaySettings(), description="The ray executor's settings.")


def infra_verdict(task: Task, program: str, message: str) -> Verdict:
    """A Verdict for a candidate the evaluator could not judge (masked by rewards, not scored)."""
    import hashlib

    return Verdict(
        status="runtime_error",
        task_id=task.id,
        candidate_sha256=hashlib.sha256(program.encode()).hexdigest(),
        errors=[message],
        infra_error=message,
    )


class Executor(ABC):
    """Evaluates candidates concurrently; every call returns a Verdict (never raises for a candidate)."""

    async def evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        """The Verdict of one candidate. ``deadline_s`` bounds queueing plus evaluation.

        An exception inside the evaluation is ours, not the candidate's (the candidate's failures are Verdicts
        already): it comes back as a Verdict with ``infra_error`` set, which rewards mask instead of scoring, so
        one such fault neither crashes a trainer's reward loop nor teaches the model anything."""
        try:
            return await self._evaluate(task, program, deadline_s=deadline_s)
        except Exception as e:  # the trust boundary: whatever happened, the caller gets a Verdict
            log.exception("evaluation of a candidate for task %s failed inside the evaluator", task.id)
            return infra_verdict(task, program, f"evaluator error: {type(e).__name__}: {e}")

    @abstractmethod
    async def _evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        """``evaluate`` without the guard: each executor's own way to reach a Verdict."""

    async def kernel_metrics(self, task: Task, program: str, options: NcuOptions) -> KernelMetricsReport:
        """Nsight Compute's metrics of the program's kernels (``Evaluator.kernel_metrics``); never raises. Only an
        executor that can give ncu a GPU to itself runs it (the local one, and a node's service around it)."""
        return KernelMetricsReport(error="this executor does not run Nsight Compute (use the local executor)")

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """Counters: builds (hits/misses), evaluations, baselines."""

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release workers and connections."""

    async def __aenter__(self) -> Executor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
