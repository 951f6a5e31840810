"""A Python audit hook that, once armed, refuses what a candidate has no business doing in-process.

Armed in the worker just before the candidate is imported and kept armed while candidate code can run. It
blocks (raising inside the candidate) and records: starting processes, sockets, ctypes, signals to other
processes, writes outside the worker's temporary directory, reads outside the Python/torch installation and
the build cache, frame and garbage-collector introspection, and trace/profile hooks. Each refusal becomes a
``runtime.forbidden_operation`` finding. (Assignments to class or module attributes raise no audit event; the
integrity snapshots catch those.)

Audit hooks see Python-level operations only; native code is covered by the native source checks and the
process boundary. Hooks cannot be removed once added, but the armed flag is ordinary Python state: a
candidate able to reach it has already tripped the static checks (frame/gc/dunder access).
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any

_BLOCKED_PREFIXES = (
    "subprocess.",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.",
    "socket.",
    "ctypes.",
    "winreg.",
    "_winapi.",
)
_BLOCKED_EVENTS = {
    "os.system",
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
    "sys._current_frames",
    "sys._current_exceptions",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys.settrace",
    "sys.setprofile",
    "sys.addaudithook",
    "cpython.PyInterpreterState_Clear",
    "builtins.breakpoint",
    "webbrowser.open",
    "urllib.Request",
    "ftplib.connect",
    "smtplib.connect",
    "mmap.__new__",
    "resource.setrlimit",
    "resource.prlimit",
    "os.setuid",
    "os.setgid",
}
_PATH_EVENTS = {
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.symlink",
    "os.link",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.utime",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copyfile",
    "os.listdir",
    "os.scandir",
    "glob.glob",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _real(path: Any) -> str | None:
    if isinstance(path, int):
        return None
    try:
        return os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return "<unreadable path>"


class AuditGuard:
    def __init__(self, workdir: str, extra_read_roots: list[str]) -> None:
        self.armed = False
        self.violations: list[str] = []
        self.workdir = os.path.realpath(workdir)
        roots = {
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            self.workdir,
            sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["platstdlib"],
            str(Path(__file__).resolve().parents[2]),
            "/proc/self",
            "/proc/cpuinfo",
            "/proc/meminfo",
            "/sys/devices/system/cpu",
            "/sys/fs/cgroup",
            "/dev/null",
            "/dev/urandom",
            "/usr/local/cuda",
            "/usr/share/zoneinfo",
        }
        roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
        roots.update(p for p in sys.path if p and "site-packages" in p)
        roots.update(extra_read_roots)
        self.read_roots = tuple(sorted(os.path.realpath(r) for r in roots if r))

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _refuse(self, what: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(what)
        raise PermissionError(f"sandbox: {what} is not allowed")

    def _under(self, path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def _hook(self, event: str, args: tuple) -> None:
        if not self.armed:
            return
        if event == "open":
            path = _real(args[0])
            if path is None:
                return
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(flags & _WRITE_FLAGS)
            if writing and not self._under(path, (self.workdir,)):
                self._refuse(f"writing {path}")
            if not writing and not self._under(path, self.read_roots):
                self._refuse(f"reading {path}")
            return
        if event in _PATH_EVENTS:
            path = _real(args[0]) if args else None
            if path is None or not self._under(path, (self.workdir,)):
                self._refuse(f"{event}({path})")
            return
        if event in _BLOCKED_EVENTS or event.startswith(_BLOCKED_PREFIXES):
            self._refuse(event)
