"""The parent's side of the probe worker: one long-lived process per synthesis lane, restarted on a hang or crash.

Starting Python and importing torch takes seconds; a worker serves many candidates. A request that gets no
answer within its time limit, or whose worker exits, becomes a failed ``runs_eager`` measurement (a timeout,
or the exit status and the end of the worker's stderr), and the next request gets a fresh worker.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import rubric_rl

logger = logging.getLogger(__name__)

_STDERR_TAIL = 1500


class ProbeWorker:
    """``probe(code, config, timeout_s)`` -> the worker's answer (see ``rubric_rl.tasks.synth.probe``)."""

    def __init__(self, start_timeout_s: float = 120.0) -> None:
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._buf = b""
        self._eof = False

    def _start(self) -> None:
        env = dict(os.environ)
        root = str(Path(rubric_rl.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH")) if x)
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rubric_rl.tasks.synth.probe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        self._buf = b""
        self._eof = False
        ready = self._read_line(time.monotonic() + self.start_timeout_s)
        if ready is None:
            raise RuntimeError(f"probe worker did not start: {self._stop()}")

    def _read_line(self, deadline: float) -> bytes | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self._eof = True
                    return None
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _stop(self) -> str:
        """Kill the worker's process group; returns how it ended and the end of its stderr."""
        if self.proc is None:
            return ""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        code = self.proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace")[-_STDERR_TAIL:]
        self._stderr.close()
        self.proc = None
        return f"exit status {code}; stderr ends: {tail.strip()[-_STDERR_TAIL:]}"

    def probe(self, code: str, config: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.proc is None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        started = time.monotonic()
        try:
            self.proc.stdin.write((json.dumps({"code": code, "config": config}) + "\n").encode())
            self.proc.stdin.flush()
            line = self._read_line(started + timeout_s)
        except (BrokenPipeError, OSError):
            line, self._eof = None, True
        if line is not None:
            return json.loads(line)
        timed_out = not self._eof
        how = self._stop()
        self.restarts += 1
        error = f"timeout after {timeout_s:.0f} s" if timed_out else f"the worker died ({how[:200]})"
        logger.info("probe worker restarted: %s", error)
        return {"filters": {"runs_eager": {"passed": False, "error": error, "detail": how}},
                "rejected_by": "runs_eager"}  # fmt: skip

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._stop()
