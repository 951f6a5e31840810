"""Starting child processes that end with this one, whatever ends it.

A worker left behind when the evaluator ends (a SIGKILL from a job scheduler, a test harness's timeout, the
OOM killer) runs on: a candidate spinning in native code ignores SIGTERM, holds a core at 100% for as long as
the machine is up, and on a GPU host holds device memory too. So each child asks the kernel for a signal when
its parent goes (``PR_SET_PDEATHSIG``, set between fork and exec, kept across exec).

The kernel sends that signal when the parent *thread* ends, not the process. The executor starts workers
from short-lived threads (spares are started in the background), and a worker started from one would be killed
as soon as that thread finished. So every child is started from one thread that lives as long as the process
(``_spawner``): the signal then comes exactly when the process ends.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

_spawner: ThreadPoolExecutor | None = None
_spawner_pid: int | None = None  # a forked child has the executor object but not its thread: it starts its own
_spawner_lock = threading.Lock()


def die_with_parent(sig: int, parent_pid: int) -> None:
    """In a child between fork and exec: be sent ``sig`` when the parent thread ends (Linux); if the parent is
    already gone (it died before this ran), send it now."""
    if _LIBC is None:
        return
    _LIBC.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)


def _thread() -> ThreadPoolExecutor:
    global _spawner, _spawner_pid
    with _spawner_lock:
        if _spawner is None or _spawner_pid != os.getpid():
            _spawner, _spawner_pid = ThreadPoolExecutor(1, thread_name_prefix="rubric-rl-spawner"), os.getpid()
        return _spawner


def popen(
    args: list[str],
    *,
    death_signal: signal.Signals = signal.SIGKILL,
    preexec_fn: Callable[[], None] | None = None,
    **kwargs: Any,
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **kwargs)`` whose child gets ``death_signal`` when this process ends.

    SIGKILL for children that run untrusted code (a native loop ignores anything else); SIGTERM for our own
    servers, which clean up after their children first."""
    parent = os.getpid()

    def child_setup() -> None:
        die_with_parent(death_signal, parent)
        if preexec_fn is not None:
            preexec_fn()

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(args, preexec_fn=child_setup, **kwargs)

    if threading.current_thread().name.startswith("rubric-rl-spawner"):
        return start()
    return _thread().submit(start).result()
