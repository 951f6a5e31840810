"""Evaluating one candidate: static checks, then a worker, then a Verdict.

The evaluator is the trusted side. It runs the static checks, starts the worker, builds what the worker's
``load_inline`` asks for (after the native checks), compares every output the worker sends with the
reference's, turns the runtime records into findings, decides whether timing is worth doing, and assembles
the Verdict. Every failure of the candidate, however it happens (exception, crash, hang, garbage on the
pipe), ends as a Verdict; only the evaluator's own failures are marked ``infra_error``.
"""

from __future__ import annotations

import hashlib
import logging
import platform
import secrets
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from pydantic import BaseModel, Field

from rubric_rl import __version__
from rubric_rl.sandbox.build.builder import Builder, BuildOutcome
from rubric_rl.sandbox.build.capture_cache import CaptureCache
from rubric_rl.sandbox.build.extension import ExtensionSpec, PreparedBuild, SpecError, prepare_build
from rubric_rl.sandbox.checks.guard import forbidden_ops
from rubric_rl.sandbox.checks.native import check_native_sources, kernel_names
from rubric_rl.sandbox.checks.static import check_program
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.correctness import compare_host_outputs, compare_outputs, degenerate_task_flags
from rubric_rl.sandbox.measure.profiling import attribute_kernels, side_streams
from rubric_rl.sandbox.measure.reference_cache import KnownReference, ReferenceCache, reference_key
from rubric_rl.sandbox.measure.timing import summarize
from rubric_rl.sandbox.run.cpu_cores import available_cores, pin_process
from rubric_rl.sandbox.run.device_gate import DeviceGate, GateHold
from rubric_rl.sandbox.run.process import WorkerProcess
from rubric_rl.sandbox.run.protocol import Channel, Deadline, Message, ProtocolError, WorkerGone, unpack_tensors
from rubric_rl.sandbox.verdict import (
    Environment,
    ExtensionBuild,
    Finding,
    StageDurations,
    Timings,
    TimingStats,
    TrialResult,
    Verdict,
)
from rubric_rl.syntax import parse_python

log = logging.getLogger(__name__)

MAX_ERRORS = 10
SPOT_CHECK_SAMPLES = 1 << 16  # positions per output the evaluator checks itself when a trial is compared in the worker


class CompileReport(BaseModel):
    """What a compile-only check found (``Evaluator.check_compiles``)."""

    ok: bool = Field(description="No error finding, every extension's sources compiled.")
    hack: bool = Field(default=False, description="A static or native rule with severity error fired.")
    findings: list[Finding] = Field(default_factory=list)
    builds: list[ExtensionBuild] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list, description="Compiler digests and other reasons it failed.")
    seconds: float = 0.0


class BaselineError(RuntimeError):
    """A task's baseline could not be measured (the reference or torch.compile failed, or the worker died)."""


class TaskBaseline(BaseModel):
    """Per-task eager and compile timings measured once and reused across candidates (see executors)."""

    eager: TimingStats = Field(description="Eager reference timing when the baseline was measured.")
    compile: TimingStats | None = Field(description="torch.compile timing; None if compile failed or was off.")
    compile_mode: str | None = Field(description="torch.compile mode of the measurement.")
    rounds_ms: dict[str, list[float]] = Field(
        description="eager's and (when timed) compile's milliseconds round by round, as Timings.rounds_ms."
    )
    compile_warmup_s: float | None = Field(default=None, description="The compile baseline's first call, seconds.")
    compile_benchmarks: int | None = Field(default=None, description="As Timings.compile_benchmarks.")
    measure_s: float | None = Field(default=None, description="Seconds the measurement took, worker start to end.")
    device_wait_s: float | None = Field(default=None, description="Of which waiting for the device (shared gate).")
    phases: dict[str, float] = Field(
        default_factory=dict,
        description="Where the measurement's time went, as the worker saw it (s): start_wait_s (its interpreter "
        "importing torch, none for a warm spare), setup_s, reference_model_s, compile_warmup_s, gate_wait_s "
        "(for the device alone), timing_rounds_s.",
    )
    source: Literal["baseline_worker", "beside_candidate"] = Field(
        default="baseline_worker",
        description="baseline_worker: measured on its own; beside_candidate: eager and compile as a candidate's "
        "evaluation timed them beside it (a task too large to measure beside other evaluations).",
    )

    @classmethod
    def from_rounds(cls, rounds_ms: dict[str, list[float]], compile_mode: str | None, **fields: Any) -> TaskBaseline:
        """A baseline from eager's (and compile's, when it was timed) per-round milliseconds."""
        compiled = "compile" in rounds_ms
        return cls(
            eager=summarize(rounds_ms["eager"]),
            compile=summarize(rounds_ms["compile"]) if compiled else None,
            compile_mode=compile_mode if compiled else None,
            rounds_ms={k: rounds_ms[k] for k in ("eager", "compile") if k in rounds_ms},
            **fields,
        )

    @classmethod
    def beside(cls, timings: Timings | None) -> TaskBaseline | None:
        """The baseline a candidate's evaluation measured beside it: eager and torch.compile both timed in its
        rounds (not reused), else None."""
        if timings is None or timings.baseline_source != "measured" or "compile" not in timings.rounds_ms:
            return None
        return cls.from_rounds(
            timings.rounds_ms,
            timings.compile_mode,
            compile_warmup_s=timings.compile_warmup_s,
            compile_benchmarks=timings.compile_benchmarks,
            source="beside_candidate",
        )


