"""Evaluation mode: the reference (trusted), the candidate's load, its correctness trials, then, only if the
evaluator asks, timing and a kernel profile; under Nsight Compute (``Setup.ncu``), a profiled range instead."""

from __future__ import annotations

import importlib.util
import linecache
import sys
import time
from typing import Any

from rubric_rl.sandbox.run.messages import (
    Build,
    Built,
    Compile,
    Compiled,
    Done,
    Load,
    Loaded,
    LoadedExtension,
    Profile,
    Time,
    TrialsDone,
)
from rubric_rl.sandbox.run.worker.base import (
    CandidateError,
    ReferenceModel,
    Session,
    digest_exception,
    load_matching_state,
    load_module,
    refuse_load,
)
from rubric_rl.sandbox.run.worker.correctness import run_candidate_trials
from rubric_rl.sandbox.run.worker.profile import profile, profile_range
from rubric_rl.sandbox.run.worker.reference import ReferencePhase
from rubric_rl.sandbox.run.worker.timing import CompiledReference, compile_reference, time_models


class _Builds:
    """The candidate's ``load_inline``: each call is a build request to the evaluator, which owns the flags and the
    cache; the library it built is imported here."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.extensions: list[LoadedExtension] = []

    def load_inline(self, *args: Any, **kwargs: Any) -> Any:
        from rubric_rl.sandbox.build.extension import SpecError, spec_from_call

        session = self.session
        try:
            spec = spec_from_call(args, kwargs)
        except SpecError as e:
            session.send(Build(spec_error=str(e)))
            raise RuntimeError(str(e)) from None
        session.send(Build(spec=spec))
        reply = session.recv()
        if not isinstance(reply, Built) or not reply.ok or reply.library is None or reply.module_name is None:
            raise RuntimeError(f"extension {spec.name!r} did not build")
        library, module_name = reply.library, reply.module_name
        was_armed, session.audit.armed = session.audit.armed, False  # our own import of the built library
        try:
            import_spec = importlib.util.spec_from_file_location(module_name, library)
            if import_spec is None or import_spec.loader is None:
                raise RuntimeError(f"cannot load {library}")
            module = importlib.util.module_from_spec(import_spec)
            import_spec.loader.exec_module(module)
        finally:
            session.audit.armed = was_armed
        self.extensions.append(LoadedExtension(name=spec.name, module=module_name))
        return module


def evaluate(session: Session) -> None:
    ref = session.start_reference()
    phase = ReferencePhase(session, ref)
    phase.run()
    if not isinstance(session.recv(), Load):
        return
    from rubric_rl.sandbox.checks.integrity import compare, take_snapshot

    session.stage = "load"
    new_model, snapshot = _load_candidate(session, ref)

    session.stage = "correctness"
    run_candidate_trials(session, phase, new_model)
    phase.release()
    session.lap("correctness_trials_s")
    session.send(
        TrialsDone(phases=dict(session.phases), integrity=compare(snapshot), audit=list(session.audit.violations))
    )
    go = session.recv()
    if session.setup.ncu:  # nothing timed: one forward for ncu to measure, if the evaluator asks for it
        if isinstance(go, Profile):
            session.stage = "profile"
            profile_range(session, ref.module, new_model)
            session.lap("profile_s")
            session.send(Done(phases=dict(session.phases), audit=list(session.audit.violations)))
        return
    compiled_here: CompiledReference | None = None
    if isinstance(go, Compile):  # no task baseline to reuse: torch.compile is timed here, beside the candidate
        session.stage = "compile"
        compiled_here = compile_reference(session, ref, rearm=True)
        session.lap("compile_warmup_s")
        session.send(Compiled())  # the evaluator answers when the device is ours alone
        go = session.recv()
    if not isinstance(go, Time):
        return

    session.stage = "timing"
    time_models(session, ref, new_model, take_snapshot=take_snapshot, compiled=compiled_here)
    if session.cfg.backend == "cuda" and session.cfg.timing.profile_kernels:
        if not isinstance(session.recv(), Profile):  # sent once the device is shared again
            return
        session.stage = "profile"
        profile(session, ref.module, new_model)
        session.lap("profile_s")
    session.send(Done(phases=dict(session.phases), audit=list(session.audit.violations)))


def _load_candidate(session: Session, ref: ReferenceModel) -> tuple[Any, Any]:
    """Import the candidate (its load_inline calls built by the evaluator) and build ModelNew with the reference's
    state where it matches; returns the model and the integrity snapshot taken before the import."""
    from torch.utils import cpp_extension

    from rubric_rl.sandbox.checks.integrity import compare, take_snapshot

    builds = _Builds(session)
    cpp_extension.load_inline = builds.load_inline
    cpp_extension.load = refuse_load
    sys.modules.pop("reference", None)  # the candidate must not find the reference by name
    linecache.cache.pop("reference.py", None)
    _warm_up_guard(session)
    snapshot = take_snapshot()
    session.lap("load_preamble_s")
    started = time.monotonic()
    session.audit.armed = True
    try:
        candidate = load_module("candidate", session.setup.candidate)
        session.lap("candidate_import_s")
        model_cls = getattr(candidate, "ModelNew", None)
        if not isinstance(model_cls, type):
            raise CandidateError("load", "the candidate program defines no class ModelNew")
        new_model = session.construct(model_cls, ref.init_inputs)
        matched = load_matching_state(ref.model, new_model) if isinstance(new_model, session.torch.nn.Module) else 0
        session.backend.synchronize()
    except CandidateError:
        raise
    except Exception as e:
        raise CandidateError("load", digest_exception(e, "candidate.py")) from e
    session.lap("model_init_s")
    session.send(
        Loaded(
            phases=dict(session.phases),
            load_s=time.monotonic() - started,
            state_matched=matched,
            extensions=builds.extensions,
            integrity=compare(snapshot),
            audit=list(session.audit.violations),
        )
    )
    return new_model, snapshot


def _warm_up_guard(session: Session) -> None:
    """Run the op recorder once before arming: its first use imports parts of torch lazily."""
    from rubric_rl.sandbox.checks.guard import GuardedCall

    torch = session.torch
    one = torch.ones(2, device=session.device)
    GuardedCall()(torch.add, one, one)
    import torch._dynamo  # noqa: F401 - imported by dispatch modes and the profiler on first use
