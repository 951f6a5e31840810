"""A task's baseline: eager and torch.compile timed once per task and device, then reused by its candidates.

A task's torch.compile warm-up alone takes 0.4-9 s on Level 2/3 programs, so it is not paid per candidate. Here:
what a baseline is (``TaskBaseline``), how it is measured (``measure_baseline``, in a worker of its own), and how a
candidate's timing uses it (``assemble_timings``: its compile time reused, scaled by how eager drifted since).
The executors keep baselines by task (``executors.baselines``) and decide which is measured next
(``executors.baseline_lanes``).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.timing import summarize
from rubric_rl.sandbox.run.device_gate import GateHold
from rubric_rl.sandbox.run.exchange import DeviceTurns, exchange
from rubric_rl.sandbox.run.messages import Body, DeviceReleased, DeviceWanted, Error, Setup, Timed, Timing, Warm
from rubric_rl.sandbox.run.placement import Placement
from rubric_rl.sandbox.run.process import WorkerProcess
from rubric_rl.sandbox.run.protocol import Channel, Deadline, ProtocolError, WorkerGone
from rubric_rl.sandbox.verdict import Timings, TimingStats


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


def measure_baseline(reference: str, config: SandboxConfig, *, placement: Placement | None = None) -> TaskBaseline:
    """Eager and torch.compile timings of a task, measured once and reused across its candidates.

    With a gate, the worker's start, the reference and torch.compile's warm-up (seconds of code generation on the
    CPU, then one forward) hold no gate, so they never hold up another evaluation's timing; the warm-up's own GPU
    benchmarks hold it shared, one at a time (``compile_gate``); the timing holds the device alone, on the
    device's timing cores when they are reserved. The placement's baseline and ``alone`` do not apply."""
    placement = placement or Placement()
    started = time.monotonic()
    process = placement.worker or WorkerProcess(config, cuda_visible_devices=placement.cuda_visible_devices)
    with process, GateHold(placement.gate) as hold:
        turns = DeviceTurns(hold, placement.timing_cores)

        def on_message(body: Body, chan: Channel) -> float:
            if isinstance(body, DeviceWanted):  # one of torch.compile's GPU benchmarks, in its warm-up
                return turns.benchmark(chan)
            if isinstance(body, DeviceReleased):
                turns.benchmark_over()
            elif isinstance(body, Timed):  # the device is free again
                turns.rounds_over()
            elif isinstance(body, Warm):
                turns.pid = process.proc.pid if process.proc is not None else None
                return turns.alone(chan)
            return 0.0

        setup = Setup(
            config=config,
            reference=reference,
            candidate="",
            mode="baseline",
            memory_fraction=placement.memory_fraction_of(config),
        )
        try:
            bodies = exchange(process, setup, placement.run_timeout_of(config), on_message=on_message)
        except (Deadline, WorkerGone, ProtocolError, BrokenPipeError) as e:
            where = process.where() if isinstance(e, Deadline) else ""  # a hung worker: where it hung
            detail = f" ({e})" if isinstance(e, ProtocolError) else ""
            raise BaselineError(
                f"baseline measurement failed ({type(e).__name__}{detail}): {process.describe_exit()}"
                + (f"; the worker was at: {where}" if where else "")
            ) from None
    timing = next((b for b in bodies if isinstance(b, Timing)), None)
    if timing is None:
        error = next((b.message for b in bodies if isinstance(b, Error)), "no timing")
        raise BaselineError(f"baseline measurement failed: {error}")
    return TaskBaseline.from_rounds(
        timing.times_ms.by_model(),
        config.timing.compile_mode,
        compile_warmup_s=timing.compile.warmup_s,
        compile_benchmarks=timing.compile.admitted_benchmarks(),
        measure_s=round(time.monotonic() - started, 3),
        device_wait_s=round(hold.waited_s, 3),
        phases={k: round(v, 3) for k, v in timing.phases.items()},
    )


def assemble_timings(config: SandboxConfig, body: Timing, baseline: TaskBaseline | None) -> Timings:
    """A candidate's Timings from its worker's timed rounds: torch.compile's timing its own (timed beside it) or
    the task baseline's (reused), and eager's drift since the baseline was measured."""
    times = body.times_ms
    if times.candidate is None:
        raise ProtocolError("message 'timing': field 'times_ms.candidate' is missing")
    timings = Timings(
        timer="host_sync" if config.backend == "cuda" else "host",
        candidate=summarize(times.candidate),
        eager=summarize(times.eager),
        l2_flush=config.backend == "cuda" and config.timing.l2_flush,
        rounds_ms=times.by_model(),
    )
    if times.compile is not None:
        timings.compile = summarize(times.compile)
        timings.compile_mode = config.timing.compile_mode
        timings.compile_warmup_s = body.compile.warmup_s
        timings.compile_benchmarks = body.compile.admitted_benchmarks()
    elif baseline is not None and baseline.compile is not None and config.timing.compile_baseline:
        timings.compile = baseline.compile
        timings.compile_mode = baseline.compile_mode
        timings.compile_warmup_s = baseline.compile_warmup_s
        timings.compile_benchmarks = baseline.compile_benchmarks
        timings.baseline_source = "reused"
    if baseline is not None and baseline.eager.median_ms > 0:
        timings.eager_drift = timings.eager.median_ms / baseline.eager.median_ms  # type: ignore[union-attr]
    return timings