@dataclass
class _Run:
    """Everything learned about one candidate while its worker runs."""

    config: SandboxConfig
    candidate: str
    stage: str = "start"
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    trials: list[TrialResult] = field(default_factory=list)
    builds: list[ExtensionBuild] = field(default_factory=list)
    kernel_names: set[str] = field(default_factory=set)
    aten_ops: dict[str, int] = field(default_factory=dict)
    ref_meta: list[dict[str, Any]] = field(default_factory=list)
    ref_values: list[list[Any]] = field(default_factory=list)
    task_flags: list[str] = field(default_factory=list)
    reference_key: str | None = None
    known_reference: KnownReference | None = None
    timings: Timings | None = None
    kernels: list[Any] = field(default_factory=list)
    own_share: float | None = None
    paused_s: float = 0.0  # of the current stage, spent on our builds and gate waits (counted apart)
    env: dict[str, Any] = field(default_factory=dict)
    compile_log: str | None = None
    compile_failed: bool = False
    timed_out: bool = False
    runtime_failed: bool = False
    infra_error: str | None = None
    durations: StageDurations = field(default_factory=StageDurations)
    seen_integrity: set[str] = field(default_factory=set)
    seen_audit: set[str] = field(default_factory=set)
    stage_started: float = 0.0
    baseline: TaskBaseline | None = None
    await_baseline: Callable[[], TaskBaseline | None] | None = None
    compile_here: bool = False  # no task baseline with a compile timing to reuse: the worker times torch.compile
    timing_cores: frozenset[int] | None = None  # the device's reserved CPUs, the worker's while it times
    worker_pid: int | None = None
    comparing: Future[TrialResult] | None = None  # the last shipped trial's comparison, running beside the worker

    def add_finding(
        self,
        rule: str,
        source: Any,
        message: str,
        *,
        default: str = "error",
        evidence: str = "",
        line: int | None = None,
    ) -> None:
        severity = self.config.policy.severity(rule, default)  # type: ignore[arg-type]
        if severity == "off":
            return
        self.findings.append(
            Finding(rule=rule, severity=severity, source=source, message=message, evidence=evidence[:1000], line=line)
        )

    def close_stage(self) -> float:
        """Seconds since the current stage began, by our clock; the next stage begins now.

        Stages are measured back to back (each includes our handling of its messages), so that with the gate
        waits, builds and teardown they add up to the evaluation's total."""
        now = time.monotonic()
        elapsed, self.stage_started = now - self.stage_started - self.paused_s, now
        self.paused_s = 0.0
        return max(0.0, elapsed)

    def compared(self) -> None:
        """The comparison still running (at most one) is over and in ``trials``, in trial order."""
        if self.comparing is not None:
            pending, self.comparing = self.comparing, None
            self.trials.append(pending.result())

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message[:2000])

    def has_hack(self) -> bool:
        return any(f.severity == "error" for f in self.findings)


