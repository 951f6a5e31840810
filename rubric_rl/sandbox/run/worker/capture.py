"""Capture mode: import the candidate only to record its load_inline calls (to build them ahead of execution).

No device, no reference, no build: each load_inline returns a stand-in whose functions raise, so a module that
calls its extension at import fails after its builds were recorded, and what was recorded still counts.
"""

from __future__ import annotations

from typing import Any

from rubric_rl.sandbox.run.messages import Captured
from rubric_rl.sandbox.run.worker.base import Session, digest_exception, load_module, refuse_load


class _CapturedExtension:
    """What load_inline returns while capturing: the module is imported for its build requests only."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"extension {self._name!r} is not built during capture")

        return unavailable


def capture(session: Session) -> None:
    from torch.utils import cpp_extension

    from rubric_rl.sandbox.build.extension import ExtensionSpec, SpecError, spec_from_call

    captured: list[ExtensionSpec] = []

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        try:
            spec = spec_from_call(args, kwargs)
        except SpecError as e:
            raise RuntimeError(str(e)) from None
        captured.append(spec)
        return _CapturedExtension(spec.name)

    cpp_extension.load_inline = load_inline
    cpp_extension.load = refuse_load
    session.stage = "capture"
    session.audit.install()
    session.audit.armed = True
    error = None
    try:
        load_module("candidate", session.setup.candidate)
    except Exception as e:  # the module may fail after its builds (stub extensions): what was captured counts
        error = digest_exception(e, "candidate.py")
    session.audit.armed = False
    session.send(Captured(specs=captured, error=error))
