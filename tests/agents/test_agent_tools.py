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
from rubric_rl.agents.render import bound_text, scrub_paths
from rubric_rl.sandbox import SandboxConfig
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
