"""The Ray executor: the local executor's workers as Ray actors, reachable by name from any process.

Build actors (one CPU each) capture and build candidates into the shared build cache; execution actors
(``num_gpus=1`` on the cuda backend) run them. Execution actors also require a custom resource
(``ExecutorConfig.ray.resource``) that only evaluation nodes advertise, so they are never placed on the
trainer's GPUs. Actors are named ``rubric_rl.build.<i>`` / ``rubric_rl.exec.<i>`` in the configured
namespace and detached, so a trainer, a rollout process and a CLI all reach the same ones; the build cache
directory must be on storage every node sees (and the torch build must match for CPU nodes to build for GPU
nodes).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.executors.base import Executor, ExecutorConfig, default_build_workers, infra_verdict
from rubric_rl.sandbox.executors.baselines import BaselineStore, baseline_key
from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.tasks.task import Task

log = logging.getLogger(__name__)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # the optional extra
        raise RuntimeError("the ray executor needs Ray: pip install 'rubric-rl[ray]'") from e
    return ray


class _BuildWorker:
    """Captures and builds candidates on a CPU node."""

    def __init__(self, sandbox: dict[str, Any]) -> None:
        from rubric_rl.sandbox.evaluate import Evaluator

        self.evaluator = Evaluator(SandboxConfig.model_validate(sandbox))

    def prebuild(self, program: str, arch: str | None) -> list[dict[str, Any]]:
        return [b.model_dump() for b in self.evaluator.prebuild(program, arch)]

    def stats(self) -> dict[str, dict[str, float]]:
        return {"builds": self.evaluator.builder.stats.as_dict(), "captures": dict(self.evaluator.captures.stats())}


class _ExecutionWorker:
    """Runs candidates on one GPU (or CPU slot), one at a time."""

    def __init__(self, sandbox: dict[str, Any]) -> None:
        from rubric_rl.sandbox.evaluate import Evaluator

        self.evaluator = Evaluator(SandboxConfig.model_validate(sandbox))

    def evaluate(self, reference: str, program: str, task_id: str, baseline: str | None) -> str:
        from rubric_rl.sandbox.measure.baseline import TaskBaseline
        from rubric_rl.sandbox.run.placement import Placement

        placement = Placement(baseline=TaskBaseline.model_validate_json(baseline) if baseline else None)
        return self.evaluator.evaluate(reference, program, task_id=task_id, placement=placement).model_dump_json()

    def measure_baseline(self, reference: str) -> str:
        from rubric_rl.sandbox.measure.baseline import measure_baseline

        return measure_baseline(reference, self.evaluator.config).model_dump_json()

    def device(self) -> dict[str, str]:
        from rubric_rl.sandbox.executors.local import visible_gpus

        gpus = visible_gpus()
        return gpus[0] if gpus else {"name": "cpu", "arch": ""}


class RayExecutor(Executor):
    def __init__(self, sandbox: SandboxConfig, config: ExecutorConfig | None = None) -> None:
        ray = _import_ray()
        self.ray = ray
        self.sandbox = sandbox
        from rubric_rl.sandbox.evaluate import Evaluator

        self._static = Evaluator(sandbox)  # the static checks, here on the driver (it starts no worker)
        self.config = config or ExecutorConfig(kind="ray")
        if not ray.is_initialized():
            ray.init(address=self.config.ray.address, namespace=self.config.ray.namespace, log_to_driver=False)
        cuda = sandbox.backend == "cuda"
        n_exec = self.config.ray.execution_actors or (
            max(1, int(ray.cluster_resources().get("GPU", 0))) if cuda else self.config.cpu_slots
        )
        n_build = self.config.ray.build_actors or self.config.build_workers or default_build_workers(sandbox.backend)
        payload = sandbox.model_dump(mode="json")
        exec_opts: dict[str, Any] = {"resources": {self.config.ray.resource: 1}, "num_cpus": 1}
        if cuda:
            exec_opts["num_gpus"] = 1
        build_cls = ray.remote(num_cpus=1)(_BuildWorker)
        exec_cls = ray.remote(**exec_opts)(_ExecutionWorker)
        common = {"namespace": self.config.ray.namespace, "get_if_exists": True, "lifetime": "detached"}
        self._builders = [
            build_cls.options(name=f"rubric_rl.build.{i}", **common).remote(payload) for i in range(n_build)
        ]
        self._executors = [
            exec_cls.options(name=f"rubric_rl.exec.{i}", **common).remote(payload) for i in range(n_exec)
        ]
        self.device: dict[str, str] | None = None
        self.baselines = BaselineStore(sandbox.build.cache_dir.parent / "baselines")
        self._free_builders: asyncio.Queue[Any] | None = None
        self._free_executors: asyncio.Queue[Any] | None = None
        self._pending: asyncio.Semaphore | None = None
        self.evaluations = 0
        self.started = time.monotonic()

    def _queues(self) -> tuple[asyncio.Queue[Any], asyncio.Queue[Any], asyncio.Semaphore]:
        if self._free_builders is None or self._free_executors is None or self._pending is None:
            self._free_builders, self._free_executors = asyncio.Queue(), asyncio.Queue()
            for a in self._builders:
                self._free_builders.put_nowait(a)
            for a in self._executors:
                self._free_executors.put_nowait(a)
            self._pending = asyncio.Semaphore(self.config.max_pending)
        return self._free_builders, self._free_executors, self._pending

    async def _device(self) -> dict[str, str]:
        if self.device is None:
            _, executors, _ = self._queues()
            actor = await executors.get()
            try:
                self.device = await actor.device.remote()
            finally:
                executors.put_nowait(actor)
        return self.device

    async def _evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        builders, executors, pending = self._queues()
        async with pending:
            # A syntax error or a proven hack needs no actor: decided here (see Evaluator.settled_statically).
            decided = await asyncio.to_thread(self._static.settled_statically, task.code, program, task_id=task.id)
            if decided is not None:
                self.evaluations += 1
                return decided
            device = await self._device()
            arch = self.sandbox.build.arch or device.get("arch") or None
            if self.config.prebuild:
                builder = await builders.get()
                try:
                    await builder.prebuild.remote(program, arch if self.sandbox.backend == "cuda" else None)
                finally:
                    builders.put_nowait(builder)
            reuse = self.config.reuse_baselines and self.sandbox.timing.enabled
            baseline = await self._baseline(task, device) if reuse else None
            actor = await executors.get()
            try:
                ref = actor.evaluate.remote(task.code, program, task.id, baseline)
                text = await (asyncio.wait_for(ref, deadline_s) if deadline_s else ref)
            except asyncio.TimeoutError:
                return infra_verdict(task, program, f"the {deadline_s:.0f} s deadline passed")
            except self.ray.exceptions.RayActorError as e:
                return infra_verdict(task, program, f"execution actor died: {e}")
            finally:
                executors.put_nowait(actor)
        self.evaluations += 1
        return Verdict.model_validate_json(text)

    async def _baseline(self, task: Task, device: dict[str, str]) -> str | None:
        import torch

        from rubric_rl.sandbox.measure.baseline import TaskBaseline

        key = baseline_key(task.code, self.sandbox, device.get("name", "?"), torch.__version__)
        _, executors, _ = self._queues()

        async def measure() -> TaskBaseline:
            actor = await executors.get()
            try:
                return TaskBaseline.model_validate_json(await actor.measure_baseline.remote(task.code))
            finally:
                executors.put_nowait(actor)

        found = await self.baselines.get_or_measure(key, measure)
        return found.model_dump_json() if found is not None else None

    def stats(self) -> dict[str, Any]:
        totals: dict[str, dict[str, float]] = {"builds": {}, "captures": {}}
        for s in self.ray.get([b.stats.remote() for b in self._builders]):
            for part, counts in s.items():
                for k, v in counts.items():
                    totals[part][k] = totals[part].get(k, 0) + v
        return {
            "executor": "ray",
            "evaluations": self.evaluations,
            "builds": totals["builds"],
            "captures": totals["captures"],
            "baselines": {
                "measured": self.baselines.measured,
                "reused": self.baselines.reused,
                "failed": self.baselines.failed,
            },
            "build_actors": len(self._builders),
            "execution_actors": len(self._executors),
            "elapsed_s": round(time.monotonic() - self.started, 3),
        }

    async def close(self) -> None:
        """Detached actors stay up for other processes of the cluster; ``shutdown_actors`` ends them."""

    def shutdown_actors(self) -> None:
        for a in [*self._builders, *self._executors]:
            self.ray.kill(a)
