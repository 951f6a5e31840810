"""The tools an agent uses on one task, over the sandbox: write_program, compile, check, benchmark, profile,
submit. No verl here: the agent loop (``rubric_rl.agents.verl_loop``), the Planner / Coder / Verifier loop and
any OpenAI tool-calling client drive the same ``ToolSession``.

    session = ToolSession(task, get_sandbox_tools(config, final_seed), config)
    await session.write_program(WriteProgram(program=source))
    result = await session.check()                  # ToolResult: ok, text (what the model reads), verdict
    result = await session.call("benchmark", "{}")  # a model's call by name, arguments as JSON text or a dict
    await session.submit()
    program, source = session.final_program("last_written")

What holds:

- Every call returns a ``ToolResult``; nothing raises out of a call (unknown tool, malformed arguments, a
  program too long, a timeout, a call after submit and our own failures are tool errors with a clear text).
- Every call is bounded: in time (``compile_timeout_s``, ``evaluate_timeout_s``) and in what it says
  (``max_output_chars``, ``max_output_tokens`` with a counter), and recorded (``records``).
- The model sees digests only: compiler errors, mismatch summaries, timings, kernel names. Never the evaluator's
  files (paths are cut to their last part), reference outputs or input values; the tools' inputs come from a
  seed of their own (see ``backend``), so they are not the inputs that score the submitted program.
- One evaluation per program version: check, benchmark and profile read the same Verdict; profile adds Nsight
  Compute's metrics (on cuda, where ncu runs), measured once per version in a run of their own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rubric_rl.agents.backend import SandboxTools
from rubric_rl.agents.config import ToolsConfig
from rubric_rl.agents.render import benchmark_text, bound_text, check_text, compile_text, profile_text
from rubric_rl.sandbox import KernelMetricsReport, Verdict
from rubric_rl.skills.feedback import TokenCounter
from rubric_rl.tasks import Task

log = logging.getLogger(__name__)

ToolErrorKind = Literal[
    "unknown_tool",  # no tool of that name
    "bad_arguments",  # arguments not JSON, not an object, missing, unexpected or of the wrong type
    "no_program",  # a tool that needs a program before write_program was called
    "too_long",  # the program is longer than max_program_chars
    "timeout",  # the call ran past its bound
    "submitted",  # a call after submit
    "call_limit",  # more calls in one turn than the loop runs
    "evaluator",  # the sandbox failed (not the program's fault)
    "internal",  # a bug of ours, logged with its traceback
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WriteProgram(_Args):
    """Save the complete program as the current version, replacing the previous one. The program is Python
    defining class ModelNew (same constructor and forward signature as Model) whose kernels are compiled with
    torch.utils.cpp_extension.load_inline. Returns the version number."""

    program: str = Field(description="The complete Python source of the program, not a diff.")


class Compile(_Args):
    """Build the current program's extensions without running them. Returns 'compiled' or the digested
    compiler errors and broken evaluation rules."""


class Check(_Args):
    """Run the current program against the reference on fresh random inputs. Returns pass, or the mismatch
    summary (worst error, failing input distributions), runtime errors and broken evaluation rules."""


class Benchmark(_Args):
    """Time the current program against the reference in eager PyTorch and under torch.compile. Returns the
    median times and speedups (only for a correct program)."""


class Profile(_Args):
    """Where the current program's time goes: top kernels, share of time in its own kernels, remaining
    PyTorch time, PyTorch ops its forward runs; where available, Nsight Compute metrics of its longest kernels
    (duration, SM and memory throughput, occupancy, registers, cache hit rates)."""


class Submit(_Args):
    """Submit the current program as the final answer. It ends the episode: the program is scored by a fresh
    evaluation on inputs the tools never used."""


class ToolSpec(BaseModel):
    """A tool: its name, its argument model (whose docstring is the description) and the session method."""

    name: str
    args: type[_Args]
    method: str


TOOLS: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        ToolSpec(name="write_program", args=WriteProgram, method="write_program"),
        ToolSpec(name="compile", args=Compile, method="compile"),
        ToolSpec(name="check", args=Check, method="check"),
        ToolSpec(name="benchmark", args=Benchmark, method="benchmark"),
        ToolSpec(name="profile", args=Profile, method="profile"),
        ToolSpec(name="submit", args=Submit, method="submit"),
    )
}


class ToolResult(BaseModel):
    """The outcome of one tool call. ``text`` is all the model reads; the rest is for programs and records."""

    name: str = Field(description="The tool called (as the caller spelled it).")
    ok: bool = Field(description="The call did what was asked (a failing check is ok: it checked).")
    text: str = Field(description="What the model reads, bounded.")
    error: ToolErrorKind | None = Field(default=None, description="Why the call failed, when it did.")
    status: str | None = Field(
        default=None, description="Verdict status of the evaluated program, or compiled/compile_error/hack."
    )
    program_version: int | None = Field(default=None, description="The program version the call acted on.")
    verdict: Verdict | None = Field(default=None, description="The evaluation's Verdict (check/benchmark/profile).")


class ToolCallRecord(BaseModel):
    """One call, as recorded by the session."""

    name: str
    arguments: dict[str, Any] = Field(description="The arguments, long strings replaced by their length and hash.")
    ok: bool
    error: ToolErrorKind | None = None
    status: str | None = None
    program_version: int | None = None
    latency_s: float
    output_chars: int
    output_tokens: int | None = Field(default=None, description="Tokens of the output, where a counter was given.")


def _summary(arguments: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        if isinstance(v, str) and len(v) > 200:
            out[k] = f"<{len(v)} chars, sha256 {hashlib.sha256(v.encode()).hexdigest()[:12]}>"
        else:
            out[k] = v if isinstance(v, str | int | float | bool | type(None)) else repr(v)[:200]
    return out


def _validation_message(name: str, e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        where = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unexpected argument {where!r}")
        elif err["type"] == "missing":
            parts.append(f"missing required argument {where!r}")
        else:
            parts.append(f"{where}: {err['msg']}")
    fields = list(TOOLS[name].args.model_fields)
    takes = f"takes {', '.join(repr(f) for f in fields)}" if fields else "takes no arguments"
    return f"{name}: {'; '.join(parts)} ({name} {takes})."


class ToolSession:
    """The tools of one trajectory on one task: the current program, one Verdict per version, every call."""

    def __init__(
        self, task: Task, tools: SandboxTools, config: ToolsConfig, *, count_tokens: TokenCounter | None = None
    ) -> None:
        self.task = task
        self.tools = tools
        self.config = config
        self.count_tokens = count_tokens
        self.feedback = config.feedback.model_copy(
            update={
                "max_chars": min(config.feedback.max_chars, config.max_output_chars),
                "max_tokens": config.max_output_tokens,
            }
        )
        self.program: str | None = None
        self.version = 0
        self.submitted_version: int | None = None
        self.records: list[ToolCallRecord] = []
        self._verdicts: dict[int, Verdict] = {}
        self._evaluating: dict[int, asyncio.Future[Verdict]] = {}
        self._metrics: dict[int, asyncio.Future[KernelMetricsReport | None]] = {}

    @property
    def submitted(self) -> bool:
        return self.submitted_version is not None

    def final_program(self, unsubmitted: Literal["last_written", "fail"]) -> tuple[str | None, str]:
        """(program to score, where it came from): 'submitted', 'last_written' or 'none'."""
        if self.submitted:
            return self.program, "submitted"
        if unsubmitted == "last_written" and self.program is not None:
            return self.program, "last_written"
        return None, "none"

    # The tools. Each returns a ToolResult and never raises.

    async def write_program(self, args: WriteProgram) -> ToolResult:
        return await self._run("write_program", args, self._write_program, needs_program=False)

    async def compile(self, args: Compile | None = None) -> ToolResult:
        return await self._run("compile", args or Compile(), self._compile)

    async def check(self, args: Check | None = None) -> ToolResult:
        return await self._run("check", args or Check(), self._evaluated(check_text))

    async def benchmark(self, args: Benchmark | None = None) -> ToolResult:
        return await self._run("benchmark", args or Benchmark(), self._evaluated(benchmark_text))

    async def profile(self, args: Profile | None = None) -> ToolResult:
        return await self._run("profile", args or Profile(), self._profile)

    async def submit(self, args: Submit | None = None) -> ToolResult:
        return await self._run("submit", args or Submit(), self._submit)

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """A call by name with the model's arguments (JSON text, a mapping, or None for none)."""
        started = time.monotonic()
        spec = TOOLS.get(name)
        if spec is None:
            names = ", ".join(TOOLS)
            return self._finish(
                self._error(name, "unknown_tool", f"No tool named {name!r}. Tools: {names}."), {}, started
            )
        raw: Any = arguments
        if isinstance(raw, str):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as e:
                msg = f"{name}: the arguments are not valid JSON ({e.msg} at character {e.pos})."
                return self._finish(self._error(name, "bad_arguments", msg), {"raw": raw}, started)
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            msg = f"{name}: the arguments must be a JSON object, not {type(raw).__name__}."
            return self._finish(self._error(name, "bad_arguments", msg), {"raw": repr(raw)[:200]}, started)
        try:
            args = spec.args.model_validate(dict(raw))
        except ValidationError as e:
            return self._finish(self._error(name, "bad_arguments", _validation_message(name, e)), raw, started)
        method: Callable[[Any], Awaitable[ToolResult]] = getattr(self, spec.method)
        return await method(args)

    def refuse(
        self, name: str, kind: ToolErrorKind, message: str, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """A call the caller will not run (a malformed call block, one over the turn's limit), recorded as a tool
        error like any other."""
        return self._finish(self._error(name, kind, message), arguments or {}, time.monotonic())

    # Machinery.

    def _error(self, name: str, kind: ToolErrorKind, message: str) -> ToolResult:
        return ToolResult(name=name, ok=False, error=kind, text=f"Error ({kind}): {message}")

    def _finish(self, result: ToolResult, arguments: Mapping[str, Any], started: float) -> ToolResult:
        cfg = self.config
        result.text = bound_text(result.text, cfg.max_output_chars, cfg.max_output_tokens, self.count_tokens)
        tokens = self.count_tokens(result.text) if self.count_tokens is not None else None
        self.records.append(
            ToolCallRecord(
                name=result.name,
                arguments=_summary(arguments),
                ok=result.ok,
                error=result.error,
                status=result.status,
                program_version=result.program_version,
                latency_s=time.monotonic() - started,
                output_chars=len(result.text),
                output_tokens=tokens,
            )
        )
        return result

    async def _run(
        self,
        name: str,
        args: _Args,
        impl: Callable[[Any], Awaitable[ToolResult]],
        *,
        needs_program: bool = True,
    ) -> ToolResult:
        started = time.monotonic()
        arguments = args.model_dump()
        if self.submitted:
            result = self._error(name, "submitted", "the program was submitted; the episode is over.")
        elif needs_program and self.program is None:
            result = self._error(name, "no_program", f"{name} needs a program: call write_program first.")
        else:
            try:
                result = await impl(args)
            except (TimeoutError, asyncio.TimeoutError):
                result = self._error(name, "timeout", f"{name} did not finish within its time limit.")
            except Exception:  # the tools' trust boundary: the loop gets a tool error, the log the traceback
                log.exception("tool %s failed on task %s", name, self.task.id)
                result = self._error(name, "internal", f"{name} failed inside the environment (not your program).")
        return self._finish(result, arguments, started)

    async def _write_program(self, args: WriteProgram) -> ToolResult:
        limit = self.config.max_program_chars
        if len(args.program) > limit:
            msg = f"the program has {len(args.program)} characters; the limit is {limit}."
            return self._error("write_program", "too_long", msg)
        if not args.program.strip():
            return self._error("write_program", "bad_arguments", "write_program: the program is empty.")
        self.program = args.program
        self.version += 1
        lines = args.program.count("\n") + 1
        text = (
            f"Saved program version {self.version} ({lines} lines). Call compile, check, benchmark or profile to "
            "test it, and submit when it is ready."
        )
        return ToolResult(name="write_program", ok=True, text=text, program_version=self.version)

    async def _compile(self, args: Compile) -> ToolResult:
        assert self.program is not None
        version = self.version
        report = await asyncio.wait_for(self.tools.compile(self.program), self.config.compile_timeout_s)
        status, text = compile_text(report, self.feedback, self.count_tokens)
        return ToolResult(name="compile", ok=True, text=text, status=status, program_version=version)

    def _evaluated(
        self, render: Callable[[Verdict, Any, TokenCounter | None], str]
    ) -> Callable[[Any], Awaitable[ToolResult]]:
        async def run(args: _Args) -> ToolResult:
            version = self.version
            verdict = await self._verdict(version)
            text = render(verdict, self.feedback, self.count_tokens)
            return self._evaluated_result(type(args).__name__.lower(), verdict, text, version)

        return run

    def _evaluated_result(self, name: str, verdict: Verdict, text: str, version: int) -> ToolResult:
        if verdict.infra_error is not None:
            return ToolResult(
                name=name, ok=False, error="evaluator", text=text, status=verdict.status, program_version=version
            )
        return ToolResult(
            name=name, ok=True, text=text, status=verdict.status, program_version=version, verdict=verdict
        )

    async def _profile(self, args: Profile) -> ToolResult:
        """The Verdict's profile and, for a program that ran on the GPU, Nsight Compute's metrics of its kernels."""
        version, program = self.version, self.program
        assert program is not None
        verdict = await self._verdict(version)
        metrics: KernelMetricsReport | None = None
        ran = verdict.infra_error is None and verdict.status in ("correct", "incorrect")
        if ran and self.tools.backend == "cuda":
            metrics = await self._kernel_metrics(version, program)
        text = profile_text(verdict, self.tools.backend, self.feedback, self.count_tokens, metrics)
        return self._evaluated_result("profile", verdict, text, version)

    async def _kernel_metrics(self, version: int, program: str) -> KernelMetricsReport | None:
        """A version's Nsight Compute metrics: measured once (concurrent callers share the run)."""
        pending = self._metrics.get(version)
        if pending is None:
            pending = self._metrics[version] = asyncio.ensure_future(self.tools.kernel_metrics(self.task, program))
        try:
            return await asyncio.shield(pending)
        except Exception:
            self._metrics.pop(version, None)  # a failure of ours is not kept
            raise

    async def _verdict(self, version: int) -> Verdict:
        """The Verdict of a version: evaluated once (concurrent callers share the run; failed runs are not kept)."""
        if version in self._verdicts:
            return self._verdicts[version]
        pending = self._evaluating.get(version)
        if pending is None:
            assert self.program is not None
            bound = self.config.evaluate_timeout_s
            pending = asyncio.ensure_future(
                asyncio.wait_for(self.tools.evaluate(self.task, self.program, bound), bound + 30.0)
            )
            self._evaluating[version] = pending
        try:
            verdict = await asyncio.shield(pending)
        finally:
            if pending.done():
                self._evaluating.pop(version, None)
        if verdict.infra_error is None:
            self._verdicts[version] = verdict
        return verdict

    async def _submit(self, args: Submit) -> ToolResult:
        self.submitted_version = self.version
        text = (
            f"Submitted program version {self.version}. The episode ends; the program is scored by a fresh evaluation."
        )
        return ToolResult(name="submit", ok=True, text=text, program_version=self.version)
