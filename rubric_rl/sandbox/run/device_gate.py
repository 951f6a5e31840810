"""Sharing one device between evaluations: correctness side by side, timing alone.

Timing needs the device to itself: kernels of another process time-slice with the timed ones and stretch
them. Loading a candidate, running the reference and checking outputs do not: they only need the device
to be there. A ``DeviceGate`` is a readers-writer lock over one device (a GPU, or the host on the cpu
backend) held by the evaluator, never by the worker: evaluations in their correctness phase hold it
shared, an evaluation about to time holds it exclusively, and because the evaluator decides when its
worker may start each phase (the worker waits for ``time``), a worker never runs device work the gate did
not admit. Writers are preferred: once a timing is waiting, no new correctness phase starts, so timings
never starve behind a stream of correctness checks; and a phase already running gives way between two of
its trials (the worker asks before each one), so a timing waits for one trial of each, not for whole phases
(measured on an H200: correctness phases of 20-35 s on 256 MB outputs).

What it does not do: it cannot stop a candidate's process from launching work outside its phase (a
background thread that survived the guard); the runtime audit and the thread checks are what catch that.
And a task baseline's start and torch.compile warm-up hold no gate (they are seconds of CPU work, then one
forward): that forward, and the reference's setup, may overlap one round of another evaluation's timing,
which the median over its rounds absorbs. The warm-up's GPU benchmarks (Inductor tuning its kernels) are
seconds of device work: each holds the gate shared (``compile_gate``).
"""

from __future__ import annotations

import threading
import time
from typing import Literal

Mode = Literal["shared", "exclusive"]


class DeviceGate:
    """A writer-preferring readers-writer lock with wait-time counters."""

    def __init__(self, name: str = "device") -> None:
        self.name = name
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self.waited_s: dict[str, float] = {"shared": 0.0, "exclusive": 0.0}
        self.acquired: dict[str, int] = {"shared": 0, "exclusive": 0}
        self.exclusive_held_s = 0.0  # the device held alone, summed over its holds
        self._writer_since = 0.0

    def acquire(self, mode: Mode) -> float:
        """Block until held in ``mode``; returns the seconds waited."""
        started = time.monotonic()
        with self._cond:
            if mode == "shared":
                while self._writer or self._writers_waiting:
                    self._cond.wait()
                self._readers += 1
            else:
                self._writers_waiting += 1
                try:
                    while self._writer or self._readers:
                        self._cond.wait()
                finally:
                    self._writers_waiting -= 1
                self._writer = True
                self._writer_since = time.monotonic()
            waited = time.monotonic() - started
            self.waited_s[mode] += waited
            self.acquired[mode] += 1
        return waited

    def writers_waiting(self) -> bool:
        with self._cond:
            return self._writers_waiting > 0

    def release(self, mode: Mode) -> None:
        with self._cond:
            if mode == "shared":
                if self._readers <= 0:
                    raise RuntimeError(f"{self.name}: shared release without a holder")
                self._readers -= 1
            else:
                if not self._writer:
                    raise RuntimeError(f"{self.name}: exclusive release without a holder")
                self._writer = False
                self.exclusive_held_s += time.monotonic() - self._writer_since
            self._cond.notify_all()

    def stats(self) -> dict[str, float | int]:
        return {
            "shared_acquired": self.acquired["shared"],
            "exclusive_acquired": self.acquired["exclusive"],
            "shared_waited_s": round(self.waited_s["shared"], 3),
            "exclusive_waited_s": round(self.waited_s["exclusive"], 3),
            "exclusive_held_s": round(self.exclusive_held_s, 3),
        }


class GateHold:
    """One evaluation's hold on a gate (or on none): moves between modes, released on exit.

    With ``gate=None`` every move is free, so code paths are the same with and without sharing."""

    def __init__(self, gate: DeviceGate | None, *, alone: bool = False) -> None:
        self.gate = gate
        self.alone = alone  # every hold is exclusive (an evaluation that needs the whole device)
        self.mode: Mode | None = None
        self.waited_s = 0.0

    def to(self, mode: Mode | None) -> float:
        """Hold the gate in ``mode`` (None: not at all); returns the seconds this move waited."""
        if mode == "shared" and self.alone:
            mode = "exclusive"
        if mode == self.mode:
            return 0.0
        self.release()
        waited = 0.0
        if mode is not None and self.gate is not None:
            waited = self.gate.acquire(mode)
        self.mode = mode
        self.waited_s += waited
        return waited

    def yield_to_writers(self) -> float:
        """Between two units of shared work: if a timing is waiting, let it go first (release, then wait for
        the shared hold again); returns the seconds waited."""
        if self.mode != "shared" or self.gate is None or not self.gate.writers_waiting():
            return 0.0
        self.release()
        return self.to("shared")

    def release(self) -> None:
        if self.mode is not None and self.gate is not None:
            self.gate.release(self.mode)
        self.mode = None

    def __enter__(self) -> GateHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