class Evaluator:
    """Evaluates candidates one at a time; keeps its builder (cache and counters) across evaluations."""

    def __init__(
        self, config: SandboxConfig, builder: Builder | None = None, reference_cache: ReferenceCache | None = None
    ) -> None:
        self.config = config
        self.builder = builder or Builder(
            config.cache_dir, timeout_s=config.build_timeout_s, jobs=config.build_jobs, use_pch=config.use_pch
        )
        self.reference_cache = (
            reference_cache if reference_cache is not None else ReferenceCache(config.reference_cache_mb)
        )
        self.captures = CaptureCache(config.cache_dir.parent / "captures")  # beside the build cache, as baselines

    def evaluate(
        self,
        reference: str,
        candidate: str,
        *,
        task_id: str | None = None,
        baseline: TaskBaseline | None = None,
        await_baseline: Callable[[], TaskBaseline | None] | None = None,
        cuda_visible_devices: str | None = None,
        worker: WorkerProcess | None = None,
        gate: DeviceGate | None = None,
        alone: bool = False,
        timing_cores: frozenset[int] | None = None,
    ) -> Verdict:
        """The Verdict of one candidate. ``worker``: an already started (warm) worker to use, else a new one.

        ``baseline``: the task's measured baseline (torch.compile is then not run again); ``await_baseline``:
        one still being measured: the worker skips torch.compile, the correctness trials run meanwhile, and the
        call blocks, holding no gate, just before timing. ``gate``: the device's gate when other evaluations
        share it (held shared for the reference, the correctness trials and the kernel profile, giving way
        between two trials to a waiting timing; exclusively for the timed rounds; ``alone``: exclusively
        throughout). ``timing_cores``: CPUs reserved for this device's timings (see ``cpu_cores``): the worker
        is moved onto them for its timed rounds, then back onto ours."""
        started = time.monotonic()
        run = _Run(
            config=self.config,
            candidate=candidate,
            baseline=baseline,
            await_baseline=await_baseline,
            timing_cores=timing_cores,
        )
        t0 = time.monotonic()
        try:
            parse_python(candidate)
        except SyntaxError as e:
            run.compile_failed = True
            run.compile_log = f"candidate line {e.lineno}: SyntaxError: {e.msg}"
            run.error(run.compile_log)
        else:
            run.findings.extend(check_program(candidate, self.config, reference))
        run.durations.static_s = time.monotonic() - t0
        cfg = self.config
        if cfg.reference_cache_mb > 0:
            import torch

            run.reference_key = reference_key(reference, cfg, f"torch {torch.__version__}, {cuda_visible_devices}")
            run.known_reference = self.reference_cache.get(run.reference_key)
        if not run.compile_failed and not (run.has_hack() and cfg.policy.stop_on_static_error):
            with ThreadPoolExecutor(1, thread_name_prefix="compare") as compare:
                try:
                    self._run_worker(
                        run,
                        reference,
                        worker or WorkerProcess(cfg, cuda_visible_devices=cuda_visible_devices),
                        GateHold(gate, alone=alone),
                        compare,
                    )
                finally:
                    run.compared()
        elif worker is not None:
            worker.close()
        run.durations.total_s = time.monotonic() - started
        return self._verdict(run, task_id)

    def _build_extension(
        self,
        spec: ExtensionSpec,
        prepared: PreparedBuild,
        arch: str | None,
        candidate: str,
        mode: Literal["full", "objects"] = "full",
    ) -> tuple[BuildOutcome, ExtensionBuild]:
        """Build through the cache; a split build that fails is rebuilt from the candidate's own sources (the
        rewrite may change how fast a candidate builds, never its verdict)."""
        outcome = self.builder.build(prepared, candidate=candidate, mode=mode)
        if not outcome.ok and prepared.split_sources and not outcome.infra_error:
            prepared = as_written(spec, self.config, arch)
            outcome = self.builder.build(prepared, candidate=candidate, mode=mode)
        record = ExtensionBuild(
            name=spec.name,
            key=outcome.key,
            ok=outcome.ok,
            cached=outcome.cached,
            seconds=round(outcome.seconds, 3),
            split_sources=prepared.split_sources,
            dropped_flags=prepared.dropped_flags,
        )
        return outcome, record

    def capture(self, candidate: str) -> tuple[list[ExtensionSpec], str | None]:
        """The candidate's load_inline calls, recorded by importing it in a sandboxed worker (no GPU, no build).

        Returns (specs, error); used to build ahead of execution. The execution worker asks for the same builds
        again and finds them in the cache; a capture that misses some never changes a Verdict.
        """
        cfg = self.config
        with WorkerProcess(cfg, cuda_visible_devices="") as worker:
            try:
                messages = _conversation(
                    worker,
                    {"config": cfg.model_dump(mode="json"), "reference": "", "candidate": candidate, "mode": "capture"},
                    cfg.load_timeout_s,
                )
            except (Deadline, WorkerGone, ProtocolError, BrokenPipeError) as e:
                return [], f"capture failed: {type(e).__name__}: {worker.describe_exit()}"
        last = messages[-1]
        if last.type != "captured":
            return [], str(last.body.get("message", "capture failed"))
        specs = []
        for raw in last.body.get("specs", []):
            try:
                specs.append(ExtensionSpec.model_validate(raw))
            except ValueError:
                continue
        return specs, last.body.get("error")

    def prebuild(self, candidate: str, arch: str | None) -> list[ExtensionBuild]:
        """Capture and build a candidate's extensions ahead of execution (what build workers do)."""
        specs = self.captures.get(candidate, self.config.backend)
        if specs is None:
            specs, error = self.capture(candidate)
            if error is None:
                self.captures.put(candidate, self.config.backend, specs)
        builds = []
        for spec in specs:
            try:
                prepared = prepare_build(spec, self.config, arch)
            except SpecError:
                continue
            if any(
                f.severity == "error"
                for f in check_native_sources(as_written(spec, self.config, arch), candidate, self.config)
            ):
                continue  # the execution will stop on these findings; no build needed
            _, record = self._build_extension(spec, prepared, arch, candidate)
            builds.append(record)
        return builds

    def check_compiles(self, candidate: str, arch: str | None = "9.0") -> CompileReport:
        """Static and native checks plus a compile of the object files only (nvcc/g++): no GPU, no CUDA torch.

        What a CPU machine can say about a CUDA candidate: whether it is a hack by its source and whether its
        sources compile for ``arch``. Linking and running need the target machine.
        """
        started = time.monotonic()
        try:
            parse_python(candidate)
        except SyntaxError as e:
            msg = f"candidate line {e.lineno}: SyntaxError: {e.msg}"
            return CompileReport(ok=False, errors=[msg], seconds=time.monotonic() - started)
        findings = check_program(candidate, self.config)
        specs, capture_error = self.capture(candidate)
        errors = [capture_error] if capture_error and not specs else []
        builds: list[ExtensionBuild] = []
        for spec in specs:
            try:
                prepared = prepare_build(spec, self.config, arch if self.config.backend == "cuda" else None)
            except SpecError as e:
                errors.append(str(e))
                continue
            findings += check_native_sources(as_written(spec, self.config, arch), candidate, self.config)
            outcome, record = self._build_extension(spec, prepared, arch, candidate, mode="objects")
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

    def measure_baseline(
        self,
        reference: str,
        *,
        cuda_visible_devices: str | None = None,
        gate: DeviceGate | None = None,
        timing_cores: frozenset[int] | None = None,
        worker: WorkerProcess | None = None,
    ) -> TaskBaseline:
        """Eager and torch.compile timings of a task, measured once and reused across its candidates.

        With a ``gate``, the worker's start, the reference and torch.compile's warm-up (seconds of code
        generation on the CPU, then one forward) hold no gate, so they never hold up another evaluation's
        timing; the warm-up's own GPU benchmarks hold it shared, one at a time (``compile_gate``); the timing
        holds the device alone, on the device's
        ``timing_cores`` when they are reserved. ``worker``: an already started (warm) worker to use, else a
        new one."""
        cfg = self.config
        started = time.monotonic()

        def on_message(msg: Message, chan: Channel) -> float:
            if msg.type == "device_wanted":  # one of torch.compile's GPU benchmarks, in its warm-up (compile_gate)
                waited = hold.to("shared")
                chan.send("go")
                return waited
            if msg.type in ("timed", "device_released"):  # the device is free again
                hold.to(None)
            if msg.type != "warm":
                return 0.0
            waited = hold.to("exclusive")
            if timing_cores and process.proc is not None:
                pin_process(process.proc.pid, timing_cores)
            chan.send("time")
            return waited

        with (
            worker or WorkerProcess(cfg, cuda_visible_devices=cuda_visible_devices) as process,
            GateHold(gate) as hold,
        ):
            setup = {"config": cfg.model_dump(mode="json"), "reference": reference, "candidate": "", "mode": "baseline"}
            try:
                messages = _conversation(
                    process,
                    setup,
                    cfg.run_timeout_s,
                    on_message=on_message,
                )
            except (Deadline, WorkerGone, ProtocolError, BrokenPipeError) as e:
                where = process.where() if isinstance(e, Deadline) else ""  # a hung worker: where it hung
                raise BaselineError(
                    f"baseline measurement failed ({type(e).__name__}): {process.describe_exit()}"
                    + (f"; the worker was at: {where}" if where else "")
                ) from None
        timing = next((m for m in messages if m.type == "timing"), None)
        if timing is None:
            error = next((m.body.get("message") for m in messages if m.type == "error"), "no timing")
            raise BaselineError(f"baseline measurement failed: {error}")
        compile_info = timing.body.get("compile", {})
        return TaskBaseline.from_rounds(
            timing.body["times_ms"],
            cfg.compile_mode,
            compile_warmup_s=compile_info.get("warmup_s"),
            compile_benchmarks=_admitted_benchmarks(compile_info),
            measure_s=round(time.monotonic() - started, 3),
            device_wait_s=round(hold.waited_s, 3),
            phases={k: round(float(v), 3) for k, v in timing.body.get("phases", {}).items()},
        )

    # ---- the worker conversation ------------------------------------------------------------------------------
    def _run_worker(
        self, run: _Run, reference: str, worker: WorkerProcess, hold: GateHold, compare: ThreadPoolExecutor
    ) -> None:
        cfg = self.config
        try:
            chan = worker.start()
            run.worker_pid = worker.proc.pid if worker.proc is not None else None
            # The worker touches the device only after setup. Behind waiting timings this wait can be long: it
            # is the evaluation's, so it is counted (and the run's deadline starts after it).
            run.durations.device_wait_s += hold.to("shared")
            deadline = time.monotonic() + cfg.run_timeout_s
            known = run.baseline is not None and run.baseline.compile is not None
            run.compile_here = cfg.compile_baseline and not known and run.await_baseline is None
            try:
                chan.send(
                    "setup",
                    {
                        "config": cfg.model_dump(mode="json"),
                        "reference": reference,
                        "candidate": run.candidate,
                        "known_reference": run.known_reference.meta if run.known_reference else None,
                        "sent_at": time.monotonic(),  # the system's monotonic clock, which the worker shares
                    },
                )
                run.stage = "setup"
                run.stage_started = time.monotonic()
                while True:
                    msg = chan.recv(deadline=deadline)
                    # The limit is on the worker's time: what this side spends on a message (builds, gate
                    # waits, comparing outputs on the host, slow under a loaded host) is not the candidate's.
                    handled = time.monotonic()
                    done = self._handle(run, chan, msg, hold, compare)
                    deadline += time.monotonic() - handled
                    if done:
                        return
            except Deadline:
                run.timed_out = True
                where = worker.where()
                run.error(
                    f"timeout: no progress within {cfg.run_timeout_s:.0f} s (stage: {run.stage})"
                    + (f"; the worker was at: {where}" if where else "")
                )
            except WorkerGone:
                description = worker.describe_exit()
                if run.stage == "setup":
                    run.infra_error = f"the worker failed to start: {description}"
                else:
                    run.runtime_failed = True
                    run.error(f"{run.stage}: {description}")
            except ProtocolError as e:
                run.runtime_failed = True
                run.add_finding(
                    "protocol.garbage", "protocol", f"the worker broke the message protocol: {e}", default="warn"
                )
                run.error(f"{run.stage}: the worker's messages became unreadable ({e})")
            except (BrokenPipeError, ConnectionResetError):
                run.runtime_failed = True
                run.error(f"{run.stage}: {worker.describe_exit()}")
        finally:
            # A worker that finished has synchronised and exits by itself: its teardown (the CUDA context going
            # away) holds no gate. One stopped midway may still have work queued, so it holds it until it is gone.
            finished = not (run.timed_out or run.runtime_failed or run.infra_error)
            if finished:
                hold.release()
            t0 = time.monotonic()
            worker.close()
            run.durations.teardown_s = time.monotonic() - t0
            hold.release()

    def _handle(self, run: _Run, chan: Channel, msg: Message, hold: GateHold, compare: ThreadPoolExecutor) -> bool:
        """Process one message; returns whether the evaluation is finished."""
        cfg = self.config
        body = msg.body
        phases = body.get("phases")
        if isinstance(phases, dict):  # diagnostic only: numbers, or nothing
            run.durations.worker.update(
                {str(k)[:40]: float(x) for k, x in list(phases.items())[:32] if isinstance(x, (int, float))}
            )
        if msg.type == "ready":
            run.env = body.get("env", {})
            run.stage = "reference"
        elif msg.type == "reference":
            if run.known_reference is not None:  # the worker drew the inputs only
                run.ref_meta = run.known_reference.meta
                run.ref_values = run.known_reference.values
                run.task_flags = list(run.known_reference.task_flags)
            else:
                run.ref_meta = body["trials"]
                run.ref_values = unpack_tensors(msg)
                shipped = [
                    v
                    for m, v in zip(run.ref_meta, run.ref_values, strict=True)
                    if m["distribution"] == "task" and not m.get("on_device")
                ]
                # Kept-on-device references are checked for degeneracy by the worker, on a subsample (advisory).
                run.task_flags = (
                    degenerate_task_flags(shipped, cfg) if shipped else list(body.get("kept_task_flags", []))
                )
                if run.reference_key is not None:
                    self.reference_cache.put(
                        run.reference_key, KnownReference(run.ref_meta, run.ref_values, list(run.task_flags))
                    )
            run.durations.reference_s = run.close_stage()
            run.stage = "load"
            chan.send("load")
        elif msg.type == "build":
            started = time.monotonic()
            hold.to(None)  # the worker idles while we build: let timings proceed
            ok, reply = self._build(run, body)
            build_s = time.monotonic() - started
            run.durations.build_s += build_s
            waited = hold.to("shared") if ok else 0.0
            run.durations.device_wait_s += waited
            run.paused_s += build_s + waited
            chan.send("built", reply)
            return not ok
        elif msg.type == "loaded":
            self._integrity(run, body)
            if not run.builds:
                run.add_finding(
                    "runtime.no_custom_kernel",
                    "runtime",
                    "the candidate compiled no extension: nothing it runs is its own kernel",
                )
            run.durations.load_s = run.close_stage()
            run.stage = "correctness"
        elif msg.type == "next_trial":  # before a trial: a waiting timing goes first
            waited = hold.to("shared") if hold.mode is None else hold.yield_to_writers()
            run.durations.device_wait_s += waited
            run.paused_s += waited
            chan.send("go")
            return False
        elif msg.type == "sample_request":  # positions drawn now, after the candidate's output exists
            chan.send("sample", {"seed": secrets.randbits(62), "k": SPOT_CHECK_SAMPLES})
        elif msg.type == "trial":
            # The worker finished the trial's device work before sending it and waits for "go" before the next:
            # the device is not this evaluation's while its outputs are compared here.
            hold.to(None)
            self._trial(run, body, unpack_tensors(msg), compare)
        elif msg.type == "trials_done":
            run.compared()
            self._integrity(run, body)
            run.durations.correctness_s = run.close_stage()
            go = cfg.measure_performance and not run.has_hack() and run.trials and all(t.passed for t in run.trials)
            if not go:
                chan.send("stop")
                return True
            run.durations.device_wait_s += self._settle_baseline(run, hold)
            if run.compile_here:
                # torch.compile's warm-up is seconds of code generation on the CPU, then one forward: it holds no
                # gate (as a baseline lane's does), only its GPU benchmarks do, one at a time ("device_wanted").
                # In the timing's exclusive hold it kept the device from every other evaluation: 5-6 s for each
                # KernelBench L1 task timed beside its candidate on the H200.
                hold.to(None)
                run.stage = "compile"
                chan.send("compile")
                return False
            self._start_timing(run, chan, hold)
            return False
        elif msg.type == "device_wanted":  # one of torch.compile's GPU benchmarks, in its warm-up (compile_gate)
            if run.stage != "compile":
                raise ProtocolError(f"the device asked for a compile benchmark in stage {run.stage!r}")
            waited = hold.to("shared")
            run.durations.device_wait_s += waited
            run.paused_s += waited
            chan.send("go")
            return False
        elif msg.type == "device_released":
            if run.stage != "compile":
                raise ProtocolError(f"the device given back from a compile benchmark in stage {run.stage!r}")
            hold.to(None)
            return False
        elif msg.type == "compiled":
            hold.to(None)  # a benchmark's hold, should the warm-up have ended inside one
            run.durations.compile_s = run.close_stage()
            self._start_timing(run, chan, hold)
            return False
        elif msg.type == "timed":
            # The rounds are over: the device is free while the worker ships the checked rounds' outputs and we
            # check them on the host.
            hold.to(None)
            if run.timing_cores and run.worker_pid is not None:
                pin_process(run.worker_pid, available_cores())
        elif msg.type == "timing":
            self._timing(run, body, unpack_tensors(msg))
            run.durations.timing_wall_s = run.close_stage()
            if not (cfg.backend == "cuda" and cfg.profile_kernels):
                return False
            # The profile is one forward: it needs the device, not the device alone.
            waited = hold.to("shared")
            run.durations.device_wait_s += waited
            run.stage = "profile"
            run.stage_started = time.monotonic()
            chan.send("profile")
            return False
        elif msg.type == "kernels":
            self._kernels(run, body)
            run.durations.profile_s = run.close_stage()
        elif msg.type == "done":
            self._audit(run, body)
            return True
        elif msg.type == "error":
            self._audit(run, body)
            stage = body.get("stage", run.stage)
            message = str(body.get("message", "unknown error"))
            if body.get("task_error"):
                run.infra_error = f"task error ({stage}): {message}"
            elif body.get("infra"):
                run.infra_error = f"worker setup failed: {message}"
            else:
                run.runtime_failed = True
                run.error(f"{stage}: {message}")
            return True
        else:
            raise ProtocolError(f"unexpected message {msg.type!r}")
        return False

    def _start_timing(self, run: _Run, chan: Channel, hold: GateHold) -> None:
        """Take the device alone (on its reserved cores) and start the timed rounds."""
        run.durations.device_wait_s += hold.to("exclusive")
        if run.timing_cores and run.worker_pid is not None:
            pin_process(run.worker_pid, run.timing_cores)
        run.stage = "timing"
        run.stage_started = time.monotonic()
        chan.send("time")

    def _build(self, run: _Run, body: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        cfg = self.config
        if "spec_error" in body:
            run.compile_failed = True
            run.compile_log = str(body["spec_error"])
            run.error(f"build: {body['spec_error']}")
            return False, {"ok": False}
        try:
            spec = ExtensionSpec.model_validate(body["spec"])
            arch = cfg.arch or run.env.get("arch") if cfg.backend == "cuda" else None
            prepared = prepare_build(spec, cfg, arch)
        except (SpecError, ValueError) as e:
            run.compile_failed = True
            run.compile_log = str(e)
            run.error(f"build: {e}")
            return False, {"ok": False}
        for f in check_native_sources(as_written(spec, cfg, arch), run.candidate, cfg):
            run.findings.append(f)
        run.kernel_names |= kernel_names(prepared.cuda_sources if prepared.with_cuda else prepared.cpp_sources)
        if run.has_hack() and cfg.policy.stop_on_static_error:
            return False, {"ok": False}
        outcome, record = self._build_extension(spec, prepared, arch, run.candidate)
        run.builds.append(record)
        if outcome.infra_error:
            run.infra_error = f"build infrastructure: {outcome.infra_error}"
            return False, {"ok": False}
        if outcome.timed_out:
            run.timed_out = True
            run.error(f"build: {outcome.digest}")
            return False, {"ok": False}
        if not outcome.ok:
            run.compile_failed = True
            run.compile_log = outcome.digest
            run.error(f"build of {spec.name!r} failed:\n{outcome.digest}")
            return False, {"ok": False}
        return True, {"ok": True, "library": str(outcome.library_path), "module_name": outcome.module_name}

    def _kernels(self, run: _Run, body: dict[str, Any]) -> None:
        cfg = self.config
        if "error" in body:
            run.error(f"kernel profile failed: {body['error']}")
            return
        events = body.get("kernels", [])
        run.kernels, run.own_share = attribute_kernels(events, run.kernel_names)
        share = run.own_share or 0.0
        if cfg.policy.min_own_kernel_share > 0 and share < cfg.policy.min_own_kernel_share:
            run.add_finding(
                "kernels.low_own_share",
                "kernels",
                f"only {100 * share:.1f}% of the forward's GPU time is in the candidate's own kernels "
                f"(policy minimum {100 * cfg.policy.min_own_kernel_share:.0f}%)",
            )
        library = [k for k in run.kernels if k.owner == "library"]
        if library:
            allowed = bool(cfg.policy.allowed_libraries or cfg.policy.allowed_aten_ops)
            run.add_finding(
                "kernels.library_kernels",
                "kernels",
                "library kernels (cuBLAS/cuDNN/CUTLASS) ran during the candidate's forward"
                + ("" if allowed else ", and the policy allows no library"),
                default="warn" if allowed else "error",
                evidence=", ".join(k.name[:80] for k in library[:5]),
            )
        current = int(body.get("current_stream", -1))
        others = side_streams(events, current) if current >= 0 else set()
        if others:
            run.add_finding(
                "kernels.side_stream",
                "kernels",
                "kernels ran on a stream other than the current one (work hidden from stream timing)",
                evidence=f"current stream {current}, others {sorted(others)}",
            )

    def _integrity(self, run: _Run, body: dict[str, Any]) -> None:
        for change in body.get("integrity", []):
            if change not in run.seen_integrity:
                run.seen_integrity.add(change)
                run.add_finding(
                    "protocol.tampering", "protocol", f"in-process state changed: {change}", evidence=change
                )
        self._audit(run, body)

    def _audit(self, run: _Run, body: dict[str, Any]) -> None:
        for what in body.get("audit", []):
            if what not in run.seen_audit:
                run.seen_audit.add(what)
                run.add_finding(
                    "runtime.forbidden_operation", "runtime", f"the candidate attempted {what}", evidence=what
                )

    def _trial(self, run: _Run, body: dict[str, Any], values: list[Any], compare: ThreadPoolExecutor) -> None:
        cfg = self.config
        index = int(body["index"])
        ref = run.ref_meta[index]
        first = not run.trials and run.comparing is None  # the first trial to arrive: its ops are checked
        run.compared()  # one comparison at a time: two trials' outputs on the host at most
        if ref.get("on_device"):
            run.trials.append(self._kept_trial(run, body, values, ref, index))
        else:
            # Compared beside the worker's next trial: it waits for our "go", not for this comparison (for 256 MB
            # outputs on the host, about as long as the trial's own device work, transfer included).
            run.comparing = compare.submit(
                compare_outputs,
                body["outputs"],
                values,
                ref["outputs"],
                run.ref_values[index],
                cfg,
                index=index,
                distribution=ref["distribution"],
                seed=ref["seed"],
            )
        for op, n in body.get("ops", {}).items():
            run.aten_ops[op] = max(run.aten_ops.get(op, 0), int(n))
        if first:
            bad = forbidden_ops(body.get("ops", {}), cfg.policy.allowed_aten_ops)
            if bad:
                run.add_finding(
                    "runtime.aten_fallback",
                    "runtime",
                    f"the forward ran PyTorch compute ops: {', '.join(sorted(bad))}",
                    evidence=", ".join(f"aten::{k} x{v}" for k, v in bad.items()),
                )
            downcasts = body.get("downcasts", {})
            if downcasts:
                run.add_finding(
                    "runtime.precision_downgrade",
                    "runtime",
                    "the forward converted float tensors to lower precision",
                    evidence=", ".join(f"{k} x{v}" for k, v in downcasts.items()),
                )
            tensors_out = sum(1 for o in body["outputs"] if o["kind"] == "tensor")
            if tensors_out and not body.get("ops"):
                run.add_finding(
                    "runtime.no_dispatch",
                    "runtime",
                    "the forward returned tensors without any ATen op: its outputs were made ahead of "
                    "time or the dispatcher was bypassed",
                )
        if body.get("guard_escaped"):
            run.add_finding(
                "runtime.guard_escaped", "runtime", f"the op recorder was tampered with: {body['guard_escaped']}"
            )
        if body.get("inputs_intact") is False:
            run.add_finding(
                "protocol.tampering",
                "protocol",
                f"trial {index}: the inputs drawn again for the candidate differ from the reference's "
                "(the random generator or get_inputs was tampered with)",
            )
        if body.get("mutated_inputs") and not ref.get("mutates_inputs"):
            run.add_finding(
                "runtime.input_mutation",
                "runtime",
                f"trial {index}: the candidate wrote into its inputs (the reference does not)",
            )
        if any(body.get("aliases_input", [])):
            run.add_finding(
                "runtime.output_aliases_input", "runtime", f"trial {index}: an output shares memory with an input"
            )
        if any(body.get("aliases_parameter", [])):
            run.add_finding(
                "runtime.output_aliases_parameter",
                "runtime",
                f"trial {index}: an output shares memory with a parameter or buffer (a stored answer)",
            )
        if any(o["kind"] == "tensor" and not o["plain"] for o in body["outputs"]):
            run.add_finding(
                "runtime.output_not_plain_tensor",
                "runtime",
                f"trial {index}: an output is not a plain torch.Tensor",
                evidence=", ".join(o["type"] for o in body["outputs"] if o["kind"] == "tensor"),
            )
        run.findings = _dedupe_findings(run.findings)

    def _kept_trial(
        self, run: _Run, body: dict[str, Any], values: list[Any], ref: dict[str, Any], index: int
    ) -> TrialResult:
        """A trial compared in the worker (its reference was too large to ship): take the worker's result
        only if the reference output it compared against is the one from before the candidate loaded (kept, or
        computed again after the candidate's trial) and our own check of the sampled positions agrees."""
        recomputed = bool(ref.get("recomputed"))  # from the reference's own report, before the candidate loaded
        again: list[Any] = []  # the output computed again, at the positions sampled before the candidate loaded
        if body.get("reference_resampled"):
            n = len(ref["outputs"])
            if not recomputed or not n or len(values) < n:
                raise ProtocolError(f"trial {index}: a resample of a reference that was not computed again")
            values, again = values[:-n], values[-n:]
        if "device_result" not in body or len(values) % 2:
            raise ProtocolError(f"trial {index}: a kept-reference trial without its result or sample")
        try:
            result = TrialResult.model_validate(body["device_result"])
        except ValueError as e:
            raise ProtocolError(f"trial {index}: unreadable device result ({e})") from None
        result = result.model_copy(
            update={
                "index": index,
                "distribution": ref["distribution"],
                "seed": ref["seed"],
                "compared_in": "worker",
                "reference_recomputed": recomputed,
            }
        )
        if not body.get("reference_intact", False):
            agrees = self._agrees_with_before(run.ref_values[index], again) if again else None
            if agrees is None:
                what = (
                    "computed again after the candidate's trial differs from the one before it loaded (the "
                    "reference, its parameters or its inputs were tampered with)"
                    if recomputed
                    else "kept on the device changed while the candidate ran"
                )
                run.add_finding("protocol.tampering", "protocol", f"trial {index}: the reference output {what}")
                return result.model_copy(update={"passed": False, "error": "the reference output was changed"})
            run.add_finding(
                "protocol.reference_not_reproduced",
                "protocol",
                f"trial {index}: the reference output computed again after the candidate's trial has other bits "
                f"than before it loaded, but agrees within tolerance at {agrees} positions sampled then (another "
                "algorithm under other memory, e.g. cuDNN's when its workspace does not fit)",
                default="warn",
            )
        half = len(values) // 2
        return self._spot_checked(run, result, values[:half], values[half:], f"trial {index}")

    def _agrees_with_before(self, before: list[Any], again: list[Any]) -> int | None:
        """Positions checked if a reference output computed again agrees, within tolerance, with the sample of it
        sent before the candidate loaded; None if it does not (or there is nothing to check)."""
        pairs = [(a, b) for a, b in zip(again, before, strict=False) if isinstance(b, torch.Tensor)]
        if len(again) != len(before) or not pairs:
            return None
        loose = self.config.model_copy(update={"atol_scale": None})
        for a, b in pairs:
            if not isinstance(a, torch.Tensor) or a.shape != b.shape:
                return None
            if not compare_host_outputs([a], [b], loose, index=-1, distribution="task", seed=0).passed:
                return None
        return sum(b.numel() for _, b in pairs)

    def _spot_checked(self, run: _Run, result: TrialResult, cand: list[Any], ref: list[Any], what: str) -> TrialResult:
        """The worker's comparison, unless the evaluator's own one of the sampled positions contradicts it."""
        if len(cand) != len(ref):
            raise ProtocolError(f"{what}: a spot-check sample without its pairs")
        if result.passed and result.numel and not any(isinstance(c, torch.Tensor) for c in cand):
            raise ProtocolError(f"{what}: a passing comparison in the worker came without its spot-check sample")
        loose = self.config.model_copy(update={"atol_scale": None})  # the full check's RMS cap only tightens
        for i, (c, r) in enumerate(zip(cand, ref, strict=True)):
            if not (isinstance(c, torch.Tensor) and isinstance(r, torch.Tensor)):
                continue
            spot = compare_host_outputs([c], [r], loose, index=result.index, distribution=result.distribution, seed=0)
            if not spot.passed and result.passed:
                run.add_finding(
                    "protocol.comparison_mismatch",
                    "protocol",
                    f"{what}, output {i}: the worker's comparison passed but the evaluator's spot check of "
                    f"{c.numel()} sampled positions failed ({spot.error})",
                )
                return result.model_copy(update={"passed": False, "error": f"spot check failed: {spot.error}"})
        return result

    def _settle_baseline(self, run: _Run, hold: GateHold) -> float:
        """Wait, holding no gate (its timing needs the device alone), for a baseline still being measured."""
        if run.await_baseline is None:
            return 0.0
        hold.to(None)
        started = time.monotonic()
        run.baseline, run.await_baseline = run.await_baseline(), None
        # None: not measured (it failed, or was deferred to the task's candidates): the worker compiles and times
        # torch.compile itself, as it would have had it been told so at setup.
        run.compile_here = self.config.compile_baseline and (run.baseline is None or run.baseline.compile is None)
        return time.monotonic() - started

    def _timing(self, run: _Run, body: dict[str, Any], checked: list[Any]) -> None:
        cfg = self.config
        baseline = run.baseline
        times = body["times_ms"]
        compile_info = body.get("compile", {})
        probe = body.get("host_probe") or {}
        timings = Timings(
            timer="host_sync" if cfg.backend == "cuda" else "host",
            candidate=summarize(times["candidate"]),
            eager=summarize(times["eager"]),
            l2_flush=cfg.backend == "cuda" and cfg.l2_flush,
            min_timing_s=cfg.min_timing_s,
            cpu_cores=body.get("cpu_cores"),
            host_launch_us=probe.get("launch_us"),
            host_python_us=probe.get("python_us"),
            rounds_ms={k: times[k] for k in ("candidate", "eager", "compile") if k in times},
        )
        if "compile" in times:
            timings.compile = summarize(times["compile"])
            timings.compile_mode = cfg.compile_mode
            timings.compile_warmup_s = compile_info.get("warmup_s")
            timings.compile_benchmarks = _admitted_benchmarks(compile_info)
        elif baseline is not None and baseline.compile is not None and cfg.compile_baseline:
            timings.compile = baseline.compile
            timings.compile_mode = baseline.compile_mode
            timings.compile_warmup_s = baseline.compile_warmup_s
            timings.compile_benchmarks = baseline.compile_benchmarks
            timings.baseline_source = "reused"
        if baseline is not None and baseline.eager.median_ms > 0:
            timings.eager_drift = timings.eager.median_ms / baseline.eager.median_ms  # type: ignore[union-attr]
        if compile_info.get("error"):
            run.error(f"torch.compile baseline failed (speedup over compile not measured): {compile_info['error']}")
        run.timings = timings
        run.durations.timing_s = sum(sum(v) for v in times.values()) / 1000.0
        for meta, (eager_out, cand_out) in zip(body.get("checked", []), checked, strict=False):
            if "device_result" in meta:  # too large to copy while timing: compared in the worker, spot-checked
                try:
                    result = TrialResult.model_validate(meta["device_result"])
                except ValueError as e:
                    raise ProtocolError(f"unreadable timed-round result ({e})") from None
                result = result.model_copy(
                    update={
                        "index": len(run.trials),
                        "distribution": "timed",
                        "seed": int(meta["seed"]),
                        "compared_in": "worker",
                    }
                )
                result = self._spot_checked(run, result, cand_out, eager_out, f"timed round {meta['round']}")
            else:
                result = compare_host_outputs(
                    cand_out, eager_out, cfg, index=len(run.trials), distribution="timed", seed=int(meta["seed"])
                )
            run.trials.append(result)
            if not result.passed:
                run.add_finding(
                    "protocol.timed_output_mismatch",
                    "protocol",
                    f"timed round {meta['round']}: the candidate's output was wrong ({result.error}) although "
                    "it passed the correctness trials",
                )
        self._integrity(run, body)

    # ---- the Verdict ------------------------------------------------------------------------------------------
    def _verdict(self, run: _Run, task_id: str | None) -> Verdict:
        if run.infra_error:
            status = "runtime_error"
        elif run.has_hack():
            status = "hack"
        elif run.compile_failed:
            status = "compile_error"
        elif run.timed_out:
            status = "timeout"
        elif run.runtime_failed:
            status = "runtime_error"
        elif not run.trials or not all(t.passed for t in run.trials):
            status = "incorrect"
            failed = [t for t in run.trials if not t.passed]
            if failed:
                run.error(f"trial {failed[0].index} ({failed[0].distribution} inputs): {failed[0].error}")
        else:
            status = "correct"
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
            status=status,  # type: ignore[arg-type]
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
            environment=Environment(
                backend=self.config.backend,
                torch=str(env.get("torch", "unknown")),
                python=sys.version.split()[0],
                device=str(env.get("device", "unknown")),
                arch=env.get("arch"),
                cuda=env.get("cuda"),
                host=platform.node(),
                rubric_rl=__version__,
            ),
        )


