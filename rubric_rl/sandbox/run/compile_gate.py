"""torch.compile's own GPU benchmarks, admitted by the device gate like any other device work.

A compile warm-up holds no gate: it is mostly code generation on the CPU (seconds; up to 42 s for one
KernelBench Level 3 baseline on an H100), and holding the device through it would stop every timing meanwhile. But
Inductor, in its default mode, also benchmarks on the GPU while it compiles and on a kernel's first launch:
every config of a Triton kernel that has several (tens of milliseconds of runs each, after a cache flush) and
both layouts of a matmul it might pad. Run beside another evaluation's timed rounds, those benchmarks
time-slice with them: on an H100, KernelBench L1-21's rounds went from 4.3 ms to 5.1-9.7 ms for 72 of its 100
rounds while another task's baseline was being measured, and none were stretched in the passes without
compiles. So during a warm-up each benchmark asks for the device (a shared hold, which waits for a timing in
progress and lets the next one go first) and gives it back at once.

Two routes into Inductor, by torch version: the process-wide GPU benchmark lock hook
(``set_gpu_benchmark_lock_context``, which covers every GPU benchmark path), and, on a torch without it, a
wrapper around the ``benchmark_gpu`` method of Inductor's benchmarker, which every Triton config benchmark and
the matmul padding decision call. Either way, all the configs of one kernel are benchmarked in one admission
(its autotuner's ``benchmark_all_configs`` holds it), so a warm-up waits behind a timing once per kernel it
tunes, not once per config.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass
class AdmittedBenchmarks:
    """What the warm-up's benchmarks did: how they were routed, and how many times the device was asked for."""

    route: str  # "lock hook", "benchmarker wrapper" or "none" (this torch offers neither)
    admissions: int = 0


@contextlib.contextmanager
def benchmarks_admitted(acquire: Callable[[], None], release: Callable[[], None]) -> Iterator[AdmittedBenchmarks]:
    """Inside the block, every Inductor GPU benchmark of this process runs between ``acquire()`` and
    ``release()``. Nested benchmarks (one benchmark helper delegating to another) ask once; benchmarks from
    several threads take turns."""
    admitted = AdmittedBenchmarks(route="none")
    try:
        from torch._inductor.runtime import benchmarking
    except ImportError:  # a torch without Inductor's benchmarking module: nothing to route (and no reason to fail)
        yield admitted
        return

    turn = threading.RLock()
    depth = 0

    @contextlib.contextmanager
    def device() -> Iterator[None]:
        nonlocal depth
        with turn:
            if depth == 0:
                acquire()
                admitted.admissions += 1
            depth += 1
            try:
                yield
            finally:
                depth -= 1
                if depth == 0:
                    release()

    with _one_admission_per_kernel(device):
        set_hook = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
        if set_hook is not None:
            admitted.route = "lock hook"
            previous = set_hook(device)
            try:
                yield admitted
            finally:
                set_hook(previous)
            return
        with _benchmarker_wrapped(benchmarking, device, admitted):
            yield admitted


@contextlib.contextmanager
def _benchmarker_wrapped(
    benchmarking: object, device: Callable[[], contextlib.AbstractContextManager[None]], admitted: AdmittedBenchmarks
) -> Iterator[None]:
    """The route for a torch without the lock hook: Inductor's benchmarker's ``benchmark_gpu``, wrapped."""

    bench = getattr(benchmarking, "benchmarker", None)
    method = getattr(bench, "benchmark_gpu", None)
    if bench is None or method is None:
        yield
        return

    def benchmark_gpu(*args: object, **kwargs: object) -> object:
        with device():
            return method(*args, **kwargs)

    admitted.route = "benchmarker wrapper"
    had_own = "benchmark_gpu" in vars(bench)
    bench.benchmark_gpu = benchmark_gpu  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if had_own:
            bench.benchmark_gpu = method  # type: ignore[attr-defined]
        else:
            del bench.benchmark_gpu  # type: ignore[attr-defined]


@contextlib.contextmanager
def _one_admission_per_kernel(device: Callable[[], contextlib.AbstractContextManager[None]]) -> Iterator[None]:
    """Inductor's autotuner benchmarks a kernel's configs one by one: the whole loop in one admission."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:  # an inductor without Triton support (a CPU-only torch may lack triton)
        yield
        return
    original = CachingAutotuner.__dict__.get("benchmark_all_configs")
    if original is None:
        yield
        return

    def benchmark_all_configs(self: object, *args: object, **kwargs: object) -> object:
        with device():
            return original(self, *args, **kwargs)

    CachingAutotuner.benchmark_all_configs = benchmark_all_configs  # type: ignore[method-assign]
    try:
        yield
    finally:
        CachingAutotuner.benchmark_all_configs = original  # type: ignore[method-assign]
