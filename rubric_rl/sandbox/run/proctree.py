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