def as_written(spec: ExtensionSpec, config: SandboxConfig, arch: str | None) -> PreparedBuild:
    """The build of the candidate's own sources (no split): what native checks read, so lines map back."""
    return prepare_build(spec, config, arch, split_sources=False)


def _admitted_benchmarks(compile_info: dict[str, Any]) -> int | None:
    """How many GPU benchmarks the worker's compile warm-up had admitted (None: its torch offered no route)."""
    benchmarks = compile_info.get("benchmarks") or {}
    if benchmarks.get("route", "none") == "none":
        return None
    return int(benchmarks.get("admissions", 0))


def _conversation(
    worker: WorkerProcess,
    setup: dict[str, Any],
    timeout_s: float,
    *,
    on_message: Callable[[Message, Channel], float] | None = None,
) -> list[Message]:
    """Send ``setup`` and collect messages until ``done``/``captured``/``error`` (for the short modes).

    ``on_message`` sees each message first and may answer it; what it returns is added to the deadline
    (time it spent waiting is not the worker's)."""
    chan = worker.start()
    # The system's monotonic clock, which the worker shares: it reports how long its start kept us waiting.
    chan.send("setup", {**setup, "sent_at": time.monotonic()})
    deadline = time.monotonic() + timeout_s
    messages = []
    while True:
        msg = chan.recv(deadline=deadline)
        messages.append(msg)
        if msg.type in ("done", "captured", "error"):
            return messages
        if on_message is not None:
            deadline += on_message(msg, chan)


def _dedupe_findings(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.rule, f.message.split(":", 1)[-1] if f.message.startswith("trial ") else f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def evaluate(
    reference: str, candidate: str, config: SandboxConfig | None = None, *, task_id: str | None = None
) -> Verdict:
    """Evaluate one candidate with a fresh evaluator (convenience for scripts and tests)."""
    return Evaluator(config or SandboxConfig()).evaluate(reference, candidate, task_id=task_id)
