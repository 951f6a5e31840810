"""What every conversation with a worker shares: the short exchange of the capture and baseline modes, and the
device moves a worker asks for whether it evaluates a candidate or measures a task's baseline."""

from __future__ import annotations

import time
from collections.abc import Callable

from rubric_rl.sandbox.run.cpu_cores import available_cores, pin_process
from rubric_rl.sandbox.run.device_gate import GateHold
from rubric_rl.sandbox.run.messages import FROM_WORKER, Body, Captured, Done, Error, Go, Setup, Time, parse_body, send
from rubric_rl.sandbox.run.process import WorkerProcess
from rubric_rl.sandbox.run.protocol import Channel


def exchange(
    worker: WorkerProcess,
    setup: Setup,
    timeout_s: float,
    *,
    on_message: Callable[[Body, Channel], float] | None = None,
) -> list[Body]:
    """Send ``setup`` and collect the worker's messages, validated, up to its last (``done``, ``captured`` or
    ``error``). ``on_message`` sees each message first and may answer it; what it returns is added to the deadline
    (time it spent waiting is not the worker's)."""
    chan = worker.start()
    # The system's monotonic clock, which the worker shares: it reports how long its start kept us waiting.
    send(chan, setup.model_copy(update={"sent_at": time.monotonic()}))
    deadline = time.monotonic() + timeout_s
    bodies: list[Body] = []
    while True:
        body = parse_body(chan.recv(deadline=deadline), FROM_WORKER)
        bodies.append(body)
        if isinstance(body, (Done, Captured, Error)):
            return bodies
        if on_message is not None:
            deadline += on_message(body, chan)


class DeviceTurns:
    """A worker's turns on the device through the evaluator's gate hold: each of torch.compile's GPU benchmarks
    shared (``compile_gate``), the timed rounds alone and on the device's timing cores, and the device given back,
    the worker back on our cores, once the rounds are over."""

    def __init__(self, hold: GateHold, timing_cores: frozenset[int] | None) -> None:
        self.hold = hold
        self.timing_cores = timing_cores
        self.pid: int | None = None  # the worker's, once it started

    def benchmark(self, chan: Channel) -> float:
        """A compile benchmark may run; returns the seconds waited for the device."""
        waited = self.hold.to("shared")
        send(chan, Go())
        return waited

    def benchmark_over(self) -> None:
        self.hold.to(None)

    def alone(self, chan: Channel) -> float:
        """The timed rounds may run: the device held alone, the worker on the timing cores; returns the wait."""
        waited = self.hold.to("exclusive")
        if self.timing_cores and self.pid is not None:
            pin_process(self.pid, self.timing_cores)
        send(chan, Time())
        return waited

    def rounds_over(self) -> None:
        self.hold.to(None)
        if self.timing_cores and self.pid is not None:
            pin_process(self.pid, available_cores())
