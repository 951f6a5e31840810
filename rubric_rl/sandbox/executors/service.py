"""The local executor as a shared service: one bounded evaluation service per node, reached by name.

verl runs ``reward.num_workers`` reward-loop actors, each awaiting all of its samples at once. Each starting
an executor of its own would put N sets of workers on one GPU; instead the first one to need it starts the
local executor inside a named Ray actor pinned to its node (``<name>.<node id>``), and every other worker of
the node finds it by name. The actor bounds the evaluations it runs at once (``max_inflight``); more callers
wait their turn. Its lifetime is the run's (``owned``: it ends with the process that started it) or explicit
(``detached``: ``shutdown_service``).

What it protects against: evaluation workers that outlive the service. The actor starts a watchdog process
(a ``python -c`` of this module's ``watch``, importing only psutil) that keeps a list of the actor's descendants and,
once the actor is gone, whatever ended it (a normal shutdown, SIGTERM, SIGKILL, the OOM killer), kills every
process of that list still running. A normal ``shutdown`` closes the executor and kills its descendants itself.
What it does not: a descendant started and orphaned between two of the watchdog's looks (``interval_s``) is
not on its list; the workers' own parent-death signal covers that.

Outside Ray, ``ThreadedExecutor`` runs the same executor on an event loop of its own thread, so callers on any
loop (a notebook's ``asyncio.run`` per cell) can share it.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any

from rubric_rl.sandbox import KernelMetricsReport, NcuOptions, SandboxConfig, Verdict
from rubric_rl.sandbox.executors import Executor, ExecutorConfig, infra_verdict, make_executor
from rubric_rl.tasks import Task

log = logging.getLogger(__name__)


def descendants(pid: int) -> dict[int, float]:
    """pid -> create time of every descendant of ``pid`` (empty when it is gone)."""
    import psutil

    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return {}
    found = {}
    for p in procs:
        try:
            found[p.pid] = p.create_time()
        except psutil.Error:
            continue
    return found


def kill_listed(procs: dict[int, float], grace_s: float = 0.0) -> int:
    """SIGTERM (after ``grace_s``, SIGKILL) each listed process that is still the one listed (same create time,
    so a reused pid is spared). Returns how many were signalled."""
    import psutil

    alive = []
    for pid, created in procs.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - created) < 0.01:
                alive.append(p)
        except psutil.Error:
            continue
    for p in alive:
        try:
            p.terminate() if grace_s > 0 else p.kill()
        except psutil.Error:
            pass
    if grace_s > 0:
        _, rest = psutil.wait_procs(alive, timeout=grace_s)
        for p in rest:
            try:
                p.kill()
            except psutil.Error:
                pass
    return len(alive)


def watch(pid: int, interval_s: float = 0.5) -> None:
    """Until ``pid`` is gone, remember its descendants; then kill those still running (the watchdog's loop)."""
    import psutil

    me = os.getpid()
    known: dict[int, float] = {}
    while True:
        try:
            parent = psutil.Process(pid)
            running = parent.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            running = False
        if not running:
            break
        now = descendants(pid)
        now.pop(me, None)
        known = {p: t for p, t in known.items() if psutil.pid_exists(p)} | now
        time.sleep(interval_s)
    kill_listed(known)


def start_watchdog(pid: int, interval_s: float = 0.5) -> subprocess.Popen[bytes]:
    """A process of its own session that kills ``pid``'s descendants once ``pid`` ends. It runs the source of
    ``descendants``, ``kill_listed`` and ``watch`` alone (importing this package would import torch)."""
    source = "\n".join(
        ["import os, sys, time", *(inspect.getsource(f) for f in (descendants, kill_listed, watch))]
        + ["watch(int(sys.argv[1]), float(sys.argv[2]))"]
    )
    return subprocess.Popen(
        [sys.executable, "-c", source, str(pid), str(interval_s)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


class EvaluationService:
    """The body of the per-node actor: a local executor on its own event-loop thread, bounded, its descendants
    watched. A threaded (not async) actor, so that its constructor runs on the main thread and can take SIGTERM:
    Ray's own handler exits through the interpreter's shutdown, which waits for the executor's threads, so a
    candidate spinning in native code would hold the process for its whole time limit."""

    def __init__(self, sandbox: dict[str, Any], executor: dict[str, Any], max_inflight: int) -> None:
        self.sandbox = SandboxConfig.model_validate(sandbox)
        self.executor_config = ExecutorConfig.model_validate({**executor, "kind": "local"})
        self.executors_created = 0
        self.evaluations = 0
        self.in_flight = 0
        self.clients: set[str] = set()
        self._executor: ThreadedExecutor | None = None
        self._lock = threading.Lock()
        self._gate = threading.BoundedSemaphore(max_inflight)
        self._watchdog = start_watchdog(os.getpid())
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
        else:
            log.warning("evaluation service: not on the main thread, SIGTERM is left to Ray (and the watchdog)")

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        procs = descendants(os.getpid())
        procs.pop(self._watchdog.pid, None)
        kill_listed(procs)
        os._exit(128 + signum)

    def _ready(self) -> ThreadedExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadedExecutor(self.sandbox, self.executor_config)
                self.executors_created += 1
            return self._executor

    def evaluate(self, task: str, program: str, deadline_s: float | None, client: str) -> str:
        executor = self._ready()
        t = Task.model_validate_json(task)
        with self._gate:
            with self._lock:
                self.clients.add(client)
                self.in_flight += 1
            try:
                verdict = executor.evaluate_now(t, program, deadline_s=deadline_s)
            except Exception as e:  # an executor bug must come back as a masked sample, not kill the caller
                log.exception("evaluation service: the executor raised")
                verdict = infra_verdict(t, program, f"evaluation service: {type(e).__name__}: {e}")
            finally:
                with self._lock:
                    self.in_flight -= 1
                    self.evaluations += 1
        return verdict.model_dump_json()

    def kernel_metrics(self, task: str, program: str, options: str, client: str) -> str:
        """Nsight Compute's metrics of the program's kernels (``Executor.kernel_metrics``), as JSON; one of the
        service's bounded calls, like an evaluation."""
        executor = self._ready()
        with self._gate:
            with self._lock:
                self.clients.add(client)
            try:
                report = executor.kernel_metrics_now(
                    Task.model_validate_json(task), program, NcuOptions.model_validate_json(options)
                )
            except Exception as e:  # the caller's profile tool says why there are no metrics, it does not fail
                log.exception("evaluation service: kernel metrics raised")
                report = KernelMetricsReport(error=f"evaluation service: {type(e).__name__}: {e}")
        return report.model_dump_json()

    def stats(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "watchdog_pid": self._watchdog.pid,
            "executors_created": self.executors_created,
            "evaluations": self.evaluations,
            "in_flight": self.in_flight,
            "clients": sorted(self.clients),
            "executor": self._executor.stats() if self._executor is not None else None,
        }

    def shutdown(self) -> int:
        """Close the executor and kill every descendant but the watchdog; returns how many were killed."""
        if self._executor is not None:
            self._executor.close_now()
            self._executor = None
        procs = descendants(os.getpid())
        procs.pop(self._watchdog.pid, None)
        killed = kill_listed(procs, grace_s=2.0)
        self._watchdog.terminate()
        return killed


def service_name(prefix: str, node_id: str) -> str:
    return f"{prefix}.{node_id[:16]}"


class ServiceExecutor(Executor):
    """A client of this node's evaluation service, starting it when it is not running."""

    def __init__(
        self,
        sandbox: SandboxConfig,
        config: ExecutorConfig | None = None,
        *,
        name: str = "rubric_rl.eval",
        namespace: str = "rubric_rl",
        lifetime: str = "owned",
        max_inflight: int = 256,
    ) -> None:
        import ray

        self.ray = ray
        if not ray.is_initialized():
            ray.init(namespace=namespace, log_to_driver=False)
        self.node_id = ray.get_runtime_context().get_node_id()
        self.name = service_name(name, self.node_id)
        self.namespace = namespace
        self._options: dict[str, Any] = {
            "name": self.name,
            "namespace": namespace,
            "get_if_exists": True,
            "lifetime": "detached" if lifetime == "detached" else None,
            "num_cpus": 0,
            "max_concurrency": max_inflight + 16,
            "scheduling_strategy": ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=self.node_id, soft=False
            ),
        }
        self._args = (
            sandbox.model_dump(mode="json"),
            (config or ExecutorConfig()).model_dump(mode="json"),
            max_inflight,
        )
        self.client = f"{os.uname().nodename}:{os.getpid()}"
        self._actor: Any = None

    def actor(self) -> Any:
        """The service's handle, found by name or started."""
        if self._actor is None:
            cls = self.ray.remote(EvaluationService)
            self._actor = cls.options(**self._options).remote(*self._args)
        return self._actor

    async def _evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        actor = self.actor()
        try:
            text = await actor.evaluate.remote(task.model_dump_json(), program, deadline_s, self.client)
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.ActorUnavailableError) as e:
            self._actor = None  # the next call finds or starts a new one
            return infra_verdict(task, program, f"evaluation service {self.name} is gone: {type(e).__name__}")
        return Verdict.model_validate_json(text)

    async def kernel_metrics(self, task: Task, program: str, options: NcuOptions) -> KernelMetricsReport:
        actor = self.actor()
        try:
            text = await actor.kernel_metrics.remote(
                task.model_dump_json(), program, options.model_dump_json(), self.client
            )
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.ActorUnavailableError) as e:
            self._actor = None
            return KernelMetricsReport(error=f"evaluation service {self.name} is gone: {type(e).__name__}")
        return KernelMetricsReport.model_validate_json(text)

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self.ray.get(self.actor().stats.remote())
        return result

    async def close(self) -> None:
        """The service is shared: a client's close leaves it running (``shutdown_service`` ends it)."""


