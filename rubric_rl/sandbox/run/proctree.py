"""Killing a process with everything it started.

``killpg`` alone is not enough: ninja puts every compiler it runs into a process group of its own, and code in
a worker can change its group too. So the tree is walked from the top, each process frozen (SIGSTOP) before
its children are listed, which stops it from starting new ones while the walk goes on; then every process
found, and the root's group, is killed.
"""

from __future__ import annotations

import os
import signal

import psutil


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group and all its descendants; missing processes are ignored."""
    found: list[psutil.Process] = []
    try:
        frontier = [psutil.Process(pid)]
    except psutil.Error:
        frontier = []
    seen: set[int] = set()
    while frontier:
        proc = frontier.pop()
        if proc.pid in seen:
            continue
        seen.add(proc.pid)
        try:
            proc.suspend()
            frontier.extend(proc.children())
        except psutil.Error:
            continue
        found.append(proc)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for proc in found:
        try:
            proc.kill()
        except psutil.Error:
            pass


def kill_descendants() -> None:
    """SIGKILL every process this one started, and everything they started."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        kill_tree(child.pid)


def end_with_descendants_on_signal(signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """On any of ``signals``, kill every descendant (workers, build servers and their compilers) and exit with
    128 + the signal's number. For commands: a worker's evaluation thread can be blocked for minutes in a
    candidate's native loop, so an orderly shutdown that waits for threads would not end within seconds; what a
    command writes is appended as it goes, so ending here loses nothing finished."""

    def end(signum: int, frame: object) -> None:
        kill_descendants()
        os._exit(128 + signum)

    for sig in signals:
        signal.signal(sig, end)
