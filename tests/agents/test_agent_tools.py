"""The tools over the sandbox, without verl: errors are tool errors, outputs are bounded, calls are recorded,
and the whole path (broken program, compiler error, fix, check, benchmark, profile) on the cpu backend."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import pytest

from rubric_rl.agents import (
    TOOLS,
    AgentConfigError,
    SandboxTools,
    ToolsConfig,
    ToolSession,
    WriteProgram,
    tool_schemas,
)
from rubric_rl.agents.backend import SEED_SPAN, field_path, tool_seed
from rubric_rl.agents.render import bound_text, profile_text, scrub_paths
from rubric_rl.sandbox import KernelMetrics, KernelMetricsReport, SandboxConfig, Verdict
from rubric_rl.sandbox.verdict import KernelLaunch
from rubric_rl.skills.feedback import FeedbackConfig
from rubric_rl.tasks import Task


def words(text: str) -> int:
    return len(text.split())


def test_misuse_is_a_tool_error_never_an_exception(task: Task, sandbox_tools: SandboxTools) -> None:
    async def body() -> None:
        s = ToolSession(task, sandbox_tools, ToolsConfig(backend="cpu", max_program_chars=1000))
        cases = [
            ("frobnicate", "{}", "unknown_tool", "No tool named 'frobnicate'"),
            ("check", "{not json", "bad_arguments", "not valid JSON"),
            ("check", "[1, 2]", "bad_arguments", "must be a JSON object"),
            ("check", {"verbose": True}, "bad_arguments", "unexpected argument 'verbose'"),
            ("write_program", {}, "bad_arguments", "missing required argument 'program'"),
            ("write_program", {"program": 7}, "bad_arguments", "program"),
            ("write_program", {"program": "   "}, "bad_arguments", "empty"),
            ("check", None, "no_program", "call write_program first"),
            ("benchmark", "", "no_program", "call write_program first"),
            ("write_program", {"program": "x" * 5000}, "too_long", "5000 characters; the limit is 1000"),
        ]
        results = []
        for name, arguments, kind, message in cases:
            result = await s.call(name, arguments)
            results.append(result)
            assert not result.ok and result.error == kind, (name, arguments, result)
            assert result.text.startswith(f"Error ({kind}):") and message in result.text
        assert s.program is None and s.version == 0
        assert [r.error for r in s.records] == [c[2] for c in cases]
        for record, result in zip(s.records, results, strict=True):
            assert record.latency_s >= 0 and record.output_chars == len(result.text)

    asyncio.run(body())


def test_submit_ends_the_session_and_says_what_is_scored(task: Task, sandbox_tools: SandboxTools) -> None:
    async def body() -> None:
        s = ToolSession(task, sandbox_tools, ToolsConfig(backend="cpu"))
        assert s.final_program("last_written") == (None, "none")
        assert (await s.submit()).error == "no_program"
        first = await s.call("write_program", {"program": "print('v1')"})
        assert first.ok and first.program_version == 1 and "version 1" in first.text
        await s.write_program(WriteProgram(program="print('v2')"))
        assert s.final_program("last_written") == ("print('v2')", "last_written")
        assert s.final_program("fail") == (None, "none")
        done = await s.call("submit", "{}")
        assert done.ok and done.program_version == 2 and s.submitted
        assert s.final_program("fail") == ("print('v2')", "submitted")
        after = await s.call("write_program", {"program": "print('v3')"})
        assert after.error == "submitted" and s.program == "print('v2')"
        record = s.records[1]
        assert record.name == "write_program" and record.arguments == {"program": "print('v1')"}

    asyncio.run(body())


def test_outputs_are_bounded_in_characters_and_tokens() -> None:
    text = "\n".join(f"line {i}: " + "word " * 20 for i in range(500))
    cut = bound_text(text, 1000)
    assert len(cut) <= 1000 and cut.endswith(f"{len(text)} characters in all)")
    cut = bound_text(text, 100_000, max_tokens=50, count=words)
    assert words(cut) <= 50 and "cut to its limit" in cut
    one_line = bound_text("x" * 10_000, 300)
    assert len(one_line) <= 300
    assert bound_text("short", 300) == "short"


def test_paths_never_reach_the_model() -> None:
    text = "/root/.cache/rubric-rl/build/ab12cd/main.cpp:17: error: x; see /tmp/w0/ref.py and ./local.py"
    assert scrub_paths(text) == "main.cpp:17: error: x; see ref.py and ./local.py"


def test_schemas_cover_every_tool_and_verl_reads_them() -> None:
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOLS)
    for s in schemas:
        assert s["type"] == "function" and len(s["function"]["description"]) > 40
        assert s["function"]["parameters"]["type"] == "object"
        assert "title" not in str(s)
    write = schemas[0]["function"]["parameters"]
    assert write["required"] == ["program"] and write["properties"]["program"]["type"] == "string"
    assert write["additionalProperties"] is False
    with pytest.raises(ValueError, match="unknown tools"):
        tool_schemas(["nope"])
    verl_schemas = pytest.importorskip("verl.tools.schemas")
    for s in schemas:
        verl_schemas.OpenAIFunctionToolSchema.model_validate(s)


def test_tool_seed_keeps_away_from_the_final_seed() -> None:
    assert field_path(SandboxConfig, "seed")[-1] == "seed"
    assert tool_seed(42) - 42 >= SEED_SPAN
    assert tool_seed(42, 10**7) == 10**7
    with pytest.raises(AgentConfigError, match="tools.seed: 50 is within"):
        tool_seed(42, 50)


@pytest.mark.slow
def test_compiler_flood_is_digested_and_bounded(task: Task, sandbox_tools: SandboxTools, programs) -> None:
    async def body() -> None:
        config = ToolsConfig(backend="cpu", max_output_chars=300, max_output_tokens=40)
        s = ToolSession(task, sandbox_tools, config, count_tokens=words)
        flood = programs["broken"].replace(
            "const int64_t n = xc.numel();", "const int64_t n = xc.numel();\n" + "undeclared_name();\n" * 400
        )
        await s.write_program(WriteProgram(program=flood))
        result = await s.compile()
        assert result.ok and result.status == "compile_error"
        assert len(result.text) <= 300 and words(result.text) <= 40
        assert s.records[-1].output_tokens == words(result.text)

    asyncio.run(body())


@pytest.mark.slow
def test_broken_fixed_checked_benchmarked_profiled(task: Task, sandbox_tools: SandboxTools, programs) -> None:
    async def body() -> None:
        s = ToolSession(task, sandbox_tools, ToolsConfig(backend="cpu"))
        await s.write_program(WriteProgram(program=programs["broken"]))
        broken = await s.compile()
        assert broken.ok and broken.status == "compile_error"
        assert re.search(r"candidate line 17: error: expected .,. or .;. before .const.", broken.text), broken.text
        assert "/" not in broken.text.replace("</", "")  # no evaluator paths
        await s.write_program(WriteProgram(program=programs["correct"]))
        assert (await s.compile()).status == "compiled"
        check = await s.check()
        assert check.ok and check.status == "correct" and "trials passed" in check.text
        assert "Performance" not in check.text  # check shows correctness only
        assert check.verdict is not None
        assert min(t.seed for t in check.verdict.trials) >= sandbox_tools.seed  # the tools' own inputs
        bench = await s.benchmark()
        assert bench.ok and "PyTorch eager" in bench.text and "torch.compile" in bench.text and "speedup" in bench.text
        profile = await s.profile()
        assert "Kernel profile: unavailable on the cpu backend" in profile.text
        assert "Nsight Compute metrics: unavailable on the cpu backend" in profile.text
        latency = {r.name: r.latency_s for r in s.records}
        assert latency["benchmark"] < 1.0 and latency["profile"] < 1.0  # one evaluation per version, shared
        assert [r.program_version for r in s.records] == [1, 1, 2, 2, 2, 2, 2]

    asyncio.run(body())


def test_check_after_compile_finds_the_program_built(task: Task, sandbox_tools: SandboxTools, programs) -> None:
    """compile builds what the evaluation needs (the cpu backend links): the check that follows builds nothing."""
    unique = f"// this test's own build: {uuid.uuid4()}\n"  # a program no other test has built into the cache
    include = "#include <torch/extension.h>\n"
    program = programs["correct"].replace(include, include + unique, 1)

    async def body() -> None:
        s = ToolSession(task, sandbox_tools, ToolsConfig(backend="cpu"))
        await s.write_program(WriteProgram(program=program))
        assert (await s.compile()).status == "compiled"
        entries = Path(sandbox_tools.sandbox.build.cache_dir) / "ext"
        built = set(entries.iterdir())
        check = await s.check()
        assert check.status == "correct" and check.verdict is not None
        assert set(entries.iterdir()) == built  # no build of its own

    asyncio.run(body())


SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"


def profiled_verdict(status: str = "correct") -> Verdict:
    kernel = KernelLaunch(name="add_relu_kernel", owner="candidate", calls=1, total_us=10.0)
    return Verdict(status=status, candidate_sha256="0" * 64, kernels=[kernel], own_kernel_time_share=1.0)


def metrics_report() -> KernelMetricsReport:
    memory_bound = KernelMetrics(
        name="add_relu_kernel(float const*, float const*, float*, long)",
        owner="candidate",
        block="(256, 1, 1)",
        grid="(4096, 1, 1)",
        duration_us=12.345,
        metrics={SM: 21.7, MEM: 88.5, "launch__registers_per_thread": 16.0, "lts__t_sector_hit_rate.pct": 33.25},
    )
    small = [
        KernelMetrics(
            name=f"void at::native::elementwise_kernel_{i}<" + "x" * 200 + ">",
            owner="torch",
            block="(128, 1, 1)",
            grid="(1, 1, 1)",
            duration_us=float(i),
            metrics={SM: 2.0, MEM: 3.0},
        )
        for i in range(1, 11)
    ]
    return KernelMetricsReport(kernels=[*small, memory_bound], ncu="/opt/nvidia/nsight-compute/ncu", seconds=40.0)


def test_profile_renders_nsight_computes_longest_kernels_and_what_they_say() -> None:
    text = profile_text(profiled_verdict(), "cuda", FeedbackConfig(), None, metrics_report())
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Nsight Compute metrics of one forward"))
    assert "(11 kernel launches measured, 67.3 us in all;" in lines[head]
    shown = [line for line in lines[head + 1 :] if line.startswith("- ")]
    assert len(shown) == 8  # the longest eight of eleven, longest first
    assert shown[0] == (
        "- add_relu_kernel(float const*, float const*, float*, long) [candidate] grid (4096, 1, 1) block "
        "(256, 1, 1): 12.3 us; SM 21.7%, mem 88.5%, regs 16, L2 hit 33.2%"
    )
    assert lines[lines.index(shown[0]) + 1].strip().startswith("memory-bound")
    assert shown[1].startswith("- void at::native::elementwise_kernel_10<xxx") and "[torch]" in shown[1]
    assert len(shown[1].split(" [torch]")[0]) == 2 + 80  # the name cut to 80 characters
    assert "latency-bound" in lines[lines.index(shown[1]) + 1]
    assert "elementwise_kernel_2<" not in text and "elementwise_kernel_1<" not in text
    assert "nsight-compute" not in text and "/opt" not in text and "DRAM 0" not in text


@pytest.mark.parametrize(
    "backend, report, line",
    [
        (
            "cpu",
            metrics_report(),
            "Nsight Compute metrics: unavailable on the cpu backend (no GPU kernels to measure).",
        ),
        ("cuda", None, "Nsight Compute metrics: not collected (turned off for these tools)."),
        (
            "cuda",
            KernelMetricsReport(error="ncu is not installed on the evaluation host"),
            "Nsight Compute metrics: unavailable (ncu is not installed on the evaluation host).",
        ),
        (
            "cuda",
            KernelMetricsReport(
                error="the run under ncu failed in the evaluator: stderr: /tmp/rubric-rl-ncu-x/ncu.csv"
            ),
            "Nsight Compute metrics: unavailable (the run under ncu failed in the evaluator: stderr: ncu.csv).",
        ),
    ],
)
def test_profile_says_in_one_line_why_there_are_no_metrics(backend: str, report, line: str) -> None:
    text = profile_text(profiled_verdict(), backend, FeedbackConfig(), None, report)
    assert text.splitlines()[-1] == line
    assert "Nsight Compute metrics of one forward" not in text


def test_a_program_that_did_not_run_gets_no_metrics() -> None:
    text = profile_text(profiled_verdict("compile_error"), "cuda", FeedbackConfig(), None, metrics_report())
    assert text.startswith("No profile:") and "Nsight" not in text


class CudaTools:
    """The tools' backend on a GPU machine, as far as ``profile`` uses it: a fixed Verdict, counted metrics runs."""

    backend = "cuda"

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.measured: list[str] = []

    async def evaluate(self, task: Task, program: str, deadline_s: float) -> Verdict:
        return self.verdict

    async def kernel_metrics(self, task: Task, program: str) -> KernelMetricsReport:
        self.measured.append(program)
        await asyncio.sleep(0.05)
        return metrics_report()


def test_profile_measures_each_program_version_once(task: Task) -> None:
    async def body() -> None:
        tools = CudaTools(profiled_verdict())
        s = ToolSession(task, tools, ToolsConfig(backend="cpu", max_output_chars=20_000))  # type: ignore[arg-type]
        await s.write_program(WriteProgram(program="v1"))
        first, second = await asyncio.gather(s.profile(), s.call("profile", "{}"))
        assert first.ok and "Nsight Compute metrics of one forward" in first.text and second.text == first.text
        await s.check()
        assert tools.measured == ["v1"]  # one run for both calls; check does not measure
        await s.write_program(WriteProgram(program="v2"))
        await s.profile()
        assert tools.measured == ["v1", "v2"]
        tools.verdict = profiled_verdict("runtime_error")
        await s.write_program(WriteProgram(program="v3"))
        assert "No profile" in (await s.profile()).text and tools.measured == ["v1", "v2"]

    asyncio.run(body())
