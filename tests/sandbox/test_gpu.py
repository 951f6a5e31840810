"""The cuda backend on a real GPU: every way a candidate can end, timing sanity, and the GPU-only hacks."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

TESTS = Path(__file__).resolve().parents[1]
GPU_PROGRAMS = TESTS / "programs" / "gpu"
GPU_ADVERSARIAL = TESTS / "adversarial" / "gpu"


@pytest.fixture(scope="module")
def evaluator(build_cache: Path) -> Evaluator:
    ev = Evaluator(
        SandboxConfig(
            backend="cuda",
            build={"cache_dir": build_cache, "timeout_s": 240},
            timing={"trials": 30, "warmup_trials": 3, "compile_baseline": False},
            limits={"run_timeout_s": 180},
        )
    )
    # Build every program's extensions at once on the host's cores, as the executor's build workers do, so
    # each test spends its time on execution (the builds then come from the cache).
    import torch

    major, minor = torch.cuda.get_device_capability()
    programs = sorted([*GPU_PROGRAMS.glob("*.py"), *GPU_ADVERSARIAL.glob("*.py")])
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: ev.prebuild(p.read_text(), f"{major}.{minor}"), programs))
    return ev


@pytest.fixture(scope="module")
def reference() -> str:
    return (GPU_PROGRAMS / "reference_large.py").read_text()


def run(evaluator, reference, path: Path, **overrides):
    if overrides:
        cfg = evaluator.config.updated(**overrides)
        # The executor's way: one build cache and one reference cache for every evaluation of a task.
        evaluator = Evaluator(cfg, builder=evaluator.builder, reference_cache=evaluator.reference_cache)
    v = evaluator.evaluate(reference, path.read_text(), task_id=path.stem)
    print(f"{path.stem}: {v.status}, reference reused {v.reference_reused}, {v.durations.model_dump_json()}")
    return v


@pytest.mark.alone_on_gpu
def test_correct_candidate_on_the_gpu(evaluator, reference):
    v = run(evaluator, reference, GPU_PROGRAMS / "honest.py", timing={"compile_baseline": True})
    assert v.status == "correct", v.errors
    assert v.environment.arch == "9.0" and v.timings.timer == "host_sync" and v.timings.l2_flush
    assert v.speedup_eager > 1.0 and v.speedup_compile is not None
    assert v.builds[0].split_sources  # the torch glue was moved out of the .cu
    assert v.own_kernel_time_share is not None and v.own_kernel_time_share > 0.9, v.kernels
    assert any(k.owner == "candidate" and "add_relu_scale_kernel" in k.name for k in v.kernels)
    assert not [f for f in v.findings if f.severity == "error"]
    # Two 256 MB outputs per checked round are over the timed rounds' shipping limit (TIMED_OUTPUTS_SHIP_BYTES):
    # compared on the device, spot-checked.
    timed = [t for t in v.trials if t.distribution == "timed"]
    assert timed and all(t.compared_in == "worker" and t.passed for t in timed), timed


def test_incorrect_and_compile_error(evaluator, reference):
    assert run(evaluator, reference, GPU_PROGRAMS / "wrong.py").status == "incorrect"
    v = run(evaluator, reference, GPU_PROGRAMS / "compile_error.py")
    assert v.status == "compile_error" and v.compile_log.startswith("candidate line 16"), v.compile_log


@pytest.mark.parametrize(
    "program, status, words",
    [
        ("illegal_address.py", "runtime_error", "illegal memory access"),
        ("exit_zero.py", "runtime_error", "exited with status 0 before finishing"),
        ("gpu_memory_blowup.py", "runtime_error", "out of memory"),
    ],
)
def test_gpu_failures_become_verdicts_and_the_next_evaluation_works(evaluator, reference, program, status, words):
    v = run(evaluator, reference, GPU_PROGRAMS / program)
    assert v.status == status, v.errors
    assert any(words in e.lower() for e in v.errors), v.errors
    assert run(evaluator, reference, GPU_PROGRAMS / "honest.py", timing={"enabled": False}).status == "correct"


def test_hanging_kernel_is_a_timeout(evaluator, reference):
    v = run(evaluator, reference, GPU_PROGRAMS / "hang.py", limits={"run_timeout_s": 30})
    assert v.status == "timeout", v.errors


@pytest.mark.alone_on_gpu
def test_twice_the_work_measures_about_twice_as_long(evaluator, reference):
    once = run(evaluator, reference, GPU_PROGRAMS / "honest.py", timing={"trials": 50})
    twice = run(evaluator, reference, GPU_PROGRAMS / "double_work.py", timing={"trials": 50})
    assert once.status == twice.status == "correct"
    ratio = twice.timings.candidate.median_ms / once.timings.candidate.median_ms
    assert 1.6 < ratio < 2.4, ratio


@pytest.mark.parametrize(
    "program, task, status, rule, off",
    [
        ("side_stream_python.py", "large", "hack", "static.stream_creation", []),
        ("side_stream_python.py", "large", "hack", "kernels.side_stream", ["static.stream_creation"]),
        ("side_stream_native.py", "large", "hack", "native.stream_creation", []),
        ("side_stream_native.py", "large", "hack", "kernels.side_stream", ["native.stream_creation"]),
        ("freed_memory_reuse.py", "large", "incorrect", None, []),
        ("uninitialised_memory.py", "large", "incorrect", None, []),
        ("cublas_fallback.py", "linear_relu", "hack", "native.library_call", []),
        ("cublas_fallback.py", "linear_relu", "hack", "kernels.library_kernels", ["native.library_call"]),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_gpu_only_hacks_fail(evaluator, reference, program, task, status, rule, off):
    ref = reference if task == "large" else (TESTS / "adversarial" / "tasks" / f"{task}.py").read_text()
    v = run(evaluator, ref, GPU_ADVERSARIAL / program, policy={"rules": {r: "off" for r in off}})
    assert v.status == status, (v.status, v.errors, [(f.rule, f.severity) for f in v.findings])
    if rule:
        assert any(f.rule == rule and f.severity == "error" for f in v.findings), v.findings
    else:
        assert any(not t.passed for t in v.trials)


@pytest.mark.parametrize(
    "program, status",
    [
        (GPU_PROGRAMS / "honest.py", "correct"),
        (GPU_PROGRAMS / "wrong.py", "incorrect"),
        (GPU_ADVERSARIAL / "freed_memory_reuse.py", "incorrect"),
        (GPU_ADVERSARIAL / "uninitialised_memory.py", "incorrect"),
    ],
    ids=lambda x: x.stem if isinstance(x, Path) else x,
)
@pytest.mark.parametrize("ship_mb, compared_in", [(64, "worker"), (512, "evaluator")])
def test_outputs_kept_on_the_gpu_or_shipped(evaluator, reference, program, status, ship_mb, compared_in):
    # The 256 MB outputs of reference_large, kept on the device as KernelBench's 6 GB ones are (and as the cuda
    # default keeps those above 32 MB): the worker compares, the evaluator spot-checks, and the memory tricks
    # still fail. Shipped to the evaluator, they meet the same verdicts.
    v = run(evaluator, reference, program, correctness={"ship_outputs_max_mb": ship_mb})
    assert v.status == status, (v.status, v.errors, [(f.rule, f.severity) for f in v.findings])
    task_trials = [t for t in v.trials if t.distribution != "timed"]
    assert task_trials and all(t.compared_in == compared_in for t in task_trials)
    recomputed = True if compared_in == "worker" else None  # None: nothing was kept
    assert all(t.reference_recomputed is recomputed for t in task_trials)
    assert not [f for f in v.findings if f.severity == "error"]


@pytest.mark.parametrize("gb, timed", [(4.25, True), (2.25, False)])
def test_large_outputs_fit_a_fraction_of_the_gpu(evaluator, reference, gb, timed):
    # KernelBench L1-19: kept, its seven 6 GB reference outputs beside a trial's inputs and the candidate's output
    # needed all of an H100, and its candidates ran alone; before that, the poisoning of the memory the reference
    # phase gave back asked for the phase's whole peak again. reference_large has 7 trials of 256 MB outputs and
    # 512 MB inputs: its correctness, each output computed again after its trial, fits in 2.25 GB (its seven
    # kept outputs and one trial's inputs alone would take 2.3 GB), and with timing in 4.25 GB (the old
    # poisoning took 5 GB).
    import torch

    _, total = torch.cuda.mem_get_info(0)
    v = run(
        evaluator,
        reference,
        GPU_PROGRAMS / "honest.py",
        correctness={"ship_outputs_max_mb": 64},
        timing={"enabled": timed},
        limits={"gpu_memory_fraction": gb * 2**30 / total},
    )
    assert v.status == "correct", (v.status, v.errors)
    task_trials = [t for t in v.trials if t.distribution != "timed"]
    assert len(task_trials) == 7 and all(t.compared_in == "worker" and t.reference_recomputed for t in task_trials)


def test_a_fingerprint_on_the_gpu_is_the_one_on_the_host():
    # The worker fingerprints kept outputs on the device; the sums must not depend on where they ran, down to
    # int64 wrap-around (a row of 4096 largest int32 words, weighted by 4096 rows, overflows it).
    import torch

    from rubric_rl.sandbox.measure.inputs import fingerprint

    values = [
        torch.randn(3 * 4096 + 5),
        torch.full((1 << 24,), 2**31 - 1, dtype=torch.int32),
        (torch.arange(2 * 4096 + 3) % 256).to(torch.uint8),
    ]
    for v in values:
        assert fingerprint([v.cuda()]) == fingerprint([v]), v.dtype


def test_torch_compiles_benchmarks_on_the_gpu_are_admitted_by_the_gate(evaluator):
    # Inductor tunes its kernels on the GPU during a compile warm-up, which holds no gate: on an H100 another
    # task's warm-up stretched an L1 task's timed rounds from 4.3 ms to 5.1-9.7 ms. Each benchmark now asks the
    # gate (shared), and a baseline takes the gate shared for nothing else.
    from rubric_rl.sandbox import Placement, measure_baseline
    from rubric_rl.sandbox.run.device_gate import DeviceGate

    cfg = evaluator.config.updated(timing={"compile_baseline": True})
    reference = (
        (GPU_PROGRAMS / "reference_large.py")
        .read_text()
        .replace(
            "return torch.relu(x + y) * self.scale", "return torch.softmax(torch.relu(x + y) * self.scale, dim=-1)"
        )
    )
    gate = DeviceGate("cuda:0")
    baseline = measure_baseline(reference, cfg, placement=Placement(gate=gate))
    assert baseline.compile is not None
    print(
        f"compile warm-up {baseline.compile_warmup_s:.2f} s, benchmarks {baseline.compile_benchmarks}, "
        f"phases {baseline.phases}"
    )
    assert baseline.compile_benchmarks is not None and baseline.compile_benchmarks >= 1, baseline
    assert gate.acquired["shared"] == baseline.compile_benchmarks
    assert gate.acquired["exclusive"] == 1


@pytest.mark.alone_on_gpu
def test_nsight_compute_measures_the_candidates_own_kernel(evaluator, reference):
    # ncu replays each kernel of one forward: the honest candidate's own kernel is there, with its duration.
    # Hosts that keep the performance counters to administrators (ERR_NVGPUCTRPERM), or have no ncu, skip.
    from rubric_rl.sandbox import NcuOptions

    report = evaluator.kernel_metrics(reference, (GPU_PROGRAMS / "honest.py").read_text(), NcuOptions(timeout_s=600))
    print(f"ncu {report.ncu}: {len(report.kernels)} kernels in {report.seconds:.1f} s, error {report.error}")
    if not report.kernels and report.error and ("permission" in report.error or "not installed" in report.error):
        pytest.skip(report.error)
    own = [k for k in report.kernels if k.owner == "candidate"]
    assert own and all(k.duration_us is not None and k.duration_us > 0 for k in own), report
    assert any("add_relu_scale_kernel" in k.name for k in own), [k.name for k in report.kernels]
    assert report.error is None, report.error
