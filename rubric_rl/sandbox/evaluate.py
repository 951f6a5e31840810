"""Evaluating one candidate: static checks, then a worker, then a Verdict.

The evaluator is the trusted side. It runs the static checks, starts the worker and holds the conversation with
it (``run.conversation``: builds what the worker's ``load_inline`` asks for after the native checks, compares
every output the worker sends with the reference's, turns the runtime records into findings, decides whether
timing is worth doing), and assembles the Verdict. Every failure of the candidate, however it happens
(exception, crash, hang, garbage on the pipe), ends as a Verdict; only the evaluator's own failures are marked
``infra_error``. Where it runs (device, gate, warm worker, baseline, memory share) is the executor's
``Placement``.
"""

from __future__ import annotations

import hashlib
import logging
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from rubric_rl import __version__
from rubric_rl.sandbox.build.builder import Builder, build_key
from rubric_rl.sandbox.build.candidate import as_written, build_extension
from rubric_rl.sandbox.build.capture_cache import CaptureCache
from rubric_rl.sandbox.build.extension import ExtensionSpec, PreparedBuild, SpecError, prepare_build
from rubric_rl.sandbox.checks.native import check_native_sources
from rubric_rl.sandbox.checks.static import check_program
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.kernel_metrics import measure_kernel_metrics
from rubric_rl.sandbox.measure.ncu import KernelMetricsReport, NcuOptions
from rubric_rl.sandbox.measure.reference_cache import ReferenceCache, reference_key
from rubric_rl.sandbox.run.conversation import Conversation
from rubric_rl.sandbox.run.exchange import exchange
from rubric_rl.sandbox.run.messages import Captured, Error, Setup
from rubric_rl.sandbox.run.placement import Placement
from rubric_rl.sandbox.run.process import WorkerProcess
from rubric_rl.sandbox.run.protocol import Deadline, ProtocolError, WorkerGone
from rubric_rl.sandbox.run.state import RunState
from rubric_rl.sandbox.verdict import Environment, ExtensionBuild, Finding, Status, Verdict
from rubric_rl.syntax import parse_python

log = logging.getLogger(__name__)


class CompileReport(BaseModel):
    """What a compile-only check found (``Evaluator.check_compiles``)."""

    ok: bool = Field(description="No error finding, every extension's sources compiled.")
    hack: bool = Field(default=False, description="A static or native rule with severity error fired.")
    findings: list[Finding] = Field(default_factory=list)
    builds: list[ExtensionBuild] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list, description="Compiler digests and other reasons it failed.")
    seconds: float = 0.0


@dataclass(frozen=True)
class PrebuildJob:
    """One extension build ahead of execution (``Evaluator.prebuild_jobs``); ``key`` is its build cache key."""

    key: str
    evaluator: Evaluator
    spec: ExtensionSpec
    prepared: PreparedBuild
    arch: str | None
    candidate: str

    def run(self) -> ExtensionBuild:
        ev = self.evaluator
        _, record = build_extension(ev.builder, ev.config, self.spec, self.prepared, self.arch, self.candidate)
        return record


