"""torch.compile's GPU benchmarks go through the device gate (compile_gate): the routes into Inductor on their
own, then through a real worker and evaluator, for a baseline and for a compile timed beside its candidate."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.run.compile_gate import benchmarks_admitted
from rubric_rl.sandbox.run.device_gate import DeviceGate

benchmarking = pytest.importorskip("torch._inductor.runtime.benchmarking")
HAS_LOCK_HOOK = hasattr(benchmarking, "set_gpu_benchmark_lock_context")
needs_lock_hook = pytest.mark.skipif(not HAS_LOCK_HOOK, reason="this torch has no GPU benchmark lock hook")

# What Inductor does on a GPU while it compiles a reference, made to run on the CPU: a benchmark inside its GPU
# benchmark lock. Outside a compile warm-up the lock is a no-op, so the eager reference runs it for nothing.
BENCHMARKING_PRELUDE = """
from torch._inductor.runtime import benchmarking as _benchmarking


@torch.compiler.disable
def _inductor_like_benchmark():
    with _benchmarking.maybe_gpu_benchmark_lock():
        torch.ones(8).sum()
"""


def _recorder() -> tuple[list[str], object, object]:
    events: list[str] = []
    return events, lambda: events.append("acquire"), lambda: events.append("release")


@needs_lock_hook
def test_the_lock_hook_asks_once_per_benchmark_and_once_for_nested_ones():
    events, acquire, release = _recorder()
    with benchmarks_admitted(acquire, release) as admitted:
        with benchmarking.maybe_gpu_benchmark_lock():
            events.append("bench 1")
            with benchmarking.maybe_gpu_benchmark_lock():  # a helper delegating to benchmark_gpu
                events.append("bench 1, inner")
        with benchmarking.maybe_gpu_benchmark_lock():
            events.append("bench 2")
    assert admitted.route == "lock hook"
    assert admitted.admissions == 2
    assert events == ["acquire", "bench 1", "bench 1, inner", "release", "acquire", "bench 2", "release"]
    with benchmarking.maybe_gpu_benchmark_lock():  # the hook is gone with the block
        events.append("after")
    assert events[-1] == "after" and events.count("acquire") == 2


def test_without_the_hook_the_benchmarkers_gpu_method_is_wrapped_and_restored(monkeypatch):
    bench = benchmarking.benchmarker
    events, acquire, release = _recorder()

    def fake_benchmark_gpu(self, fn, **kwargs):
        events.append("bench")
        if kwargs.get("fail"):
            raise RuntimeError("config failed")
        return 1.0

    monkeypatch.delattr(benchmarking, "set_gpu_benchmark_lock_context", raising=False)
    monkeypatch.setattr(type(bench), "benchmark_gpu", fake_benchmark_gpu)
    with benchmarks_admitted(acquire, release) as admitted:
        assert bench.benchmark_gpu(lambda: None) == 1.0
        with pytest.raises(RuntimeError, match="config failed"):
            bench.benchmark_gpu(lambda: None, fail=True)
    assert admitted.route == "benchmarker wrapper"
    assert admitted.admissions == 2
    assert events == ["acquire", "bench", "release", "acquire", "bench", "release"]  # released on failure too
    assert "benchmark_gpu" not in vars(bench)
    bench.benchmark_gpu(lambda: None)
    assert events[-1] == "bench" and events.count("acquire") == 2


@needs_lock_hook
def test_all_the_configs_of_one_kernel_are_benchmarked_in_one_admission(monkeypatch):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    events, acquire, release = _recorder()

    def benchmark_all_configs(self, *args, **kwargs):  # the autotuner's loop: one benchmark per config
        for config in ("config 1", "config 2", "config 3"):
            with benchmarking.maybe_gpu_benchmark_lock():
                events.append(config)
        return {}

    monkeypatch.setattr(CachingAutotuner, "benchmark_all_configs", benchmark_all_configs)
    with benchmarks_admitted(acquire, release) as admitted:
        CachingAutotuner.benchmark_all_configs(object())
        with benchmarking.maybe_gpu_benchmark_lock():  # a benchmark of its own (the matmul padding decision)
            events.append("pad_mm")
    assert admitted.admissions == 2
    assert events == ["acquire", "config 1", "config 2", "config 3", "release", "acquire", "pad_mm", "release"]
    assert CachingAutotuner.benchmark_all_configs is benchmark_all_configs  # restored


def test_a_torch_with_neither_route_benchmarks_unadmitted(monkeypatch):
    events, acquire, release = _recorder()
    monkeypatch.delattr(benchmarking, "set_gpu_benchmark_lock_context", raising=False)
    monkeypatch.delattr(benchmarking, "benchmarker")
    with benchmarks_admitted(acquire, release) as admitted:
        pass
    assert admitted.route == "none" and admitted.admissions == 0 and events == []


def test_a_torch_without_inductors_benchmarking_module_compiles_unadmitted(monkeypatch):
    import torch._inductor.runtime as runtime

    events, acquire, release = _recorder()
    monkeypatch.delattr(runtime, "benchmarking")
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.benchmarking", None)  # cannot be imported
    with benchmarks_admitted(acquire, release) as admitted:
        events.append("warm-up")
    assert admitted.route == "none" and events == ["warm-up"]


class _WatchedGate(DeviceGate):
    """A gate that tells when someone asks for it shared."""

    def __init__(self) -> None:
        super().__init__()
        self.shared_asked = threading.Event()

    def acquire(self, mode):  # type: ignore[override]
        if mode == "shared":
            self.shared_asked.set()
        return super().acquire(mode)


def _timing_elsewhere(gate: _WatchedGate, hold_s: float) -> threading.Thread:
    """Another evaluation's timing: the device held alone until the warm-up's benchmark has asked for it, then
    ``hold_s`` longer."""
    gate.acquire("exclusive")

    def timing() -> None:
        gate.shared_asked.wait(timeout=60)
        threading.Event().wait(hold_s)
        gate.release("exclusive")

    thread = threading.Thread(target=timing, daemon=True)
    thread.start()
    return thread


def _reference_that_benchmarks(examples_dir: Path) -> str:
    source = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    source = source.replace("import torch.nn as nn\n", "import torch.nn as nn\n" + BENCHMARKING_PRELUDE, 1)
    return source.replace(
        "        return torch.relu(", "        _inductor_like_benchmark()\n        return torch.relu(", 1
    )


@pytest.fixture(scope="module")
def compiling(build_cache: Path) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"trials": 5, "warmup_trials": 1, "compile_baseline": True},
        limits={"run_timeout_s": 240},
    )


@needs_lock_hook
def test_a_baselines_compile_benchmark_waits_for_a_timing_in_progress(compiling, examples_dir):
    from rubric_rl.sandbox import Placement, measure_baseline

    gate = _WatchedGate()
    elsewhere = _timing_elsewhere(gate, hold_s=1.5)
    baseline = measure_baseline(_reference_that_benchmarks(examples_dir), compiling, placement=Placement(gate=gate))
    elsewhere.join(timeout=5)
    assert baseline.compile is not None, baseline
    # A baseline holds the gate shared only for its warm-up's benchmarks: the one benchmark waited for the
    # timing, and the warm-up's own time does not include that wait.
    assert gate.acquired["shared"] == 1
    assert baseline.compile_benchmarks == 1
    assert baseline.phases["compile_gate_wait_s"] >= 1.4, baseline.phases
    assert baseline.compile_warmup_s is not None
    assert baseline.compile_warmup_s < baseline.phases["compile_warmup_s"] + 0.5
    assert baseline.device_wait_s >= 1.4


@needs_lock_hook
def test_a_compile_timed_beside_its_candidate_asks_for_the_device_for_its_benchmark(
    compiling, examples_dir, monkeypatch
):
    from rubric_rl.sandbox import Evaluator, Placement
    from rubric_rl.sandbox.run.protocol import Channel

    events: list[str] = []
    recv = Channel.recv

    def spied_recv(self, *args, **kwargs):
        msg = recv(self, *args, **kwargs)
        events.append(f"message {msg.type}")
        return msg

    class Gate(DeviceGate):
        def acquire(self, mode):  # type: ignore[override]
            waited = super().acquire(mode)
            events.append(f"acquire {mode}")
            return waited

    monkeypatch.setattr(Channel, "recv", spied_recv)
    verdict = Evaluator(compiling).evaluate(
        _reference_that_benchmarks(examples_dir),
        (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text(),
        placement=Placement(gate=Gate()),
    )
    assert verdict.status == "correct", verdict.errors
    assert verdict.timings is not None and verdict.timings.compile is not None
    assert verdict.timings.baseline_source == "measured"
    assert verdict.timings.compile_benchmarks == 1
    # Between the correctness trials and the timing, the compile warm-up held the device only for its benchmark.
    compile_stage = events[events.index("message trials_done") + 1 : events.index("message compiled") + 2]
    assert compile_stage == [
        "message device_wanted",
        "acquire shared",
        "message device_released",
        "message compiled",
        "acquire exclusive",
    ], events
    assert not verdict.findings, verdict.findings
