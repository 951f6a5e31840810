"""The worker's timing: torch.compile of the reference warmed up, then eager, compile and the candidate timed in
interleaved rounds while the device is this worker's alone."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rubric_rl.sandbox.run.messages import (
    AdmittedInfo,
    CheckedRound,
    CompileInfo,
    DeviceReleased,
    DeviceWanted,
    Go,
    HostProbe,
    RoundTimes,
    SampleRequest,
    Timed,
    Timing,
)
from rubric_rl.sandbox.run.worker.base import (
    CandidateError,
    ReferenceModel,
    Session,
    digest_exception,
    load_matching_state,
)

# A checked timed round whose candidate and eager outputs together are larger than this is compared here, on the
# device, with the evaluator's spot check, instead of being shipped: the copy would run while the device is held
# for timing alone (on an H200, L1-40's rounds copied two 256 MB outputs in each of 4 checked rounds: 2.9 s for
# 0.9 s of timed calls). A lower limit for the correctness trials' outputs applies here too.
TIMED_OUTPUTS_SHIP_BYTES = 16 << 20


@dataclass
class CompiledReference:
    """torch.compile of the reference, warmed up (None: it failed, and ``info`` says why)."""

    model: Any | None
    info: CompileInfo = field(default_factory=CompileInfo)


def compile_reference(session: Session, ref: ReferenceModel, *, rearm: bool) -> CompiledReference:
    """torch.compile of the reference, warmed up on one input. Its GPU benchmarks ask the evaluator for the device
    (``compile_gate``); what they waited for it is not the warm-up's."""
    from rubric_rl.sandbox.run.compile_gate import benchmarks_admitted

    gate_wait_s = 0.0

    def device_wanted() -> None:
        nonlocal gate_wait_s
        session.send(DeviceWanted())
        asked = time.monotonic()
        reply = session.receive()
        waited = time.monotonic() - asked
        gate_wait_s += waited
        session.mark += waited
        if not isinstance(reply, Go):
            raise RuntimeError(f"protocol: expected 'go' before a compile benchmark, got {reply.kind!r}")

    def device_released() -> None:
        session.send(DeviceReleased())

    session.audit.armed = False  # torch.compile spawns compiler processes and writes its cache: ours
    try:
        compiled = session.torch.compile(
            session.construct(ref.module.Model, ref.init_inputs), mode=session.cfg.timing.compile_mode
        )
        load_matching_state(ref.model, compiled)
        warm = session.draw(ref.module, session.cfg.seed + 5000)
        started = time.monotonic()
        with benchmarks_admitted(device_wanted, device_released) as admitted:
            compiled(*warm)  # the compile, and its kernels' first launches (where Inductor benchmarks)
            session.backend.synchronize()
        # The warm-up's own time: what its benchmarks waited for the device was other evaluations'.
        info = CompileInfo(
            warmup_s=time.monotonic() - started - gate_wait_s,
            benchmarks=AdmittedInfo(route=admitted.route, admissions=admitted.admissions),
        )
        session.phases["compile_gate_wait_s"] = round(gate_wait_s, 4)
        return CompiledReference(compiled, info)
    except Exception as e:  # the baseline failing is not the candidate's fault: recorded, not fatal
        return CompiledReference(None, CompileInfo(error=digest_exception(e)))
    finally:
        session.audit.armed = rearm


class _CheckedRounds:
    """The timed rounds whose outputs are checked: shipped to the evaluator, or, too large to copy while the device
    is held for timing alone, compared here and spot-checked by the evaluator on positions it draws now."""

    def __init__(self, session: Session, timing_seed: int) -> None:
        self.session = session
        self.timing_seed = timing_seed
        self.payload: list[list[Any]] = []
        self.meta: list[CheckedRound] = []

    def __call__(self, r: int, outputs: dict[str, Any]) -> None:
        from rubric_rl.sandbox.measure.correctness import compare_outputs
        from rubric_rl.sandbox.measure.inputs import describe, flatten_outputs, nbytes, to_host

        cfg = self.session.cfg
        cand = flatten_outputs(outputs["candidate"])
        eager = flatten_outputs(outputs["eager"])
        entry = CheckedRound(round=r, seed=self.timing_seed + r)
        # Eager's output is this process's either way.
        if nbytes(eager) + nbytes(cand) > min(TIMED_OUTPUTS_SHIP_BYTES, cfg.ship_outputs_limit_bytes()):
            entry.device_result = compare_outputs(
                [describe(o) for o in cand],
                cand,
                [describe(o) for o in eager],
                eager,
                cfg,
                index=-1,
                distribution="timed",
                seed=self.timing_seed + r,
            )
            cs, es = self.session.spot_sample(cand, eager, SampleRequest(round=r))
            self.payload.append([es, cs])
        else:
            self.payload.append([[to_host(o) for o in eager], [to_host(o) for o in cand]])
        self.meta.append(entry)


def time_models(
    session: Session,
    ref: ReferenceModel,
    new_model: Any | None,
    *,
    take_snapshot: Callable[[], Any] | None,
    compiled: CompiledReference | None,
) -> None:
    """Time eager, compile (``compiled``: torch.compile of the reference, warmed up before the device was ours
    alone; None: the task's baseline is reused) and, unless measuring a task baseline, the candidate."""
    from rubric_rl.sandbox.checks.integrity import compare
    from rubric_rl.sandbox.measure.inputs import clone_inputs, flatten_outputs, poison
    from rubric_rl.sandbox.measure.timing import choose_checked_rounds, host_probe, run_rounds

    cfg = session.cfg
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    models: dict[str, Any] = {"eager": ref.model}
    if new_model is not None:
        models["candidate"] = new_model
    info = compiled.info if compiled is not None else CompileInfo()
    if compiled is not None and compiled.model is not None:
        models["compile"] = compiled.model
    snapshot = take_snapshot() if take_snapshot else None  # re-baseline: what torch.compile changed is ours

    timing_seed = cfg.seed + 10_000
    checked = (
        choose_checked_rounds(cfg.timing.trials, cfg.timing.checked_outputs, timing_seed)
        if new_model is not None
        else set()
    )
    on_checked = _CheckedRounds(session, timing_seed)

    def release(outputs: dict[str, Any]) -> None:
        for out in outputs.values():
            poison(flatten_outputs(out))

    try:
        probes = [host_probe(session.backend, session.device)]
        times = run_rounds(
            models,
            make_inputs=lambda r: session.draw(ref.module, timing_seed + r),
            clone=clone_inputs,
            backend=session.backend,
            n_rounds=cfg.timing.trials,
            n_warmup=cfg.timing.warmup_trials,
            checked_rounds=checked,
            on_checked_round=on_checked,
            after_round=release,
        )
        probes.append(host_probe(session.backend, session.device))  # a device the candidate broke fails here too
    except Exception as e:
        raise CandidateError("timing", digest_exception(e, "candidate.py")) from e
    session.lap("timing_rounds_s")
    session.send(Timed())  # the device is free from here: the checked outputs take a while to ship
    session.send(
        Timing(
            phases=dict(session.phases),
            times_ms=RoundTimes(**times),
            compile=info,
            checked=on_checked.meta,
            cpu_cores=cores,
            host_probe=HostProbe(**{k: round(sum(p[k] for p in probes) / len(probes), 5) for k in probes[0]}),
            integrity=compare(snapshot) if snapshot is not None else [],
            audit=list(session.audit.violations),
        ),
        tensors=on_checked.payload,
    )
    session.lap("timing_ship_s")
