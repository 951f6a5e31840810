"""The local executor: build workers on this machine's cores feeding execution workers on each GPU.

A candidate's way through it: wait for a place in the bounded queue (back-pressure: ``evaluate`` waits when
``max_pending`` candidates are in flight); the static checks (a syntax error or a proven hack is its Verdict
here, queued for nothing else); capture its extensions on a capture worker (``capture_workers`` at a time) and
build them on a build worker (a thread driving compiler processes, ``build_workers`` at a time; a capture or build
another candidate has under way is awaited, not repeated, and holds no worker: see ``prebuilds``; the time each
stage takes is in ``stats()['waits_s']``) while its task's baseline is measured (once per task,
beside the builds, the one a candidate needs soonest first: see ``baseline_lanes``); take an execution slot and
a warm worker process; run. Each GPU has ``slots_per_gpu`` slots and one ``DeviceGate``: correctness checks of
its slots overlap, timing holds the GPU alone (see ``device_gate``). Every evaluation is a fresh worker process,
so a crash or a sticky CUDA error ends with that process: the slot's next worker is a new one (and was started
ahead, while the previous candidate ran).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from rubric_rl.sandbox.build.builder import Builder
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.evaluate import Evaluator
from rubric_rl.sandbox.executors.base import Executor, ExecutorConfig, default_build_workers, infra_verdict
from rubric_rl.sandbox.executors.baseline_lanes import AWAITED, BUILT, BaselineLanes
from rubric_rl.sandbox.executors.baselines import BaselineDeferred, BaselineStore, baseline_key
from rubric_rl.sandbox.executors.memory_shares import MemoryShares
from rubric_rl.sandbox.executors.prebuilds import SharedPrebuilds
from rubric_rl.sandbox.executors.waits import Waits
from rubric_rl.sandbox.executors.warm_workers import WarmWorkers
from rubric_rl.sandbox.measure.baseline import BaselineError, TaskBaseline, measure_baseline
from rubric_rl.sandbox.measure.ncu import KernelMetricsReport, NcuOptions, find_ncu
from rubric_rl.sandbox.run.cpu_cores import CorePlan, available_cores, pin_process, plan_cores
from rubric_rl.sandbox.run.device_gate import DeviceGate
from rubric_rl.sandbox.run.placement import Placement
from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.tasks.task import Task

log = logging.getLogger(__name__)


def visible_gpus() -> list[dict[str, str]]:
    """index, name and compute capability of each visible GPU, from nvidia-smi (no CUDA context here)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            gpus.append({"index": parts[0], "name": parts[1], "arch": parts[2]})
    return gpus


def out_of_device_memory(verdict: Verdict) -> bool:
    """The evaluation failed because the GPU ran out of memory: torch's limit or CUDA's allocator, and a raw
    allocation's ``CUDA error: out of memory`` (cuBLAS's workspace, a kernel's cudaMalloc), in any stage."""
    return verdict.status == "runtime_error" and any(
        "OutOfMemoryError" in e or "out of memory" in e.lower() for e in verdict.errors
    )


