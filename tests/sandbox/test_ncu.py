"""Nsight Compute's side of a kernel-metrics run, without ncu or a GPU: its options, its command line, reading its
CSV log and its complaints; and the evaluator's answers where ncu cannot run."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import ValidationError

from rubric_rl.sandbox import Evaluator, NcuOptions, Placement, SandboxConfig
from rubric_rl.sandbox.measure import kernel_metrics
from rubric_rl.sandbox.measure.ncu import DEFAULT_METRICS, ncu_command, ncu_error, parse_ncu_log

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)
OWN = "add_relu_kernel(const float *, const float *, float *, long)"
ATEN = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char *, 1>>(int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)"
)


def row(launch: int, kernel: str, block: str, grid: str, metric: str, unit: str, value: str) -> str:
    fields = [str(launch), "4242", "python3", "127.0.0.1", kernel, "1", "7", block, grid, "0", "9.0"]
    fields += ["Command line profiler metrics", metric, unit, value]
    return ",".join(f'"{f}"' for f in fields)


LOG = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
        '==PROF== Profiling "add_relu_kernel" - 0: 0%....50%....100% - 9 passes',
        '==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 9 passes',
        "==PROF== Disconnected from process 4242",
        HEADER,
        row(0, OWN, "(256, 1, 1)", "(4096, 1, 1)", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "88.51"),
        row(0, OWN, "(256, 1, 1)", "(4096, 1, 1)", "gpu__time_duration.sum", "nsecond", "12,345"),
        row(0, OWN, "(256, 1, 1)", "(4096, 1, 1)", "launch__registers_per_thread", "register/thread", "16"),
        row(0, OWN, "(256, 1, 1)", "(4096, 1, 1)", "l1tex__t_sector_hit_rate.pct", "%", "n/a"),
        row(0, OWN, "(256, 1, 1)", "(4096, 1, 1)", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "21.7"),
        row(1, ATEN, "(128, 1, 1)", "(1,024, 1, 1)", "gpu__time_duration.sum", "usecond", "3.5"),
        row(1, ATEN, "(128, 1, 1)", "(1,024, 1, 1)", "lts__t_sector_hit_rate.pct", "%", "1,024.5"),
        row(1, ATEN, "(128, 1, 1)", "(1,024, 1, 1)", "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "0"),
    ]
)


def test_a_log_is_read_launch_by_launch_with_exact_values():
    kernels = parse_ncu_log(LOG, {"add_relu_kernel"})
    assert [k.owner for k in kernels] == ["candidate", "torch"]
    own, aten = kernels
    assert own.name == OWN and own.block == "(256, 1, 1)" and own.grid == "(4096, 1, 1)"
    assert own.duration_us == pytest.approx(12.345)
    assert own.metrics == {
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 88.51,
        "launch__registers_per_thread": 16.0,
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": 21.7,
    }  # "n/a" left out, the duration apart
    assert aten.name == ATEN and aten.grid == "(1,024, 1, 1)"
    assert aten.duration_us == pytest.approx(3.5)
    assert aten.metrics == {
        "lts__t_sector_hit_rate.pct": 1024.5,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 0.0,
    }


def test_launches_come_in_id_order_and_columns_are_found_by_name():
    # Columns in another order (and one more), launches out of order: the same kernels.
    fields = ["Metric Value", "Kernel Name", "ID", "Grid Size", "Block Size", "Metric Unit", "Metric Name", "Extra"]
    header = '"ID","Process ID","Process Name","Host Name","Kernel Name",' + ",".join(f'"{f}"' for f in fields)
    lines = [
        header,
        '"5","9","p","h","k_b","7,000","k_b","1","(2, 1, 1)","(32, 1, 1)","msecond","gpu__time_duration.sum","x"',
        '"2","9","p","h","k_a","3","k_a","0","(1, 1, 1)","(64, 1, 1)","second","gpu__time_duration.sum","x"',
        "==WARNING== a line ncu wrote after the table",
    ]
    kernels = parse_ncu_log("\n".join(lines), set())
    assert [(k.name, k.duration_us) for k in kernels] == [("k_a", 3e6), ("k_b", 7e6)]


def test_a_log_without_the_header_has_no_kernels():
    assert parse_ncu_log("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n", set()) == []
    assert parse_ncu_log("", set()) == []
    assert parse_ncu_log(LOG.replace('"Metric Value"', '"Value"'), set()) == []


def test_a_long_kernel_name_is_cut():
    name = "k" * 1000
    log = HEADER + "\n" + row(0, name, "(1, 1, 1)", "(1, 1, 1)", "gpu__time_duration.sum", "nsecond", "1")
    assert len(parse_ncu_log(log, set())[0].name) == 300


PERMISSION_LOG = """==PROF== Connected to process 4242 (/usr/bin/python3.11)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the \
target device 0. For instructions on enabling permissions and to get more information see \
https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 4242
==WARNING== No kernels were profiled.
"""


@pytest.mark.parametrize(
    "log, words",
    [
        (PERMISSION_LOG, "no permission to read the GPU's performance counters"),
        ("==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n", "profiled no kernel"),
        (
            '==ERROR== Failed to profile "k" in process 7\n==ERROR== Failed to profile "k" in process 7\n',
            'ncu reported an error: Failed to profile "k" in process 7',
        ),
    ],
)
def test_ncus_complaints_become_one_sentence(log, words):
    error = ncu_error(log)
    assert error is not None and words in error
    assert "http" not in error and error.count("Failed to profile") <= 1


def test_a_clean_log_has_no_error():
    assert ncu_error(LOG) is None


def test_the_command_profiles_the_range_only_and_leaves_the_clocks_alone(tmp_path):
    options = NcuOptions(max_kernels=7, metrics=["gpu__time_duration.sum", "lts__t_sector_hit_rate.pct"])
    command = ncu_command("/opt/ncu", options, tmp_path / "ncu.csv")
    assert command == [
        "/opt/ncu",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--target-processes",
        "application-only",
        "--csv",
        "--print-units",
        "base",
        "--launch-count",
        "7",
        "--metrics",
        "gpu__time_duration.sum,lts__t_sector_hit_rate.pct",
        "--log-file",
        str(tmp_path / "ncu.csv"),
    ]
    assert NcuOptions().metrics == DEFAULT_METRICS and NcuOptions().metrics is not DEFAULT_METRICS


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("metrics", ["sm__throughput.avg", "dram bytes"], "'dram bytes': only letters"),
        ("metrics", ["a;rm -rf x"], "only letters, digits"),
        ("metrics", ["--export=x"], "only letters, digits"),
        ("metrics", [], "at least 1"),
        ("max_kernels", 0, "greater than or equal to 1"),
        ("timeout_s", 0, "greater than 0"),
        ("sections", ["SpeedOfLight"], "Extra inputs"),
    ],
)
def test_options_refuse_what_must_not_reach_the_command_line(field, value, words):
    with pytest.raises(ValidationError, match=words):
        NcuOptions.model_validate({field: value})


def no_worker(*args, **kwargs):
    raise AssertionError("no worker may start")


def test_the_cpu_backend_has_no_kernels_to_measure(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_metrics, "WorkerProcess", no_worker)
    evaluator = Evaluator(SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"}))
    report = evaluator.kernel_metrics("reference", "candidate")
    assert report.kernels == [] and report.ncu is None
    assert report.error == "Nsight Compute measures GPU kernels: the cpu backend has none"


def test_without_ncu_the_report_says_it_is_not_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_metrics, "WorkerProcess", no_worker)
    evaluator = Evaluator(SandboxConfig(backend="cuda", build={"cache_dir": tmp_path / "build"}))
    report = evaluator.kernel_metrics("reference", "candidate", NcuOptions(executable="/nonexistent/ncu"))
    assert report.kernels == [] and report.error == "ncu is not installed on the evaluation host"


def test_a_program_that_does_not_parse_is_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_metrics, "WorkerProcess", no_worker)
    fake_ncu = tmp_path / "ncu"
    fake_ncu.write_text("#!/bin/sh\nexit 1\n")
    fake_ncu.chmod(0o755)
    evaluator = Evaluator(SandboxConfig(backend="cuda", build={"cache_dir": tmp_path / "build"}))
    report = evaluator.kernel_metrics("reference", "class ModelNew(:\n", NcuOptions(executable=str(fake_ncu)))
    assert report.error is not None and report.error.startswith("the program does not parse (candidate line 1")
    assert report.ncu == str(fake_ncu)


@pytest.mark.slow
def test_the_ncu_conversation_runs_one_trial_then_one_profiled_forward(build_cache, examples_dir):
    # The whole protocol of a run under ncu, on the cpu backend with a launcher that execs the worker: one trial,
    # then "profile" (for a program that passed or not), the worker's warm-up forward and its profiled range.
    # Without CUDA, cudaProfilerStart fails inside the range: a runtime failure of the run, with its digest.
    import torch

    from rubric_rl.sandbox.run.conversation import Conversation
    from rubric_rl.sandbox.run.process import WorkerProcess
    from rubric_rl.sandbox.run.state import RunState

    example = examples_dir / "fused_add_relu"
    cfg = SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"enabled": False},
        correctness={"trials": 1, "extra_distributions": [], "reference_cache_mb": 0},
        limits={"run_timeout_s": 120},
    )
    evaluator = Evaluator(cfg)
    for candidate, passed in (("candidate_correct.py", True), ("candidate_wrong.py", False)):
        run = RunState(config=cfg, candidate=(example / candidate).read_text(), ncu=True)
        worker = WorkerProcess(cfg, launcher=["/usr/bin/env"])
        with ThreadPoolExecutor(1) as compare:
            conversation = Conversation(run, Placement(), evaluator.builder, evaluator.reference_cache, compare)
            conversation.converse((example / "reference.py").read_text(), worker)
            run.compared()
        assert [(t.distribution, t.passed) for t in run.trials] == [("task", passed)]
        assert run.stage == "profile" and run.timings is None and not run.timed_out and run.infra_error is None
        if torch.version.cuda is None:
            assert run.runtime_failed
            assert run.errors == ["profile: AssertionError: Torch not compiled with CUDA enabled"]
        else:  # a CUDA build of torch: the range may open (a GPU) or not (none visible), the worker ends either way
            assert run.errors == [] or (run.errors[0].startswith("profile: ") and "worker" not in run.errors[0])


def test_executors_answer_at_once_where_ncu_cannot_run(tmp_path):
    # The local executor (directly and behind the threaded one) does not queue for a GPU it cannot use: the cpu
    # backend, or no ncu. An executor without Nsight Compute says so.
    import asyncio

    from rubric_rl.sandbox.executors import Executor, ExecutorConfig, make_executor
    from rubric_rl.sandbox.executors.service import ThreadedExecutor
    from rubric_rl.tasks import Task

    task = Task(id="t", problem_id=0, name="t", origin="examples", code="reference")
    config = ExecutorConfig(spare_workers=0, reuse_baselines=False, prebuild=False)
    cpu = SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"})
    cuda = SandboxConfig(backend="cuda", build={"cache_dir": tmp_path / "build"})
    missing = NcuOptions(executable="/nonexistent/ncu")

    async def answers() -> list[str | None]:
        found = []
        for sandbox in (cpu, cuda):
            async with make_executor(sandbox, config) as executor:
                found.append((await executor.kernel_metrics(task, "program", missing)).error)
        threaded = ThreadedExecutor(cpu, config)
        try:
            found.append((await threaded.kernel_metrics(task, "program", missing)).error)
        finally:
            await threaded.close()
        found.append((await Executor.kernel_metrics(threaded, task, "program", missing)).error)  # the default
        return found

    assert asyncio.run(answers()) == [
        "Nsight Compute measures GPU kernels: the cpu backend has none",
        "ncu is not installed on the evaluation host",
        "Nsight Compute measures GPU kernels: the cpu backend has none",
        "this executor does not run Nsight Compute (use the local executor)",
    ]
