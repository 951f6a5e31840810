"""Baseline mode: a task's eager and torch.compile timings, measured once and reused across its candidates.

The reference's model and torch.compile's warm-up need no gate; the worker then says it is ``warm`` and times only
once the evaluator answers ``time`` (the device is then its alone)."""

from __future__ import annotations

from rubric_rl.sandbox.run.messages import Done, Time, Warm
from rubric_rl.sandbox.run.worker.base import Session
from rubric_rl.sandbox.run.worker.timing import CompiledReference, compile_reference, time_models


def measure(session: Session) -> None:
    ref = session.start_reference()
    session.stage = "compile"
    compiled = (
        compile_reference(session, ref, rearm=False) if session.cfg.timing.compile_baseline else CompiledReference(None)
    )
    session.lap("compile_warmup_s")
    session.send(Warm())  # the evaluator answers when the device is ours alone
    if not isinstance(session.receive(), Time):
        return
    session.lap("gate_wait_s")
    session.stage = "timing"
    time_models(session, ref, None, take_snapshot=None, compiled=compiled)
    session.send(Done())
