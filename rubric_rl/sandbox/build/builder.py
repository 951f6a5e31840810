"""The sandbox owns compilation: a content-addressed, concurrency-safe build cache and the builder.

A build is keyed by everything that can change its output: the prepared sources and flags, the target
architectures, the compiler identities, the torch build and the Python ABI. Entries are written into a
private temporary directory and renamed into place, so a reader never sees a half-built entry; a per-key
``flock`` makes concurrent builders of one key wait for the first instead of compiling twice, and is released
by the kernel if its holder dies. Failed builds are cached too (a compiler's verdict is deterministic);
timeouts and infrastructure failures are not.

What this does not protect against: the compilers themselves process untrusted source (``#include`` of a
host file can leak its text into the log); run builders without access to secrets.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from rubric_rl.sandbox.build.compile_log import build_source_map, digest_compiler_output
from rubric_rl.sandbox.build.extension import PreparedBuild
from rubric_rl.sandbox.build.job_server import Job, JobServerGone, job_server
from rubric_rl.sandbox.run.proctree import kill_tree

log = logging.getLogger(__name__)

BUILD_RECIPE_VERSION = 1  # bump when the way builds are made changes, to invalidate old cache entries


class BuildRecord(BaseModel):
    """``build.json`` of a cache entry."""

    key: str
    ok: bool
    module_name: str | None = None
    library: str | None = None
    seconds: float
    digest: str | None = None
    log_tail: str | None = None
    split_sources: bool = False
    mode: Literal["full", "objects"] = "full"
    created: float


@dataclass
class BuildOutcome:
    """One build as the caller sees it."""

    key: str
    ok: bool
    cached: bool
    seconds: float
    library_path: Path | None = None
    module_name: str | None = None
    digest: str | None = None
    timed_out: bool = False
    infra_error: str | None = None
    prepared: PreparedBuild | None = None


@dataclass
class BuildStats:
    hits: int = 0
    misses: int = 0
    failures: int = 0
    timeouts: int = 0
    build_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, outcome: BuildOutcome) -> None:
        with self._lock:
            if outcome.cached:
                self.hits += 1
                return
            self.misses += 1
            self.build_seconds += outcome.seconds
            if outcome.timed_out:
                self.timeouts += 1
            elif not outcome.ok:
                self.failures += 1

    def as_dict(self) -> dict[str, float]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "failures": self.failures,
            "timeouts": self.timeouts,
            "build_seconds": round(self.build_seconds, 3),
        }


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return lines[-1] if cmd[0].endswith("nvcc") and lines else (lines[0] if lines else "absent")


@lru_cache(maxsize=1)
def toolchain_identity() -> dict[str, str]:
    """Everything outside the sources that changes a built library; part of every cache key."""
    import torch

    nvcc = shutil.which("nvcc")
    return {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", "") or "",
        "torch_cuda": str(torch.version.cuda),
        "python": f"{sys.implementation.cache_tag}",
        "cxx": _first_line([os.environ.get("CXX", "c++"), "--version"]),
        "nvcc": _first_line([nvcc, "--version"]) if nvcc else "absent",
        "recipe": str(BUILD_RECIPE_VERSION),
    }


def build_key(prepared: PreparedBuild, mode: Literal["full", "objects"] = "full") -> str:
    toolchain = dict(toolchain_identity())
    if not prepared.with_cuda:
        toolchain.pop("nvcc")
    payload = {"build": prepared.model_dump(exclude={"dropped_flags"}), "toolchain": toolchain, "mode": mode}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


class BuildCache:
    """``root/ext/<key>/`` holds finished entries; ``root/tmp`` builds in progress; ``root/locks`` the flocks."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        for sub in ("ext", "tmp", "locks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def entry_dir(self, key: str) -> Path:
        return self.root / "ext" / key

    def lookup(self, key: str) -> BuildRecord | None:
        path = self.entry_dir(key) / "build.json"
        try:
            return BuildRecord.model_validate_json(path.read_text())
        except FileNotFoundError:
            return None
        except ValueError:
            log.warning("corrupt cache entry %s; rebuilding", path.parent)
            return None

    @contextmanager
    def locked(self, key: str, timeout_s: float):
        fd = os.open(self.root / "locks" / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"waited {timeout_s:.0f}s for another build of {key}") from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)  # releases the flock

    def new_build_dir(self, key: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{key}.", dir=self.root / "tmp"))

    def commit(self, key: str, build_dir: Path, record: BuildRecord) -> Path:
        (build_dir / "build.json").write_text(record.model_dump_json(indent=1))
        final = self.entry_dir(key)
        if final.exists():  # a stale entry that failed to parse; replace it
            shutil.rmtree(final, ignore_errors=True)
        os.rename(build_dir, final)
        return final


class Builder:
    """Builds prepared extensions through the cache; safe to share between threads and processes."""

    def __init__(
        self, cache_dir: Path, *, timeout_s: float = 600.0, jobs: int | None = None, use_pch: bool = True
    ) -> None:
        self.cache = BuildCache(cache_dir)
        self.timeout_s = timeout_s
        self.jobs = jobs
        self.use_pch = use_pch
        self.stats = BuildStats()

    def build(
        self, prepared: PreparedBuild, *, candidate: str | None = None, mode: Literal["full", "objects"] = "full"
    ) -> BuildOutcome:
        key = build_key(prepared, mode)
        outcome = self._cached(key, prepared)
        if outcome is None:
            try:
                with self.cache.locked(key, self.timeout_s * 2):
                    outcome = self._cached(key, prepared) or self._compile(key, prepared, candidate, mode)
            except TimeoutError as e:
                outcome = BuildOutcome(
                    key=key, ok=False, cached=False, seconds=0.0, infra_error=str(e), prepared=prepared
                )
        self.stats.add(outcome)
        return outcome

    def _cached(self, key: str, prepared: PreparedBuild) -> BuildOutcome | None:
        record = self.cache.lookup(key)
        if record is None:
            return None
        return _outcome(key, record, self.cache.entry_dir(key), prepared, cached=True)

    def _compile(
        self, key: str, prepared: PreparedBuild, candidate: str | None, mode: Literal["full", "objects"]
    ) -> BuildOutcome:
        """Run one build job in a fresh directory and commit what it made, a failed compile too, to the cache;
        a job that timed out, died or lost its job server leaves nothing there."""
        build_dir = self.cache.new_build_dir(key)
        request = self._write_request(build_dir, prepared, mode)
        started = time.monotonic()
        try:
            code = self._run_job(request, build_dir, prepared)
        except JobServerGone as e:
            return _abandoned(build_dir, key, prepared, time.monotonic() - started, infra_error=str(e))
        seconds = time.monotonic() - started
        if code is None:
            limit = f"build exceeded its {self.timeout_s:.0f} s limit"
            return _abandoned(build_dir, key, prepared, seconds, timed_out=True, digest=limit)
        try:
            result = _read_result(build_dir, code, mode)
        except _NothingToCache as e:
            return _abandoned(build_dir, key, prepared, seconds, infra_error=str(e))
        record = _record(key, result, seconds, prepared, mode, build_dir, candidate)
        (build_dir / "request.json").unlink(missing_ok=True)
        entry = self.cache.commit(key, build_dir, record)
        return _outcome(key, record, entry, prepared, cached=False)

    def _write_request(self, build_dir: Path, prepared: PreparedBuild, mode: Literal["full", "objects"]) -> Path:
        """The job's ``request.json``: what to build, where, and the shared PCH to use."""
        request = build_dir / "request.json"
        request.write_text(
            json.dumps(
                {
                    "build": prepared.model_dump(),
                    "build_dir": str(build_dir),
                    "mode": mode,
                    "pch_root": str(self.cache.root / "pch") if self.use_pch else None,
                    "pch_timeout_s": self.timeout_s,
                }
            )
        )
        return request

    def _run_job(self, request: Path, build_dir: Path, prepared: PreparedBuild) -> int | None:
        """Run the build job through the job server: its exit code, or None when it ran past the limit (killed)."""
        env = dict(os.environ)
        env["TORCH_EXTENSIONS_DIR"] = str(build_dir)
        if prepared.arch_list:
            env["TORCH_CUDA_ARCH_LIST"] = prepared.arch_list
        if self.jobs:
            env["MAX_JOBS"] = str(self.jobs)
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        job = job_server().start(str(request), env, str(build_dir / "job.log"), cores)
        try:
            code = job.wait(self.timeout_s)
        except BaseException:  # JobServerGone too: the job lives on in its own session
            # The job runs in its own session (so a timeout can kill nvcc and ninja with it) and would
            # otherwise outlive an interrupted wait (KeyboardInterrupt, a test's timeout): compiling on,
            # holding cores and, while it builds the shared PCH, the PCH's lock that other builds wait on.
            _kill_job(job)
            shutil.rmtree(build_dir, ignore_errors=True)
            raise
        if code is None:
            _kill_job(job)
        return code


class _NothingToCache(Exception):
    """A finished build job that left no result worth caching (it died, or our side failed); the message says why."""


def _read_result(build_dir: Path, code: int, mode: Literal["full", "objects"]) -> dict[str, Any]:
    """The job's ``result.json``, with the library it reports in place; raises _NothingToCache otherwise."""
    try:
        result = json.loads((build_dir / "result.json").read_text())
    except (FileNotFoundError, ValueError):
        job_log = build_dir / "job.log"
        tail = job_log.read_text(errors="replace")[-2000:] if job_log.exists() else "(it wrote no log)"
        raise _NothingToCache(f"build job died (exit {code}): {tail}") from None
    if result.get("infra_error"):
        raise _NothingToCache(result["infra_error"])
    library = f"{result['module_name']}.so" if result["ok"] and mode == "full" else None
    if library and not (build_dir / library).exists():
        raise _NothingToCache(f"build reported success but {library} is missing")
    return result


def _record(
    key: str,
    result: dict[str, Any],
    seconds: float,
    prepared: PreparedBuild,
    mode: Literal["full", "objects"],
    build_dir: Path,
    candidate: str | None,
) -> BuildRecord:
    """``build.json`` of a finished job: the module it built, or the compiler's errors digested."""
    if result["ok"]:
        module_name = result["module_name"]
        return BuildRecord(
            key=key,
            ok=True,
            module_name=module_name,
            library=f"{module_name}.so" if mode == "full" else None,
            seconds=seconds,
            split_sources=prepared.split_sources,
            mode=mode,
            created=time.time(),
        )
    raw = result.get("log", "")
    source_map = build_source_map(build_dir, candidate, prepared.cpp_sources, prepared.cuda_sources)
    return BuildRecord(
        key=key,
        ok=False,
        seconds=seconds,
        digest=digest_compiler_output(raw, source_map),
        log_tail=raw[-8000:],
        split_sources=prepared.split_sources,
        mode=mode,
        created=time.time(),
    )


def _outcome(key: str, record: BuildRecord, entry: Path, prepared: PreparedBuild, *, cached: bool) -> BuildOutcome:
    """The caller's view of a cache entry, found there or just committed."""
    return BuildOutcome(
        key=key,
        ok=record.ok,
        cached=cached,
        seconds=record.seconds,
        library_path=entry / record.library if record.library else None,
        module_name=record.module_name,
        digest=record.digest,
        prepared=prepared,
    )


def _abandoned(build_dir: Path, key: str, prepared: PreparedBuild, seconds: float, **why: Any) -> BuildOutcome:
    """A build that leaves nothing in the cache: its directory removed, a failed outcome saying why."""
    shutil.rmtree(build_dir, ignore_errors=True)
    return BuildOutcome(key=key, ok=False, cached=False, seconds=seconds, prepared=prepared, **why)


def _kill_job(job: Job) -> None:
    """Kill a build job with the compilers under it (ninja gives each its own process group) and see it end."""
    kill_tree(job.pid)
    try:
        job.wait(30)
    except JobServerGone:
        pass
