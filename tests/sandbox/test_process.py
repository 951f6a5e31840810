"""The worker process's environment (what a cpu-backend worker's allocator is told), and a worker under a
launcher (as under ncu)."""

import os
import platform
import signal
import subprocess
import sys
import time

import pytest

from rubric_rl.sandbox import Evaluator, Placement, SandboxConfig
from rubric_rl.sandbox.run.process import CPU_MALLOC_TUNABLES, WorkerProcess

# Allocates 20 MB, notes the program break, frees it: does the buffer come from the heap, and does the heap keep it?
_HEAP_PROBE = """
import ctypes
libc = ctypes.CDLL(None)
libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_long]
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
p = libc.malloc(20 << 20)
top = libc.sbrk(0)
libc.free(p)
print(p < top, libc.sbrk(0) == top)
"""


def _probe(config: SandboxConfig) -> str:
    worker = WorkerProcess(config)
    try:
        env = worker._env()
    finally:
        worker.close()
    return subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="GLIBC_TUNABLES is glibc's")
def test_a_cpu_worker_keeps_multi_mb_buffers_in_its_heap(tmp_path):
    # By glibc's adaptive defaults the 20 MB buffer is mapped afresh and unmapped on free, so each timed call's
    # temporaries page-faulted anew in some workers and not in others (eager's median on the bundled example: 0.6
    # or 2.4 ms from one evaluation to the next).
    config = SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"})
    assert _probe(config) == "True True"


def test_only_cpu_workers_get_the_allocator_settings(tmp_path):
    cpu = WorkerProcess(SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"}))
    cuda = WorkerProcess(SandboxConfig(backend="cuda", build={"cache_dir": tmp_path / "build"}))
    try:
        assert cpu._env()["GLIBC_TUNABLES"] == CPU_MALLOC_TUNABLES
        assert "GLIBC_TUNABLES" not in cuda._env()
    finally:
        cpu.close()
        cuda.close()


# Starts torch.compile's worker pool, gets one result back, and lists the threads that are then running.
_POOL_PROBE = """
import operator, threading, time
from torch._inductor.async_compile import AsyncCompile
pool = AsyncCompile.process_pool()
assert pool.submit(operator.add, 2, 3).result() == 5
time.sleep(0.2)
print(sorted(t.name for t in threading.enumerate()))
pool.shutdown()
"""


@pytest.mark.torch_internals
def test_torch_compiles_pool_starts_no_thread_of_its_own_in_a_worker(tmp_path):
    # On an H100 a compile result arrived during the timing rounds of an honest candidate whose worker had
    # compiled its baseline; the pool's idle timer started then, and the integrity check reported a thread left
    # running (status hack).
    worker = WorkerProcess(SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"}))
    try:
        env = worker._env()
    finally:
        worker.close()

    def threads(env: dict[str, str]) -> str:
        run = subprocess.run([sys.executable, "-c", _POOL_PROBE], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        return run.stdout

    assert "subproc_worker_timer" not in threads(env)
    without = {k: v for k, v in env.items() if k != "TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL"}
    assert "subproc_worker_timer" in threads(without)  # the probe sees the thread where it is started


# A launcher that runs the worker as its child and waits for it, as ncu does (env, below, execs it instead).
SHELL_LAUNCHER = ["/bin/sh", "-c", '"$@"; exit $?', "launcher"]


@pytest.fixture(scope="module")
def cpu_config(build_cache) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"trials": 5, "warmup_trials": 1, "compile_baseline": False},
        limits={"run_timeout_s": 120},
    )


def test_a_launched_worker_is_not_asked_where_it_is(cpu_config):
    # SIGUSR1 would reach the launcher (ncu), not the worker, and kill it.
    worker = WorkerProcess(cpu_config, launcher=SHELL_LAUNCHER)
    try:
        worker.start()
        assert worker.proc is not None and worker.proc.args[: len(SHELL_LAUNCHER)] == SHELL_LAUNCHER
        assert worker.proc.args[-1] == "--launched"
        assert worker.where() == ""
        assert worker.alive()
    finally:
        worker.close()


@pytest.mark.slow
def test_a_full_evaluation_runs_through_a_launcher(cpu_config, examples_dir):
    # The pipes' descriptors and --launched pass through a launcher that execs the worker's command line.
    example = examples_dir / "fused_add_relu"
    placement = Placement(worker=WorkerProcess(cpu_config, launcher=["/usr/bin/env"]))
    v = Evaluator(cpu_config).evaluate(
        (example / "reference.py").read_text(), (example / "candidate_correct.py").read_text(), placement=placement
    )
    assert v.status == "correct", v.errors
    assert v.timings is not None and v.timings.candidate is not None and v.timings.candidate.n == 5


@pytest.mark.slow
def test_a_launched_worker_dies_with_its_launcher(cpu_config, examples_dir):
    import psutil

    from rubric_rl.sandbox.run.messages import FROM_WORKER, Ready, Setup, parse_body, send

    example = examples_dir / "fused_add_relu"
    worker = WorkerProcess(cpu_config, launcher=SHELL_LAUNCHER)
    try:
        chan = worker.start()
        assert worker.proc is not None
        setup = Setup(
            config=cpu_config,
            reference=(example / "reference.py").read_text(),
            candidate=(example / "candidate_correct.py").read_text(),
            memory_fraction=1.0,
        )
        send(chan, setup)
        ready = parse_body(chan.recv(deadline=time.monotonic() + 120), FROM_WORKER)
        assert isinstance(ready, Ready)  # the worker is past its start (it waits for "go" before its first trial)
        (child,) = psutil.Process(worker.proc.pid).children()
        assert "rubric_rl.sandbox.run.worker" in child.cmdline()
        os.kill(worker.proc.pid, signal.SIGKILL)  # the launcher alone, as a SIGKILL of the evaluator takes it
        worker.proc.wait(timeout=10)
        gone, _ = psutil.wait_procs([child], timeout=10)
        assert gone or child.status() == psutil.STATUS_ZOMBIE
    finally:
        worker.close()
