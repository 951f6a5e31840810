"""Reserving CPU cores for timing: the gate gives a timing its GPU, this gives it the cores that launch its work.

A program of many small kernels is bound by the host thread that launches them: when builds, torch.compile
warm-ups (inductor compiles on every core) and other workers' comparisons share that thread's core, its
timings stretch by tens of percent (measured on an H200: a 3 ms launch-bound program's p10-p90 went from
2.98-3.04 ms alone to 3.35-5.99 ms beside eight builds and two warm-ups). So each GPU gets a few cores of its
own: the evaluator's process, and with it everything it starts (builds, workers, their compiler children),
runs on the other cores, and the worker that holds a GPU's gate exclusively is moved onto that GPU's cores for
its timed rounds, then back. Whole physical cores are reserved (hyperthread siblings together), so the
timing thread does not share an execution unit either.

Linux only (``sched_setaffinity``); elsewhere, or when the cores are too few to divide, nothing is reserved.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


def available_cores() -> frozenset[int]:
    """The logical CPUs this process may run on (its affinity mask: a container's cpuset, taskset)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))


def physical_cores(cpus: frozenset[int], sysfs: Path = Path("/sys/devices/system/cpu")) -> list[frozenset[int]]:
    """``cpus`` grouped by physical core (hyperthread siblings together), in ascending order.

    A CPU whose topology cannot be read is its own core."""
    groups: dict[frozenset[int], None] = {}
    for cpu in sorted(cpus):
        siblings = frozenset([cpu])
        try:
            text = (sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text()
            siblings = parse_cpu_list(text) & cpus or siblings
        except (OSError, ValueError):
            pass
        groups.setdefault(siblings, None)
    return sorted(groups, key=min)


def parse_cpu_list(text: str) -> frozenset[int]:
    """A kernel CPU list such as ``0-3,8,10-11``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


@dataclass(frozen=True)
class CorePlan:
    """Which cores each device's timings run on, and which everything else runs on."""

    general: frozenset[int]
    timing: dict[str, frozenset[int]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.timing)


def plan_cores(
    devices: list[str],
    per_device: int,
    cpus: frozenset[int] | None = None,
    *,
    sysfs: Path = Path("/sys/devices/system/cpu"),
) -> CorePlan:
    """Reserve at least ``per_device`` logical CPUs (whole physical cores, taken from the highest) per device.

    Nothing is reserved (an inactive plan) when ``per_device`` is 0 or when what would remain for builds and
    everything else would be fewer cores than were reserved."""
    cpus = available_cores() if cpus is None else cpus
    if per_device <= 0 or not devices or not hasattr(os, "sched_setaffinity"):
        return CorePlan(general=cpus)
    cores = physical_cores(cpus, sysfs)
    timing: dict[str, frozenset[int]] = {}
    for device in devices:
        taken: set[int] = set()
        while len(taken) < per_device and cores:
            taken |= cores.pop()
        timing[device] = frozenset(taken)
    general = frozenset().union(*cores) if cores else frozenset()
    reserved = sum(len(c) for c in timing.values())
    if len(general) < reserved or any(len(c) < per_device for c in timing.values()):
        log.warning(
            "%d CPUs are too few to reserve %d per device for %d devices: timings share the cores",
            len(cpus),
            per_device,
            len(devices),
        )
        return CorePlan(general=cpus)
    return CorePlan(general=general, timing=timing)


def pin_process(pid: int, cpus: frozenset[int]) -> int:
    """Move every thread of process ``pid`` onto ``cpus``; returns how many threads were moved.

    Threads started later inherit the mask of the thread that starts them, and child processes that of their
    parent. A thread that ends meanwhile is skipped; a process that is gone moves nothing."""
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        threads = [pid]
    moved = 0
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
            moved += 1
        except (ProcessLookupError, PermissionError):
            continue
        except OSError as e:  # EINVAL: none of cpus is allowed for this thread (a cpuset changed under us)
            log.warning("could not move thread %d onto CPUs %s: %s", tid, sorted(cpus), e)
    return moved


def thread_affinities(pid: int) -> dict[int, frozenset[int]]:
    """The CPU mask of each thread of ``pid`` (from /proc; for checks and reports)."""
    out: dict[int, frozenset[int]] = {}
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in threads:
        try:
            out[int(t)] = frozenset(os.sched_getaffinity(int(t)))
        except OSError:
            continue
    return out
