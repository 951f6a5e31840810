"""Build jobs forked from a server that has imported torch's build machinery once.

A build job started as a fresh interpreter spent its first 1.2 s of CPU importing torch (2 cores), of a split
build's 9.5 s; on a 16-core host building sixteen extensions at once, each of them paid it again. The server
is a child interpreter (``SERVER_COMMAND``, one per process that builds) that imports
``torch.utils.cpp_extension`` and ``compile_job`` and then, for each request on its stdin, forks a job that
runs ``compile_job.run_forked``: its own session, its log, the environment and the CPUs the builder has when
it asks. The server replies on its stdout with the job's pid, and later with its exit code. It ends, killing
its jobs' whole compiler trees, when the builder's end of its stdin closes or the builder's process ends.

``multiprocessing``'s fork server would do the forking, but each of its children imports the parent's main
module again (a training script without a ``__main__`` guard would run in every build job, and one that
imports verl at the top would pay that import instead of torch's). The server is single-threaded, so forking
it is safe; it ends, killing any jobs still running, when the builder's end of its stdin closes.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from rubric_rl.sandbox.run.spawn import die_with_parent, popen


class JobServerGone(Exception):
    """The server ended before it answered (it is started again for the next job)."""


@dataclass
class Job:
    """A running build job: its pid, and the server's word on how it ended."""

    pid: int
    _replies: queue.Queue[dict[str, Any]]
    _last: dict[str, Any] | None = None

    def wait(self, timeout: float | None = None) -> int | None:
        """The job's exit code (negative: killed by that signal), or None if it is still running after
        ``timeout`` seconds. Raises ``JobServerGone`` if the server ended first (the job may still run)."""
        if self._last is None:
            try:
                self._last = self._replies.get(timeout=timeout)
            except queue.Empty:
                return None
        if "exit" not in self._last:
            raise JobServerGone("the build job server ended while the job ran")
        return int(self._last["exit"])


# Not ``-m rubric_rl.sandbox.build.job_server``: the package's __init__ imports this module before runpy runs it as
# __main__, a second copy of it, and Python warns about that on the builder's stderr at every server start.
SERVER_COMMAND = [sys.executable, "-c", "from rubric_rl.sandbox.build.job_server import serve; serve()"]


class JobServer:
    """The builder's side: starts the server and hands out jobs; safe to share between threads."""

    def __init__(self) -> None:
        self._proc = popen(
            SERVER_COMMAND,
            death_signal=signal.SIGTERM,  # it kills its jobs' compiler trees, then ends
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C meant for the builder reaches its jobs through the builder
        )
        self._ids = itertools.count()
        self._waiting: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._gone = False
        threading.Thread(target=self._read, name="job-server", daemon=True).start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return not self._gone and self._proc.poll() is None

    def start(self, request_path: str, env: dict[str, str], log_path: str, cores: list[int] | None) -> Job:
        """Fork a job for the build request at ``request_path``."""
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        line = {"request": request_path, "env": env, "log": log_path, "cores": cores}
        with self._lock:
            if self._gone:
                raise JobServerGone("the build job server has ended")
            job_id = next(self._ids)
            self._waiting[job_id] = replies
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps({"id": job_id, **line}) + "\n").encode())
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError) as e:
                self._waiting.pop(job_id, None)
                raise JobServerGone(f"the build job server has ended ({e})") from None
        reply = replies.get()
        if "pid" not in reply:
            raise JobServerGone(f"the build job server could not start the job: {reply.get('error', 'it ended')}")
        return Job(pid=int(reply["pid"]), _replies=replies)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue  # not a reply (the server sends only JSON lines; nothing else should get here)
            with self._lock:
                replies = self._waiting.get(msg["id"])
                if "exit" in msg or "error" in msg:
                    self._waiting.pop(msg["id"], None)
            if replies is not None:
                replies.put(msg)
        with self._lock:
            self._gone = True
            waiting, self._waiting = list(self._waiting.values()), {}
        for replies in waiting:
            replies.put({})  # neither pid nor exit: the server is gone


_server: JobServer | None = None
_server_pid: int | None = None  # the process that started it (a forked builder starts its own)
_server_lock = threading.Lock()


def job_server() -> JobServer:
    """This process's server, started on first use and again if it ended."""
    global _server, _server_pid
    with _server_lock:
        if _server is None or not _server.alive or _server_pid != os.getpid():
            _server, _server_pid = JobServer(), os.getpid()
        return _server


# ---- the server ------------------------------------------------------------------------------------------------
def _fork_job(msg: dict[str, Any], run_job: Any, server_fds: list[int]) -> int:
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # the job: nothing of the server's signal handling or pipes
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            die_with_parent(signal.SIGKILL, server)  # a server killed outright takes its jobs with it
            for fd in server_fds:
                os.close(fd)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            run_job(msg["request"], msg["env"], msg["log"], msg["cores"])
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(70)  # run_job exits by itself; only a failure comes here
    return pid


def serve() -> None:
    # Replies go through a descriptor of their own: whatever else writes to stdout (a library's print) goes
    # to stderr instead of into the builder's replies.
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from torch.utils import cpp_extension  # noqa: F401  (imported here once, for every job forked after)

    from rubric_rl.sandbox.build import compile_job
    from rubric_rl.sandbox.run.proctree import kill_tree

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # the wakeup fd is what the loop watches
    # Sent by the kernel when the builder's process ends (spawn.popen): the jobs' compilers are killed below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    server_fds = [out.fileno(), wake_r, wake_w]
    jobs: dict[int, int] = {}  # pid -> request id
    pending = b""

    def reply(msg: dict[str, Any]) -> None:
        out.write((json.dumps(msg) + "\n").encode())
        out.flush()

    def reap() -> None:
        while jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in jobs:
                reply({"id": jobs.pop(pid), "exit": os.waitstatus_to_exitcode(status)})

    try:
        while True:
            readable, _, _ = select.select([0, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
                reap()
            if 0 in readable:
                data = os.read(0, 1 << 16)
                if not data:
                    break
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    msg = json.loads(line)
                    try:
                        pid = _fork_job(msg, compile_job.run_forked, server_fds)
                    except OSError as e:
                        reply({"id": msg["id"], "error": str(e)})
                        continue
                    jobs[pid] = msg["id"]
                    reply({"id": msg["id"], "pid": pid})  # before its exit, which only reap() sends
    finally:
        # Both ends come when the builder dies (stdin's end, then the kernel's SIGTERM): the second must not
        # cut this walk short, or it leaves compilers frozen half-way and others running.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for pid in list(jobs):
            kill_tree(pid)


if __name__ == "__main__":
    serve()
