"""Everything the evaluator learns about one candidate while its worker runs: what the Verdict is made of."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.baseline import TaskBaseline
from rubric_rl.sandbox.measure.reference_cache import KnownReference
from rubric_rl.sandbox.run.messages import ReferenceTrial, WorkerEnv
from rubric_rl.sandbox.run.protocol import ProtocolError
from rubric_rl.sandbox.verdict import (
    Diagnostics,
    ExtensionBuild,
    Finding,
    KernelLaunch,
    StageDurations,
    Timings,
    TrialResult,
)

MAX_ERRORS = 10


@dataclass
class RunState:
    """One candidate's evaluation so far: its findings, trials, builds, timings and how it ended."""

    config: SandboxConfig
    candidate: str
    stage: str = "start"
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    trials: list[TrialResult] = field(default_factory=list)
    builds: list[ExtensionBuild] = field(default_factory=list)
    kernel_names: set[str] = field(default_factory=set)
    aten_ops: dict[str, int] = field(default_factory=dict)
    ref_meta: list[ReferenceTrial] = field(default_factory=list)
    ref_values: list[Any] = field(default_factory=list)
    task_flags: list[str] = field(default_factory=list)
    reference_key: str | None = None
    known_reference: KnownReference | None = None
    reference_trial_s: float | None = None  # the reference's own seconds per trial, measured by the worker
    reference_model_s: float | None = None  # the worker's seconds importing the reference and building its model
    timings: Timings | None = None
    kernels: list[KernelLaunch] = field(default_factory=list)
    own_share: float | None = None
    paused_s: float = 0.0  # of the current stage, spent on our builds and gate waits (counted apart)
    env: WorkerEnv | None = None
    compile_log: str | None = None
    compile_failed: bool = False
    timed_out: bool = False
    runtime_failed: bool = False
    infra_error: str | None = None
    durations: StageDurations = field(default_factory=StageDurations)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    seen_integrity: set[str] = field(default_factory=set)
    seen_audit: set[str] = field(default_factory=set)
    stage_started: float = 0.0
    baseline: TaskBaseline | None = None
    await_baseline: Callable[[], TaskBaseline | None] | None = None
    compile_here: bool = False  # no task baseline with a compile timing to reuse: the worker times torch.compile
    comparing: Future[TrialResult] | None = None  # the last shipped trial's comparison, running beside the worker
    ncu: bool = False  # the worker runs under Nsight Compute: no timing, one profiled forward after the trials

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

    def heard_after(self, silence_s: float) -> None:
        """A message came after ``silence_s`` of the worker's time without one, in the current stage."""
        longest = self.diagnostics.longest_silence_s
        longest[self.stage] = round(max(longest.get(self.stage, 0.0), silence_s), 4)

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

    def reference_trial(self, index: int) -> ReferenceTrial:
        """The reference's record of trial ``index``; a trial the reference did not run breaks the protocol."""
        if not 0 <= index < len(self.ref_meta) or index >= len(self.ref_values):
            raise ProtocolError(f"message 'trial': field 'index': no reference trial {index}")
        return self.ref_meta[index]
