"""The kernel profile: one candidate forward under the CUDA profiler, each kernel's name, stream and device time;
or, in a worker under Nsight Compute, one forward inside the range ncu measures."""

from __future__ import annotations

import json
import os
import types
from typing import Any

from rubric_rl.sandbox.run.messages import Kernels, ProfiledKernel
from rubric_rl.sandbox.run.worker.base import Session, digest_exception


def profile(session: Session, reference: types.ModuleType, new_model: Any) -> None:
    """Profile one forward and send its kernels; a profile that fails is reported, not fatal."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    from rubric_rl.sandbox.measure.inputs import clone_inputs

    x = clone_inputs(session.draw(reference, session.cfg.seed + 20_000))
    trace = os.path.join(os.getcwd(), "profile.json")
    session.audit.armed = False  # the profiler's own setup reads system files and writes the trace
    try:
        marker = session.torch.zeros(1, device=session.device)
        session.backend.synchronize()
        with profiler(activities=[ProfilerActivity.CUDA]) as prof:
            marker.fill_(1.0)  # the first kernel of the trace: it shows which stream is the current one
            session.audit.armed = True
            new_model(*x)
            session.backend.synchronize()
            session.audit.armed = False
        prof.export_chrome_trace(trace)
        with open(trace) as f:
            events = json.load(f).get("traceEvents", [])
        kernels, current_stream = _kernels(events)
    except Exception as e:
        session.send(Kernels(error=digest_exception(e)))
        return
    finally:
        session.audit.armed = True
    session.send(Kernels(kernels=kernels, current_stream=current_stream))


def _kernels(events: list[dict[str, Any]]) -> tuple[list[ProfiledKernel], int]:
    """The trace's device work summed per (name, stream), and the current stream (the marker's), from its events."""
    device_events = sorted(
        (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    current_stream = -1
    kernels: dict[tuple[str, int], ProfiledKernel] = {}
    for evt in device_events:
        stream = int((evt.get("args") or {}).get("stream", -1))
        if current_stream == -1 and evt.get("cat") == "kernel":
            current_stream = stream  # the marker
            continue
        name = str(evt.get("name", ""))[:300]
        entry = kernels.get((name, stream))
        if entry is None:
            entry = ProfiledKernel(name=name, stream=stream, calls=0, total_us=0.0, kind=str(evt.get("cat")))
            kernels[name, stream] = entry
        entry.calls += 1
        entry.total_us += float(evt.get("dur", 0.0))
    return list(kernels.values()), current_stream


def profile_range(session: Session, reference: types.ModuleType, new_model: Any) -> None:
    """One forward inside cudaProfilerStart/Stop, for the Nsight Compute this worker runs under (``Setup.ncu``),
    after one outside it (the candidate's lazy initialisation is not measured). ncu reads the kernels itself, so
    the message says only whether the forwards ran; the torch profiler stays off, its CUPTI use conflicts with
    ncu's."""
    from rubric_rl.sandbox.measure.inputs import clone_inputs

    cuda_profiler = session.torch.cuda.profiler
    x = session.draw(reference, session.cfg.seed + 20_000)
    try:
        session.audit.armed = True
        new_model(*clone_inputs(x))  # the warm-up on a copy: the measured forward gets inputs no call has seen
        session.backend.synchronize()
        session.audit.armed = False  # our own calls into the CUDA runtime
        cuda_profiler.start()
        try:
            session.audit.armed = True
            new_model(*x)
            session.backend.synchronize()
        finally:
            session.audit.armed = False
            cuda_profiler.stop()
    except Exception as e:
        session.send(Kernels(error=digest_exception(e, "candidate.py")))
        return
    finally:
        session.audit.armed = True
    session.send(Kernels())
