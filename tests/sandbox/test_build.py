"""The builder's process hygiene: an interrupted build leaves no compiler behind; jobs are forked ready."""

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build.builder import Builder
from rubric_rl.sandbox.build.extension import ExtensionSpec, prepare_build
from rubric_rl.sandbox.build.job_server import SERVER_COMMAND, job_server


class Interrupted(Exception):
    pass


def build_jobs(cache: Path) -> list[psutil.Process]:
    """Live build jobs (and the compilers under them) working in this cache."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(cache) in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def fresh_build(cache: Path):
    """A build never seen before (so it is certainly still compiling two seconds in): parsing torch's headers
    alone takes longer than that."""
    source = f"// {uuid.uuid4()}\n#include <torch/extension.h>\ntorch::Tensor same(torch::Tensor x) {{ return x; }}\n"
    spec = ExtensionSpec(name="slow_enough", cpp_sources=[source], functions=["same"])
    return prepare_build(spec, SandboxConfig(backend="cpu", build={"cache_dir": cache}), None)


def assert_no_build_jobs(cache: Path) -> None:
    deadline = time.monotonic() + 5
    while build_jobs(cache) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not build_jobs(cache), [p.info["cmdline"] for p in build_jobs(cache)]
    assert not psutil.Process(job_server().pid).children()  # the job itself is gone too
    assert not list((cache / "tmp").iterdir())  # the half-built directory is gone


def test_a_build_past_its_limit_leaves_no_compiler_running(tmp_path: Path):
    # ninja gives every compiler its own process group: killing the job's group alone left them running.
    cache = tmp_path / "cache"
    outcome = Builder(cache, timeout_s=2.0, use_pch=False).build(fresh_build(cache))
    assert outcome.timed_out and not outcome.ok
    assert_no_build_jobs(cache)


def test_an_interrupted_build_kills_its_compile_job(tmp_path: Path):
    cache = tmp_path / "cache"
    builder = Builder(cache, use_pch=False)
    prepared = fresh_build(cache)

    def interrupt(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(Interrupted):
            builder.build(prepared)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    assert_no_build_jobs(cache)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_build_job_is_forked_with_torch_imported_on_the_builders_cpus_of_now(tmp_path: Path):
    # A fresh interpreter per job spent 1.2 s of CPU importing torch, of a split build's 10 (2 cores).
    cache = tmp_path / "cache"
    builder = Builder(cache, use_pch=False)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})  # after the fork server may have started: the job follows anyway
    try:
        outcome = builder.build(fresh_build(cache), mode="objects")
    finally:
        os.sched_setaffinity(0, before)
    assert outcome.ok, outcome.digest
    job = json.loads((builder.cache.entry_dir(outcome.key) / "result.json").read_text())["job"]
    assert job == {"preloaded": True, "cpus": [min(before)]}


@pytest.mark.slow
def test_a_build_whose_job_server_dies_is_an_infra_error_and_the_next_build_gets_a_new_server(tmp_path: Path):
    cache = tmp_path / "cache"
    builder = Builder(cache, use_pch=False)
    server = job_server()
    threading.Timer(2.0, lambda: os.kill(server.pid, signal.SIGKILL)).start()
    outcome = builder.build(fresh_build(cache), mode="objects")
    assert not outcome.ok and "job server ended" in (outcome.infra_error or ""), outcome
    assert_no_build_jobs(cache)  # its job, orphaned in its own session, was killed by the builder
    assert job_server() is not server
    assert builder.build(fresh_build(cache), mode="objects").ok


def test_the_job_server_starts_without_a_word_on_stderr():
    # Started as ``-m rubric_rl.sandbox.build.job_server`` it printed runpy's RuntimeWarning (the package had imported
    # the module already) on the builder's stderr at every start.
    proc = subprocess.run(SERVER_COMMAND, input=b"", capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stderr == b"" and proc.stdout == b"", proc.stderr.decode()
