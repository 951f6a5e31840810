"""The evaluator's side of a candidate's worker conversation, message by message.

The worker leads: it sends what it did (its reference's trials, a build request, its load, each trial, its timed
rounds, its profile) and waits where it needs an answer (a build, the device, a sample's positions, the next
phase). Each message is validated (``messages``) and handled here, in the order a worker sends them: the record
goes into the run's state, the rules into findings, and the device gate moves with the phase (shared for the
reference, the correctness trials and the profile; alone for the timed rounds; not held while we build, compare
or wait for a baseline). Everything the worker may do wrong on the pipe (die, hang, send garbage or a message
out of place) ends in the run's state, never as an exception out of here.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rubric_rl.sandbox.build.builder import Builder
from rubric_rl.sandbox.build.candidate import as_written, build_extension
from rubric_rl.sandbox.build.extension import SpecError, prepare_build
from rubric_rl.sandbox.checks.native import check_native_sources, kernel_names
from rubric_rl.sandbox.checks.runtime import check_audit, check_integrity, check_profile, check_trial
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.baseline import assemble_timings
from rubric_rl.sandbox.measure.comparison import check_timed_rounds, compare_trial, draw_sample, matches_records
from rubric_rl.sandbox.measure.correctness import degenerate_task_flags
from rubric_rl.sandbox.measure.reference_cache import KnownReference, ReferenceCache
from rubric_rl.sandbox.run.device_gate import GateHold
from rubric_rl.sandbox.run.exchange import DeviceTurns
from rubric_rl.sandbox.run.messages import (
    FROM_WORKER,
    Body,
    Build,
    Built,
    Compile,
    Compiled,
    DeviceReleased,
    DeviceWanted,
    Done,
    Error,
    Go,
    Kernels,
    Load,
    Loaded,
    NextTrial,
    Profile,
    Ready,
    Reference,
    SampleRequest,
    Setup,
    Stop,
    Timed,
    Timing,
    Trial,
    TrialsDone,
    parse_body,
    send,
)
from rubric_rl.sandbox.run.placement import Placement
from rubric_rl.sandbox.run.process import WorkerProcess
from rubric_rl.sandbox.run.protocol import Channel, Deadline, Message, ProtocolError, WorkerGone, unpack_tensors
from rubric_rl.sandbox.run.state import RunState


@dataclass(frozen=True)
class StageLimit:
    s: float
    why: str


def stage_limit(run: RunState, config: SandboxConfig, ceiling_s: float) -> StageLimit | None:
    """How long the worker may go without a message in the current stage, from the reference's own time: loading
    the candidate gets ``stage_timeout_factor`` times what importing the reference and building its model took, a
    correctness trial that many reference trials, the timed rounds that many per timed call (warm-ups included,
    three models); never less than the floor, never more than ``ceiling_s``. None: the run's limit alone (stages
    the reference has no counterpart of, or no reference time measured)."""
    limits = config.limits
    if run.stage == "load":
        if run.reference_model_s is None:
            return None
        measured, calls = run.reference_model_s, 1
        what = f"{measured:.1f} s to import the reference and build its model"
    elif run.stage in ("correctness", "timing") and run.reference_trial_s is not None:
        measured = run.reference_trial_s
        calls = 1 if run.stage == "correctness" else 3 * (config.timing.trials + config.timing.warmup_trials)
        what = f"{measured * 1e3:.1f} ms a trial"
    else:
        return None
    s = min(ceiling_s, max(limits.stage_timeout_floor_s, limits.stage_timeout_factor * measured * calls))
    why = (
        f"{s:.0f} s (derived from the reference's {what}: x{limits.stage_timeout_factor:g}"
        f"{f' x {calls} calls' if calls > 1 else ''}, at least {limits.stage_timeout_floor_s:g} s)"
    )
    return StageLimit(s, why)


class Conversation:
    """One candidate's worker, from its setup to its last message."""

    def __init__(
        self,
        run: RunState,
        placement: Placement,
        builder: Builder,
        reference_cache: ReferenceCache,
        compare: ThreadPoolExecutor,
    ) -> None:
        self.run = run
        self.config = run.config
        self.placement = placement
        self.builder = builder
        self.reference_cache = reference_cache
        self.compare = compare

    def converse(self, reference: str, worker: WorkerProcess) -> None:
        """Run the worker to its end; how it ended (done, error, timeout, crash, garbage) is in the run's state."""
        run, cfg, placement = self.run, self.config, self.placement
        timeout_s = placement.run_timeout_of(cfg)
        hold = GateHold(placement.gate, alone=placement.alone)
        turns = DeviceTurns(hold, placement.timing_cores)
        try:
            chan = worker.start()
            turns.pid = worker.proc.pid if worker.proc is not None else None
            # The worker touches the device only after setup. Behind waiting timings this wait can be long: it is
            # the evaluation's, so it is counted (and the run's deadline starts after it).
            run.durations.device_wait_s += hold.to("shared")
            deadline = time.monotonic() + timeout_s
            known = run.baseline is not None and run.baseline.compile is not None
            run.compile_here = cfg.timing.compile_baseline and not known and run.await_baseline is None
            try:
                send(chan, self._setup(reference))
                run.stage = "setup"
                run.stage_started = time.monotonic()
                limit, by_stage = None, False
                while True:
                    limit = stage_limit(run, cfg, timeout_s)
                    waiting = time.monotonic()
                    stage_deadline = waiting + limit.s if limit is not None else deadline
                    by_stage = stage_deadline < deadline
                    msg = chan.recv(deadline=min(deadline, stage_deadline))
                    # The limit is on the worker's time: what this side spends on a message (builds, gate waits,
                    # comparing outputs on the host, slow under a loaded host) is not the candidate's.
                    handled = time.monotonic()
                    run.heard_after(handled - waiting)
                    done = self._handle(parse_body(msg, FROM_WORKER), msg, chan, turns)
                    deadline += time.monotonic() - handled
                    if done:
                        return
            except Deadline:
                run.timed_out = True
                where = worker.where()
                within = limit.why if limit is not None and by_stage else f"{timeout_s:.0f} s"
                run.error(
                    f"timeout: no progress within {within} (stage: {run.stage})"
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
            if finished:
                worker.settle()
            worker.close()
            run.durations.teardown_s = time.monotonic() - t0
            hold.release()

    def _setup(self, reference: str) -> Setup:
        run = self.run
        return Setup(
            config=self.config,
            reference=reference,
            candidate=run.candidate,
            memory_fraction=self.placement.memory_fraction_of(self.config),
            known_reference=run.known_reference.meta if run.known_reference else None,
            sent_at=time.monotonic(),  # the system's monotonic clock, which the worker shares
            ncu=run.ncu,
        )

    def _handle(self, body: Body, msg: Message, chan: Channel, turns: DeviceTurns) -> bool:
        """Process one message; returns whether the evaluation is finished."""
        run, hold = self.run, turns.hold
        phases = getattr(body, "phases", None)
        if phases:  # diagnostic only
            run.diagnostics.worker_stages.update({str(k)[:40]: x for k, x in list(phases.items())[:32]})
        match body:
            case Ready():
                run.env = body.env
                run.stage = "reference"
            case Reference():
                self._reference(body, msg)
                send(chan, Load())
            case Build():
                return self._build(body, chan, hold)
            case Loaded():
                self._loaded(body)
            case NextTrial():  # before a trial: a waiting timing goes first
                waited = hold.to("shared") if hold.mode is None else hold.yield_to_writers()
                run.durations.device_wait_s += waited
                run.paused_s += waited
                send(chan, Go())
            case SampleRequest():  # positions drawn now, after the candidate's output exists
                send(chan, draw_sample())
            case Trial():
                # The worker finished the trial's device work before sending it and waits for "go" before the next:
                # the device is not this evaluation's while its outputs are compared here.
                hold.to(None)
                self._trial(body, unpack_tensors(msg))
            case TrialsDone():
                return self._trials_done(body, chan, turns)
            case DeviceWanted():  # one of torch.compile's GPU benchmarks, in its warm-up (compile_gate)
                self._in_compile("asked for the device for a compile benchmark")
                waited = turns.benchmark(chan)
                run.durations.device_wait_s += waited
                run.paused_s += waited
            case DeviceReleased():
                self._in_compile("gave the device back from a compile benchmark")
                turns.benchmark_over()
            case Compiled():
                hold.to(None)  # a benchmark's hold, should the warm-up have ended inside one
                run.durations.compile_s = run.close_stage()
                self._start_timing(chan, turns)
            case Timed():
                # The rounds are over: the device is free while the worker ships the checked rounds' outputs and we
                # check them on the host.
                turns.rounds_over()
            case Timing():
                self._timing(body, unpack_tensors(msg), chan, hold)
            case Kernels():
                if not run.ncu:
                    check_profile(run, body)
                elif body.error is not None:  # ncu has the kernels; the forward it measured raised
                    run.runtime_failed = True
                    run.error(f"profile: {body.error}")
                run.durations.profile_s = run.close_stage()
            case Done():
                check_audit(run, body.audit)
                return True
            case Error():
                self._error(body)
                return True
            case _:
                raise ProtocolError(f"unexpected message {body.kind!r} while evaluating a candidate")
        return False

    def _in_compile(self, what: str) -> None:
        if self.run.stage != "compile":
            raise ProtocolError(f"the worker {what} in stage {self.run.stage!r}")

    def _reference(self, body: Reference, msg: Message) -> None:
        run, cfg = self.run, self.config
        run.reference_model_s = body.phases.get("reference_model_s")
        if run.known_reference is not None:  # the worker drew the inputs only
            run.ref_meta = run.known_reference.meta
            run.ref_values = run.known_reference.values
            run.task_flags = list(run.known_reference.task_flags)
            run.reference_trial_s = run.known_reference.trial_s
        else:
            if body.known:
                raise ProtocolError("message 'reference': field 'known': the evaluator sent no known reference")
            values = unpack_tensors(msg)
            if len(values) != len(body.trials) or not all(isinstance(v, list) for v in values):
                raise ProtocolError("message 'reference': the outputs do not match the trials")
            for trial, outputs in zip(body.trials, values, strict=True):
                if not (trial.on_device or trial.skipped or matches_records(trial.outputs, outputs)):
                    raise ProtocolError(
                        f"message 'reference': trial {trial.index}'s outputs do not match their records"
                    )
            run.ref_meta, run.ref_values = body.trials, values
            trials_s = body.phases.get("reference_trials_s")
            if trials_s is not None and body.trials:
                run.reference_trial_s = trials_s / len(body.trials)
            shipped = [
                v for m, v in zip(body.trials, values, strict=True) if m.distribution == "task" and not m.on_device
            ]
            # Kept-on-device references are checked for degeneracy by the worker, on a subsample (advisory).
            run.task_flags = degenerate_task_flags(shipped, cfg) if shipped else list(body.kept_task_flags)
            if run.reference_key is not None:
                self.reference_cache.put(
                    run.reference_key,
                    KnownReference(run.ref_meta, run.ref_values, list(run.task_flags), run.reference_trial_s),
                )
        run.durations.reference_s = run.close_stage()
        run.stage = "load"

    def _build(self, body: Build, chan: Channel, hold: GateHold) -> bool:
        """Build what the candidate's load_inline asked for, holding no gate (the worker idles meanwhile: timings
        may proceed); returns whether the evaluation is over (the build failed)."""
        run = self.run
        started = time.monotonic()
        hold.to(None)
        reply = self._built(body)
        build_s = time.monotonic() - started
        run.durations.build_s += build_s
        waited = hold.to("shared") if reply.ok else 0.0
        run.durations.device_wait_s += waited
        run.paused_s += build_s + waited
        send(chan, reply)
        return not reply.ok

    def _built(self, body: Build) -> Built:
        run, cfg = self.run, self.config
        if body.spec is None:
            if body.spec_error is None:
                raise ProtocolError("message 'build': neither field 'spec' nor field 'spec_error'")
            run.compile_failed = True
            run.compile_log = body.spec_error
            run.error(f"build: {body.spec_error}")
            return Built(ok=False)
        spec = body.spec
        try:
            arch = cfg.build.arch or (run.env.arch if run.env else None) if cfg.backend == "cuda" else None
            prepared = prepare_build(spec, cfg, arch)
        except (SpecError, ValueError) as e:
            run.compile_failed = True
            run.compile_log = str(e)
            run.error(f"build: {e}")
            return Built(ok=False)
        run.findings.extend(check_native_sources(as_written(spec, cfg, arch), run.candidate, cfg))
        run.kernel_names |= kernel_names(prepared.cuda_sources if prepared.with_cuda else prepared.cpp_sources)
        if run.has_hack() and cfg.policy.stop_on_static_error:
            return Built(ok=False)
        outcome, record = build_extension(self.builder, cfg, spec, prepared, arch, run.candidate)
        run.builds.append(record)
        if outcome.infra_error:
            run.infra_error = f"build infrastructure: {outcome.infra_error}"
            return Built(ok=False)
        if outcome.timed_out:
            run.timed_out = True
            run.error(f"build: {outcome.digest}")
            return Built(ok=False)
        if not outcome.ok:
            run.compile_failed = True
            run.compile_log = outcome.digest
            run.error(f"build of {spec.name!r} failed:\n{outcome.digest}")
            return Built(ok=False)
        return Built(ok=True, library=str(outcome.library_path), module_name=outcome.module_name)

    def _loaded(self, body: Loaded) -> None:
        run = self.run
        check_integrity(run, body.integrity, body.audit)
        if not run.builds:
            run.add_finding(
                "runtime.no_custom_kernel",
                "runtime",
                "the candidate compiled no extension: nothing it runs is its own kernel",
            )
        run.durations.load_s = run.close_stage()
        run.stage = "correctness"

    def _trial(self, body: Trial, values: list[Any]) -> None:
        run = self.run
        ref = run.reference_trial(body.index)
        first = not run.trials and run.comparing is None  # the first trial to arrive: its ops are checked
        compare_trial(run, body, values, ref, self.compare)
        check_trial(run, body, ref, first=first)

    def _trials_done(self, body: TrialsDone, chan: Channel, turns: DeviceTurns) -> bool:
        run, cfg, hold = self.run, self.config, turns.hold
        run.compared()
        check_integrity(run, body.integrity, body.audit)
        run.durations.correctness_s = run.close_stage()
        if run.ncu:
            return self._profile_range(chan, hold)
        go = cfg.timing.enabled and not run.has_hack() and run.trials and all(t.passed for t in run.trials)
        if not go:
            send(chan, Stop())
            return True
        run.durations.device_wait_s += self._settle_baseline(hold)
        if run.compile_here:
            # torch.compile's warm-up is seconds of code generation on the CPU, then one forward: it holds no gate
            # (as a baseline lane's does), only its GPU benchmarks do, one at a time ("device_wanted"). In the
            # timing's exclusive hold it kept the device from every other evaluation: 5-6 s for each KernelBench
            # L1 task timed beside its candidate on the H200.
            hold.to(None)
            run.stage = "compile"
            send(chan, Compile())
            return False
        self._start_timing(chan, turns)
        return False

    def _profile_range(self, chan: Channel, hold: GateHold) -> bool:
        """Under Nsight Compute: the forward ncu measures, for a correct program or an incorrect one alike (an agent
        profiles both); not for a hack or a program that ran no trial. Returns whether the evaluation is over."""
        run = self.run
        if run.has_hack() or not run.trials:
            send(chan, Stop())
            return True
        run.durations.device_wait_s += hold.to("shared")
        run.stage = "profile"
        run.stage_started = time.monotonic()
        send(chan, Profile())
        return False

    def _settle_baseline(self, hold: GateHold) -> float:
        """Wait, holding no gate (its timing needs the device alone), for a baseline still being measured."""
        run = self.run
        if run.await_baseline is None:
            return 0.0
        hold.to(None)
        started = time.monotonic()
        run.baseline, run.await_baseline = run.await_baseline(), None
        # None: not measured (it failed, or was deferred to the task's candidates): the worker compiles and times
        # torch.compile itself, as it would have had it been told so at setup.
        run.compile_here = self.config.timing.compile_baseline and (
            run.baseline is None or run.baseline.compile is None
        )
        return time.monotonic() - started

    def _start_timing(self, chan: Channel, turns: DeviceTurns) -> None:
        """Take the device alone (on its reserved cores) and start the timed rounds."""
        run = self.run
        run.durations.device_wait_s += turns.alone(chan)
        run.stage = "timing"
        run.stage_started = time.monotonic()

    def _timing(self, body: Timing, checked: list[Any], chan: Channel, hold: GateHold) -> None:
        run, cfg = self.run, self.config
        run.timings = assemble_timings(cfg, body, run.baseline)
        run.diagnostics.timing_cores = body.cpu_cores
        if body.host_probe is not None:
            run.diagnostics.host_launch_us = body.host_probe.launch_us
            run.diagnostics.host_python_us = body.host_probe.python_us
        if body.compile.error:
            run.error(f"torch.compile baseline failed (speedup over compile not measured): {body.compile.error}")
        run.durations.timing_s = sum(sum(v) for v in body.times_ms.by_model().values()) / 1000.0
        check_timed_rounds(run, body.checked, checked)
        check_integrity(run, body.integrity, body.audit)
        run.durations.timing_wall_s = run.close_stage()
        if not (cfg.backend == "cuda" and cfg.timing.profile_kernels):
            return
        # The profile is one forward: it needs the device, not the device alone.
        run.durations.device_wait_s += hold.to("shared")
        run.stage = "profile"
        run.stage_started = time.monotonic()
        send(chan, Profile())

    def _error(self, body: Error) -> None:
        run = self.run
        check_audit(run, body.audit)
        if body.task_error:
            run.infra_error = f"task error ({body.stage}): {body.message}"
        elif body.infra:
            run.infra_error = f"worker setup failed: {body.message}"
        else:
            run.runtime_failed = True
            run.error(f"{body.stage}: {body.message}")