def shutdown_service(name: str, namespace: str = "rubric_rl", node_id: str | None = None) -> bool:
    """End this node's (or ``node_id``'s) evaluation service, reaping its workers; False when none runs."""
    import ray

    full = service_name(name, node_id or ray.get_runtime_context().get_node_id())
    try:
        actor = ray.get_actor(full, namespace=namespace)
    except ValueError:
        return False
    try:
        ray.get(actor.shutdown.remote(), timeout=60)
    except ray.exceptions.RayActorError:
        return False  # it ended meanwhile (its owner did); its watchdog reaps what it left
    finally:
        ray.kill(actor)
    return True


class ThreadedExecutor(Executor):
    """An executor on an event loop of its own thread, usable from any caller's loop; closed at exit."""

    def __init__(self, sandbox: SandboxConfig, config: ExecutorConfig | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rubric-rl-executor", daemon=True)
        self._thread.start()

        async def create() -> Executor:
            return make_executor(sandbox, config or ExecutorConfig())

        self._inner: Executor = self._call(create()).result()
        self.executors_created = 1
        self._closed = False
        atexit.register(self.close_now)

    def _call(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        result: Verdict = await asyncio.wrap_future(
            self._call(self._inner.evaluate(task, program, deadline_s=deadline_s))
        )
        return result

    async def kernel_metrics(self, task: Task, program: str, options: NcuOptions) -> KernelMetricsReport:
        result: KernelMetricsReport = await asyncio.wrap_future(
            self._call(self._inner.kernel_metrics(task, program, options))
        )
        return result

    def kernel_metrics_now(self, task: Task, program: str, options: NcuOptions) -> KernelMetricsReport:
        """``kernel_metrics`` for a caller on no event loop (a thread of the service actor)."""
        result: KernelMetricsReport = self._call(self._inner.kernel_metrics(task, program, options)).result()
        return result

    def evaluate_now(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        """``evaluate`` for a caller on no event loop (a thread of the service actor)."""
        result: Verdict = self._call(self._inner.evaluate(task, program, deadline_s=deadline_s)).result()
        return result

    def stats(self) -> dict[str, Any]:
        return {**self._inner.stats(), "executors_created": self.executors_created}

    def close_now(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._inner.close()).result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close_now)