class Evaluator:
    """Evaluates candidates one at a time; keeps its builder (cache and counters) across evaluations."""

    def __init__(
        self, config: SandboxConfig, builder: Builder | None = None, reference_cache: ReferenceCache | None = None
    ) -> None:
        self.config = config
        self.builder = builder or Builder(
            config.build.cache_dir,
            timeout_s=config.build.timeout_s,
            jobs=config.build.jobs,
            use_pch=config.build.use_pch,
        )
        self.reference_cache = (
            reference_cache if reference_cache is not None else ReferenceCache(config.correctness.reference_cache_mb)
        )
        self.captures = CaptureCache(config.build.cache_dir.parent / "captures")  # beside the build cache, as baselines

    def evaluate(
        self, reference: str, candidate: str, *, task_id: str | None = None, placement: Placement | None = None
    ) -> Verdict:
        """The Verdict of one candidate, run where ``placement`` says (default: a new worker, no shared gate)."""
        placement = placement or Placement()
        started = time.monotonic()
        run = RunState(
            config=self.config,
            candidate=candidate,
            baseline=placement.baseline,
            await_baseline=placement.await_baseline,
        )
        cfg = self.config
        if not self._decided_statically(run, reference):
            if cfg.correctness.reference_cache_mb > 0:
                import torch

                where = f"torch {torch.__version__}, {placement.cuda_visible_devices}"
                run.reference_key = reference_key(reference, cfg, where)
                run.known_reference = self.reference_cache.get(run.reference_key)
            worker = placement.worker or WorkerProcess(cfg, cuda_visible_devices=placement.cuda_visible_devices)
            with ThreadPoolExecutor(1, thread_name_prefix="compare") as compare:
                try:
                    conversation = Conversation(run, placement, self.builder, self.reference_cache, compare)
                    conversation.converse(reference, worker)
                finally:
                    run.compared()
        elif placement.worker is not None:
            placement.worker.close()
        run.durations.total_s = time.monotonic() - started
        return self._verdict(run, task_id)

    def settled_statically(self, reference: str, candidate: str, *, task_id: str | None = None) -> Verdict | None:
        """The Verdict where the static checks alone decide it (a syntax error, or a hack the policy stops on), else
        None; the same Verdict ``evaluate`` gives such a candidate. An executor asks this before it queues a
        candidate for a build and an execution slot: in an RL batch such a candidate would otherwise wait behind
        the others' evaluations for a result that takes a tenth of a second, and cost a capture and a warm worker.
        An evaluation that follows checks the program again: 0.5 ms for a KernelBench candidate (2.2 ms at most of
        20, cpu), too little for a cache of the outcome to pay."""
        started = time.monotonic()
        run = RunState(config=self.config, candidate=candidate)
        if not self._decided_statically(run, reference):
            return None
        run.durations.total_s = time.monotonic() - started
        return self._verdict(run, task_id)

    def _decided_statically(self, run: RunState, reference: str) -> bool:
        """Runs the static checks into ``run``; whether they decide its Verdict, so that no worker needs to start."""
        t0 = time.monotonic()
        try:
            parse_python(run.candidate)
        except SyntaxError as e:
            run.compile_failed = True
            run.compile_log = f"candidate line {e.lineno}: SyntaxError: {e.msg}"
            run.error(run.compile_log)
        else:
            run.findings.extend(check_program(run.candidate, self.config, reference))
        run.durations.static_s = time.monotonic() - t0
        return run.compile_failed or (run.has_hack() and self.config.policy.stop_on_static_error)

    def kernel_metrics(
        self,
        reference: str,
        candidate: str,
        options: NcuOptions | None = None,
        *,
        task_id: str | None = None,
        placement: Placement | None = None,
    ) -> KernelMetricsReport:
        """Nsight Compute's metrics of each kernel of one candidate forward, in a new worker run under ncu (see
        ``measure.kernel_metrics``); a report for every call, its ``error`` saying why it has no kernels."""
        return measure_kernel_metrics(self, reference, candidate, options, task_id=task_id, placement=placement)

    def capture(self, candidate: str) -> tuple[list[ExtensionSpec], str | None]:
        """The candidate's load_inline calls, recorded by importing it in a sandboxed worker (no GPU, no build).

        Returns (specs, error); used to build ahead of execution. The execution worker asks for the same builds
        again and finds them in the cache; a capture that misses some never changes a Verdict.
        """
        cfg = self.config
        setup = Setup(
            config=cfg,
            reference="",
            candidate=candidate,
            mode="capture",
            memory_fraction=cfg.limits.gpu_memory_fraction,
        )
        with WorkerProcess(cfg, cuda_visible_devices="") as worker:
            try:
                last = exchange(worker, setup, cfg.limits.load_timeout_s)[-1]
            except (Deadline, WorkerGone, ProtocolError, BrokenPipeError) as e:
                return [], f"capture failed: {type(e).__name__}: {worker.describe_exit()}"
        if not isinstance(last, Captured):
            return [], last.message if isinstance(last, Error) else "capture failed"
        return last.specs, last.error

    def prebuild(self, candidate: str, arch: str | None) -> list[ExtensionBuild]:
        """Capture and build a candidate's extensions ahead of execution (what build workers do)."""
        return [job.run() for job in self.prebuild_jobs(candidate, arch)]

    def prebuild_jobs(self, candidate: str, arch: str | None) -> list[PrebuildJob]:
        """The builds a candidate's execution will ask for, each with its build key, not run yet: its load_inline
        calls from the capture cache or a capture worker, less those the execution will refuse (a bad spec, a
        native finding that stops it). Candidates whose jobs share a key share one build."""
        cfg = self.config
        specs = self.captures.get(candidate, cfg.backend)
        if specs is None:
            specs, error = self.capture(candidate)
            if error is None:
                self.captures.put(candidate, cfg.backend, specs)
        jobs = []
        for spec in specs:
            try:
                prepared = prepare_build(spec, cfg, arch)
            except SpecError:
                continue
            if any(f.severity == "error" for f in check_native_sources(as_written(spec, cfg, arch), candidate, cfg)):
                continue  # the execution will stop on these findings; no build needed
            jobs.append(PrebuildJob(build_key(prepared), self, spec, prepared, arch, candidate))
        return jobs

    def check_compiles(
        self, candidate: str, arch: str | None = "9.0", mode: Literal["objects", "full"] = "objects"
    ) -> CompileReport:
        """Static and native checks plus a compile (nvcc/g++), without running anything.

        ``objects``: the object files only, no GPU and no CUDA torch needed; what a CPU machine can say about a
        CUDA candidate: whether it is a hack by its source and whether its sources compile for ``arch``.
        ``full``: linked too, into the cache entry an evaluation of the same program on this machine builds, so
        that the evaluation which follows (an agent's ``check`` after its ``compile``) finds it built.
        """
        cfg = self.config
        started = time.monotonic()
        try:
            parse_python(candidate)
        except SyntaxError as e:
            msg = f"candidate line {e.lineno}: SyntaxError: {e.msg}"
            return CompileReport(ok=False, errors=[msg], seconds=time.monotonic() - started)
        findings = check_program(candidate, cfg)
        specs, capture_error = self.capture(candidate)
        errors = [capture_error] if capture_error and not specs else []
        builds: list[ExtensionBuild] = []
        for spec in specs:
            try:
                prepared = prepare_build(spec, cfg, arch if cfg.backend == "cuda" else None)
            except SpecError as e:
                errors.append(str(e))
                continue
            findings += check_native_sources(as_written(spec, cfg, arch), candidate, cfg)
            outcome, record = build_extension(self.builder, cfg, spec, prepared, arch, candidate, mode=mode)
            builds.append(record)
            if not outcome.ok:
                errors.append(outcome.infra_error or outcome.digest or "build failed")
        if not specs and not errors:
            errors.append("the candidate calls load_inline with nothing to build")
        hack = any(f.severity == "error" for f in findings)
        return CompileReport(
            ok=not errors and not hack,
            hack=hack,
            findings=findings,
            builds=builds,
            errors=errors,
            seconds=time.monotonic() - started,
        )

    # ---- the Verdict ------------------------------------------------------------------------------------------
    def _verdict(self, run: RunState, task_id: str | None) -> Verdict:
        status = _status(run)
        if run.infra_error:
            run.errors.insert(0, run.infra_error)
        for f in run.findings:
            if f.severity == "error" and status == "hack":
                run.error(f"hack [{f.rule}]: {f.message}")
        speedup_eager = speedup_compile = None
        t = run.timings
        if status == "correct" and t is not None and t.candidate is not None and t.candidate.median_ms > 0:
            if t.eager is not None:
                speedup_eager = t.eager.median_ms / t.candidate.median_ms
            if t.compile is not None:
                # A reused compile time was measured in another run, beside that run's eager: scaled by how eager
                # moved since, it is the baseline's compile/eager ratio times this run's eager/candidate one, each
                # measured in interleaved rounds, so drift between the two runs cancels.
                scale = t.eager_drift if t.baseline_source == "reused" and t.eager_drift else 1.0
                speedup_compile = t.compile.median_ms * scale / t.candidate.median_ms
        env = run.env
        return Verdict(
            status=status,
            task_id=task_id,
            candidate_sha256=hashlib.sha256(run.candidate.encode()).hexdigest(),
            errors=run.errors,
            compile_log=run.compile_log,
            findings=run.findings,
            trials=run.trials,
            timings=run.timings,
            speedup_eager=speedup_eager,
            speedup_compile=speedup_compile,
            kernels=run.kernels,
            own_kernel_time_share=run.own_share,
            aten_ops=run.aten_ops,
            builds=run.builds,
            task_flags=run.task_flags,
            reference_reused=run.known_reference is not None and bool(run.ref_meta),
            infra_error=run.infra_error,
            durations=run.durations,
            diagnostics=run.diagnostics,
            environment=Environment(
                backend=self.config.backend,
                torch=env.torch if env else "unknown",
                python=sys.version.split()[0],
                device=env.device if env else "unknown",
                arch=env.arch if env else None,
                cuda=env.cuda if env else None,
                host=platform.node(),
                rubric_rl=__version__,
            ),
        )


def _status(run: RunState) -> Status:
    """The Verdict's status: the evaluator's own failure, a hack, then how the candidate failed, in that order."""
    if run.infra_error:
        return "runtime_error"
    if run.has_hack():
        return "hack"
    if run.compile_failed:
        return "compile_error"
    if run.timed_out:
        return "timeout"
    if run.runtime_failed:
        return "runtime_error"
    if not run.trials or not all(t.passed for t in run.trials):
        failed = [t for t in run.trials if not t.passed]
        if failed:
            run.error(f"trial {failed[0].index} ({failed[0].distribution} inputs): {failed[0].error}")
        return "incorrect"
    return "correct"


def evaluate(
    reference: str, candidate: str, config: SandboxConfig | None = None, *, task_id: str | None = None
) -> Verdict:
    """Evaluate one candidate with a fresh evaluator (convenience for scripts and tests)."""
    return Evaluator(config or SandboxConfig()).evaluate(reference, candidate, task_id=task_id)