class LocalExecutor(Executor):
    def __init__(self, sandbox: SandboxConfig, config: ExecutorConfig | None = None) -> None:
        self.config = config or ExecutorConfig()
        self._shares = 1  # each device's memory is divided into this many equal shares
        self._divided = False  # whether each worker is told its shares of the GPU's memory (cuda, several shares)
        devices, per_device = self._plan_devices(sandbox)
        self.sandbox = sandbox
        self.builder = Builder(
            sandbox.build.cache_dir,
            timeout_s=sandbox.build.timeout_s,
            jobs=sandbox.build.jobs,
            use_pch=sandbox.build.use_pch,
        )
        self.evaluator = Evaluator(sandbox, builder=self.builder)
        self._gates = {d: DeviceGate(f"device {d}") for d in devices}
        self._own_cores = available_cores()
        per_device_cores = self.config.timing_cores_per_device
        if per_device_cores is None:
            per_device_cores = 2 if sandbox.backend == "cuda" else 0
        self.cores: CorePlan = plan_cores(devices, per_device_cores, self._own_cores)
        if self.cores.active:
            # Everything this process runs and starts from now on (builds, workers, their compilers) stays off
            # the reserved cores; a worker is moved onto its device's only while it holds the gate to time.
            pin_process(os.getpid(), self.cores.general)
        self._slot_device = {f"{d}.{k}": d for d in devices for k in range(per_device)}
        # Slots in round-robin order over devices, so that a half-busy executor spreads over all GPUs.
        self._slots = [f"{d}.{k}" for k in range(per_device) for d in devices]
        self.build_workers = self.config.build_workers or default_build_workers(
            sandbox.backend, len(self.cores.general) or None
        )
        self._build_pool = ThreadPoolExecutor(self.build_workers, thread_name_prefix="build")
        # Captures on their own workers: on the build workers every capture queued at a batch's start came before
        # any build, which is queued only once its capture is done (see prebuilds).
        captures = self.config.capture_workers
        self.capture_workers = self.build_workers if captures is None else captures
        self._capture_pool = (
            ThreadPoolExecutor(self.capture_workers, thread_name_prefix="capture")
            if self.capture_workers
            else self._build_pool
        )
        self._exec_pool = ThreadPoolExecutor(len(self._slots), thread_name_prefix="exec")
        self._baseline_workers = self.config.baseline_workers_per_gpu if sandbox.backend == "cuda" else 1
        self._baseline_pool = ThreadPoolExecutor(len(devices) * self._baseline_workers, thread_name_prefix="baseline")
        # Baseline lanes ("b0.0", "b0.1", ...: baseline_workers_per_gpu per device), each with its warm worker.
        self._lane_device = {f"b{d}.{k}": d for d in devices for k in range(self._baseline_workers)}
        self._baseline_lanes: BaselineLanes | None = None  # the most urgent baseline is measured next
        self._memory: MemoryShares | None = None  # who holds each device's memory (see memory_shares)
        self._prebuilds: SharedPrebuilds | None = None  # captures and builds under way (see prebuilds)
        self.waits = Waits()  # where candidates spent their time, per stage of the queue (see waits)
        self._devices = devices
        spares = self.config.spare_workers
        if spares is None:
            spares = 2 if sandbox.backend == "cuda" else 1
        self._warm = WarmWorkers(sandbox, spares)
        self._free: asyncio.Queue[str] | None = None
        self._pending: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.baselines = BaselineStore(sandbox.build.cache_dir.parent / "baselines")
        self.evaluations = 0
        self.memory_retried: list[str] = []  # each retry with more shares: "candidate TASK: 1 -> 3 shares", ...
        self._task_shares: dict[str, int] = {}  # tasks (by code) whose trials need more than one share: how many
        self.memory_waits: list[float] = []  # seconds each evaluation with several shares waited for them
        self.started = time.monotonic()

    def _plan_devices(self, sandbox: SandboxConfig) -> tuple[list[str], int]:
        """The devices to execute on and the slots per device; sets the GPUs, arch, device name and memory shares."""
        if sandbox.backend == "cuda":
            gpus = visible_gpus()
            wanted = self.config.devices
            self._gpus = [g for g in gpus if wanted is None or int(g["index"]) in wanted]
            if not self._gpus and wanted is None:
                # No nvidia-smi: trust CUDA_VISIBLE_DEVICES order and let each worker find its device.
                self._gpus = [{"index": "0", "name": "cuda", "arch": sandbox.build.arch or ""}]
            devices = [g["index"] for g in self._gpus]
            per_device = self.config.slots_per_gpu
            self.arch = sandbox.build.arch or (self._gpus[0]["arch"] if self._gpus and self._gpus[0]["arch"] else None)
            self.device_name = self._gpus[0]["name"] if self._gpus else "cuda"
            # Workers of one GPU share its memory: a share for each slot's worker and each baseline lane's. One
            # that runs out of it is evaluated again with more shares (see evaluate and memory_shares).
            baseline_workers = self.config.baseline_workers_per_gpu if self.config.reuse_baselines else 0
            self._shares = per_device + baseline_workers
            self._divided = self._shares > 1
        else:
            self._gpus = []
            devices = ["cpu"]
            per_device = self.config.cpu_slots
            self._shares = per_device + 1  # the slots and the baseline lane: never more holders than shares
            self.arch = None
            self.device_name = platform.processor() or platform.machine()
        return devices, per_device

    def _queues(self) -> tuple[asyncio.Queue[str], asyncio.Semaphore]:
        """The slot queue and the back-pressure semaphore of the running event loop.

        asyncio primitives belong to the loop that first waits on them, so a caller that runs one
        ``asyncio.run`` per batch (a reward function, a benchmark's phases) gets fresh ones per loop; two loops
        sharing one executor at the same time would each hand out every slot, so that is refused."""
        loop = asyncio.get_running_loop()
        if self._free is None or self._pending is None or self._loop is not loop:
            if self._loop is not None and self._loop is not loop and self._loop.is_running():
                raise RuntimeError("this executor is in use by another running event loop; use one per loop")
            self._loop = loop
            self._free = asyncio.Queue()
            for slot in self._slots:
                self._free.put_nowait(slot)
            self._pending = asyncio.Semaphore(self.config.max_pending)
            self._memory = MemoryShares(self._devices, self._shares)
            self._baseline_lanes = BaselineLanes(sorted(self._lane_device, key=lambda lane: lane.split(".")[::-1]))
            self._prebuilds = SharedPrebuilds(self.evaluator, self._build_pool, self.arch, self._capture_pool)
        return self._free, self._pending

    def _cuda_env(self, device: str) -> str | None:
        return device if self.sandbox.backend == "cuda" else None

    async def _evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        free, pending = self._queues()
        memory = self._memory
        assert memory is not None
        started = time.monotonic()
        async with pending:
            self.waits.add("pending", time.monotonic() - started)
            loop = asyncio.get_running_loop()
            # A syntax error or a proven hack needs no build, baseline or slot: decided before it queues for them.
            with self.waits.timed("static"):
                decided = await asyncio.to_thread(
                    self.evaluator.settled_statically, task.code, program, task_id=task.id
                )
            if decided is not None:
                self.evaluations += 1
                return decided
            wants_baseline = self.config.reuse_baselines and self.sandbox.timing.enabled
            # The baseline needs no build and the correctness trials need no baseline: it is measured while the
            # candidate compiles and is checked, and awaited only before the candidate's timing.
            measuring = asyncio.ensure_future(self._baseline(task)) if wants_baseline else None
            lanes, key = self._baseline_lanes, self._baseline_key(task)
            assert lanes is not None
            if self.config.prebuild:
                assert self._prebuilds is not None
                with self.waits.timed("prebuild"):
                    await self._prebuilds.prebuild(program)
                lanes.raise_urgency(key, BUILT)
            baseline: TaskBaseline | None = None
            await_baseline: Callable[[], TaskBaseline | None] | None = None
            if measuring is not None and measuring.done():
                baseline = measuring.result()
            elif measuring is not None:
                pending_baseline = measuring

                async def settled() -> TaskBaseline | None:
                    lanes.raise_urgency(key, AWAITED)
                    # Called by the running evaluation, which holds memory of its slot's device (taken below).
                    async with memory.awaiting_baseline(self._slot_device[slot]):
                        return await pending_baseline

                def awaited() -> TaskBaseline | None:  # called from the evaluation's thread
                    return asyncio.run_coroutine_threadsafe(settled(), loop).result()

                await_baseline = awaited

            with self.waits.timed("slot"):
                slot = await free.get()
            try:
                run_timeout_s = None
                if deadline_s is not None:
                    remaining = deadline_s - (time.monotonic() - started)
                    if remaining <= 0:
                        return infra_verdict(task, program, f"the {deadline_s:.0f} s deadline passed in the queue")
                    if remaining < self.sandbox.limits.run_timeout_s:
                        run_timeout_s = remaining
                placement = Placement(baseline=baseline, await_baseline=await_baseline, run_timeout_s=run_timeout_s)
                with self.waits.timed("run"):
                    verdict = await self._in_shares(task, program, slot, placement, measuring)
            finally:
                free.put_nowait(slot)
        beside = TaskBaseline.beside(verdict.timings) if wants_baseline else None
        if beside is not None:
            # No baseline came (deferred to the task's candidates, see _baseline, or failed): this evaluation
            # timed eager and compile beside its candidate, and that is the task's baseline from now on.
            self.baselines.put(key, beside)
        self.evaluations += 1
        return verdict

    async def _in_shares(
        self,
        task: Task,
        program: str,
        slot: str,
        placement: Placement,
        measuring: asyncio.Future[TaskBaseline | None] | None,
    ) -> Verdict:
        """Evaluate in ``slot`` with one share of its device's memory, or as many as the task is known to need; out
        of them, again with more (half the device, then all of it, alone)."""
        memory, lanes, loop = self._memory, self._baseline_lanes, asyncio.get_running_loop()
        assert memory is not None and lanes is not None
        device = self._slot_device[slot]
        cuda = self._cuda_env(device)
        shares = first_shares = self._task_shares.get(task.code, 1) if self._divided else 1
        while True:
            if shares > 1 and measuring is not None:
                # Its baseline takes a share: settled before several are asked for (see memory_shares).
                lanes.raise_urgency(self._baseline_key(task), AWAITED)
                placement = replace(placement, baseline=await measuring, await_baseline=None)
            placed = replace(
                placement,
                cuda_visible_devices=cuda,
                gate=self._gates[device],
                alone=self._divided and shares == self._shares,  # nothing else runs on the device
                timing_cores=self.cores.timing.get(device),
                memory_fraction=self._memory_fraction(shares),
            )
            async with memory.share(device, shares) as waited:
                if shares > 1:
                    self.memory_waits.append(round(waited, 3))
                verdict = await loop.run_in_executor(self._exec_pool, self._run, task, program, slot, placed)
            if not self._divided or shares == self._shares or not out_of_device_memory(verdict):
                if shares > first_shares and verdict.status == "correct":
                    # A correct candidate ran out of fewer: the task's candidates need this many, and its later
                    # ones ask for them at once instead of paying a failed run each. Only a correct one teaches
                    # it, so a candidate wasting memory on wrong answers cannot. Whether or not they time eager
                    # and compile beside them: on an H100, L1-25's and L3-2's later candidates, with the task's
                    # baseline reused, ran out of what the first one had run out of (all of the device for L1-25,
                    # half for L3-2) when they were told apart.
                    self._task_shares[task.code] = max(shares, self._task_shares.get(task.code, 1))
                return verdict
            # Its shares of a divided GPU were too few: that is ours to fix, not the candidate's fault.
            self.memory_retried.append(f"candidate {task.id}: {shares} -> {self._more_shares(shares)} shares")
            shares = self._more_shares(shares)
            log.info("task %s: out of its GPU memory; again with %d of %d shares", task.id, shares, self._shares)
            if (verdict.infra_error or "").startswith("task error"):
                # The task's own trials need more (KernelBench L1-19's 6 GB outputs): its later candidates ask for
                # as many shares at once.
                self._task_shares[task.code] = max(shares, self._task_shares.get(task.code, 1))

    def _run(self, task: Task, program: str, slot: str, placement: Placement) -> Verdict:
        """One evaluation on the slot's warm worker (in an execution thread)."""
        placement = replace(placement, worker=self._warm.take(slot, placement.cuda_visible_devices))
        return self.evaluator.evaluate(task.code, program, task_id=task.id, placement=placement)

    async def kernel_metrics(self, task: Task, program: str, options: NcuOptions) -> KernelMetricsReport:
        """Nsight Compute's metrics of one program, in an execution slot with all of its device's memory shares and
        its gate held exclusively: nothing else runs on the GPU beside ncu's kernel replays, which would disturb
        the metrics and the other evaluations' timings alike. Never raises."""
        started = time.monotonic()
        if self.sandbox.backend != "cuda" or find_ncu(options) is None:  # the evaluator says why not, at once
            return self.evaluator.kernel_metrics(task.code, program, options, task_id=task.id)
        free, pending = self._queues()
        memory, loop = self._memory, asyncio.get_running_loop()
        assert memory is not None
        try:
            async with pending:
                slot = await free.get()
                try:
                    device = self._slot_device[slot]
                    placement = Placement(
                        cuda_visible_devices=self._cuda_env(device),
                        gate=self._gates[device],
                        alone=True,
                        memory_fraction=self._memory_fraction(self._shares),
                    )
                    async with memory.share(device, self._shares):
                        return await loop.run_in_executor(
                            self._exec_pool,
                            lambda: self.evaluator.kernel_metrics(
                                task.code, program, options, task_id=task.id, placement=placement
                            ),
                        )
                finally:
                    free.put_nowait(slot)
        except Exception as e:  # ours, not the program's: the caller gets a report saying so
            log.exception("kernel metrics of a candidate for task %s failed inside the evaluator", task.id)
            error = f"evaluator error: {type(e).__name__}: {e}"
            return KernelMetricsReport(error=error, seconds=time.monotonic() - started)

    def _more_shares(self, shares: int) -> int:
        """The next size up for an evaluation out of ``shares``: half the device, then all of it."""
        half = self._shares // 2
        return half if shares < half else self._shares

    def _memory_fraction(self, shares: int) -> float | None:
        """A worker's share of its GPU's memory with ``shares`` of the device's shares (None: the config's, where the
        memory is not divided)."""
        if not self._divided:
            return None
        return self.sandbox.limits.gpu_memory_fraction * shares / self._shares

    def _baseline_key(self, task: Task) -> str:
        import torch

        return baseline_key(task.code, self.sandbox, self.device_name, torch.__version__)

    async def _baseline(self, task: Task) -> TaskBaseline | None:
        key = self._baseline_key(task)
        self._queues()
        lanes, memory = self._baseline_lanes, self._memory
        assert lanes is not None and memory is not None
        loop = asyncio.get_running_loop()

        def measure_on(lane: str) -> TaskBaseline:
            device = self._lane_device[lane]
            gate, env, cores = self._gates[device], self._cuda_env(device), self.cores.timing.get(device)
            placement = Placement(
                cuda_visible_devices=env,
                worker=self._warm.take(lane, env, compiles=self.sandbox.timing.compile_baseline),
                gate=gate,
                timing_cores=cores,
                memory_fraction=self._memory_fraction(1),
            )
            try:
                return measure_baseline(task.code, self.sandbox, placement=placement)
            except BaselineError as e:
                if not self._divided or "out of memory" not in str(e).lower():
                    raise
            # Its share of a divided GPU was too small. The task's evaluations keep every trial's reference
            # output besides: they will not fit a share either, and ask for more. Measured again alone, the
            # baseline held the device for its worker's start and torch.compile's warm-up too (on the H200, ten
            # L1 baselines 5-18 s each, every other evaluation paused): its candidates time eager and compile
            # beside them instead, in their runs with more memory (inductor's cache warm from this attempt), and
            # the first to do so gives the task its baseline.
            self._task_shares.setdefault(task.code, self._more_shares(1))
            self.memory_retried.append(f"baseline {task.id}")
            log.info("task %s: the baseline ran out of its share of GPU memory; its candidates measure it", task.id)
            raise BaselineDeferred("a share of the GPU is too small for the task")

        async def measure() -> TaskBaseline:
            if task.code in self._task_shares:
                raise BaselineDeferred("the task needs more than a share of a GPU")
            # baseline_workers_per_gpu at a time per device (they share its memory), the most urgent first.
            async with lanes.lane(key) as lane:
                # Past a waiting whole-memory request while evaluations holding shares wait for baselines.
                async with memory.share(self._lane_device[lane], baseline=True):
                    return await loop.run_in_executor(self._baseline_pool, measure_on, lane)

        return await self.baselines.get_or_measure(key, measure)

    def stats(self) -> dict[str, Any]:
        return {
            "executor": "local",
            "evaluations": self.evaluations,
            "builds": self.builder.stats.as_dict(),
            "captures": self.evaluator.captures.stats(),
            "prebuilds": self._prebuilds.stats() if self._prebuilds is not None else None,
            "waits_s": self.waits.summary(),
            "baselines": {
                "measured": self.baselines.measured,
                "reused": self.baselines.reused,
                "failed": self.baselines.failed,
                "deferred": self.baselines.deferred,
            },
            "reference_outputs": self.evaluator.reference_cache.stats(),
            "memory_retries": len(self.memory_retried),
            "memory_retried": list(self.memory_retried),
            "memory_waits_s": list(self.memory_waits),
            "shares_per_device": self._shares,
            "large_memory_tasks": len(self._task_shares),
            "slots": self._slots,
            "gates": {d: g.stats() for d, g in self._gates.items()},
            "build_workers": self.build_workers,
            "capture_workers": self.capture_workers,
            "timing_cores": {d: sorted(c) for d, c in self.cores.timing.items()},
            "elapsed_s": round(time.monotonic() - self.started, 3),
        }

    async def close(self) -> None:
        if self.cores.active:
            pin_process(os.getpid(), self._own_cores)
        self._warm.close()
        self._build_pool.shutdown(wait=False, cancel_futures=True)
        self._capture_pool.shutdown(wait=False, cancel_futures=True)
        self._exec_pool.shutdown(wait=False, cancel_futures=True)
        self._baseline_pool.shutdown(wait=False, cancel_futures=True)
