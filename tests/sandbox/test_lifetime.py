"""Nothing the evaluator starts outlives it: workers, build servers and compilers end with the process that
started them, whatever ends it (SIGTERM, SIGKILL, the end of a thread)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
from child_env import child_env

from rubric_rl.sandbox.run.spawn import popen

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = REPO / "tests" / "programs"
COMMAND = [sys.executable, "-c", "from rubric_rl.cli import main; main()"]


def _gone(procs: list[psutil.Process], within_s: float) -> list[psutil.Process]:
    """Those of ``procs`` still running after ``within_s`` seconds (zombies count as gone)."""
    end = time.monotonic() + within_s
    alive = procs
    while alive and time.monotonic() < end:
        time.sleep(0.2)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in alive:  # never leave them to the rest of the suite
        p.kill()
    return alive


def test_a_child_outlives_the_thread_that_started_it():
    # The kernel's parent-death signal follows the thread that forked: a worker started from a short-lived
    # thread (the executor starts spares from such threads) must not die when that thread ends.
    started: list[subprocess.Popen[bytes]] = []
    t = threading.Thread(target=lambda: started.append(popen(["sleep", "30"])))
    t.start()
    t.join()
    time.sleep(1.0)
    try:
        assert started[0].poll() is None
    finally:
        started[0].kill()
        started[0].wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_child_dies_with_the_process_that_started_it(sig):
    script = (
        "import threading, time\n"
        "from rubric_rl.sandbox.run.spawn import popen\n"
        "t = threading.Thread(target=lambda: print(popen(['sleep', '60']).pid, flush=True)); t.start(); t.join()\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    parent.send_signal(sig)
    parent.wait()
    assert _gone([child], within_s=5) == []


# ---- the commands, killed mid-evaluation -----------------------------------------------------------------------
def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _wait_for(cmd: subprocess.Popen[bytes], what: str, ready, timeout_s: float = 240) -> list[psutil.Process]:
    """The command's processes once one of them is ``ready``; fails at once if the command ends first."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        procs = _descendants(cmd.pid)
        if any(ready(p) for p in procs):
            return procs
        if cmd.poll() is not None:
            raise AssertionError(f"the command exited ({cmd.returncode}) before a {what} showed: {_stderr(cmd)}")
        time.sleep(0.25)
    raise AssertionError(f"no {what} among the command's processes in {timeout_s:.0f} s: {_stderr(cmd)}")


_STDERR: dict[int, Path] = {}  # pid of a command _start started -> the file its stderr goes to


def _stderr(cmd: subprocess.Popen[bytes]) -> str:
    path = _STDERR.get(cmd.pid)
    return path.read_text(errors="replace")[-2000:] if path is not None else ""


def _spinning_worker(p: psutil.Process) -> bool:
    """A worker that has burnt more CPU than importing torch and running the reference take: in the loop."""
    try:
        return "rubric_rl.sandbox.run.worker" in " ".join(p.cmdline()) and p.cpu_times().user > 8
    except psutil.Error:
        return False


def _compiler(p: psutil.Process) -> bool:
    try:
        return p.name() in {"cc1plus", "ninja", "c++", "g++", "x86_64-linux-gnu-g++"}
    except psutil.Error:
        return False


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    stderr = tmp_path / "command.stderr"
    with stderr.open("wb") as err:
        cmd = subprocess.Popen(COMMAND + args, cwd=tmp_path, env=child_env(), stdout=subprocess.DEVNULL, stderr=err)
    _STDERR[cmd.pid] = stderr
    return cmd


def _kill_and_check(cmd: subprocess.Popen[bytes], procs: list[psutil.Process], sig: signal.Signals) -> None:
    procs = procs + [p for p in _descendants(cmd.pid) if p not in procs]
    cmd.send_signal(sig)
    cmd.wait(timeout=30)
    left = _gone(procs, within_s=10)
    assert left == [], f"left running after {sig.name}: {[(p.pid, p.name()) for p in left]}"


@pytest.fixture
def reference(examples_dir: Path) -> Path:
    return examples_dir / "fused_add_relu" / "reference.py"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_verify_killed_while_the_candidate_spins_leaves_nothing(sig, reference, build_cache, tmp_path):
    cmd = _start(
        ["verify", str(reference), str(PROGRAMS / "fault_hang.py"), "--device", "cpu", "--cache-dir", str(build_cache)],
        tmp_path,
    )
    procs = _wait_for(cmd, "worker spinning in the candidate's loop", _spinning_worker)
    _kill_and_check(cmd, procs, sig)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_verify_killed_mid_build_leaves_nothing(sig, reference, build_cache, tmp_path):
    # A source no cache holds: the build runs while the command is killed.
    fresh = (
        (PROGRAMS / "fault_honest.py")
        .read_text()
        .replace("#include <cstdlib>", f"#include <cstdlib>\n// {uuid.uuid4()}")
    )
    candidate = tmp_path / "fresh.py"
    candidate.write_text(fresh)
    cmd = _start(
        ["verify", str(reference), str(candidate), "--device", "cpu", "--cache-dir", str(build_cache)], tmp_path
    )
    procs = _wait_for(cmd, "compiler", _compiler)
    _kill_and_check(cmd, procs, sig)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_verify_batch_killed_while_a_candidate_spins_leaves_nothing(sig, reference, build_cache, tmp_path):
    tasks, candidates = tmp_path / "tasks.jsonl", tmp_path / "candidates.jsonl"
    tasks.write_text(json.dumps({"level": None, "problem_id": 1, "name": "add_relu", "code": reference.read_text()}))
    candidates.write_text(
        json.dumps({"candidate_id": "hang", "task_id": "T-1", "code": (PROGRAMS / "fault_hang.py").read_text()})
    )
    args = ["verify-batch", "--tasks", str(tasks), "--candidates", str(candidates), "--out", str(tmp_path / "run")]
    cmd = _start(args + ["--device", "cpu", "--no-compile", "--cache-dir", str(build_cache)], tmp_path)
    procs = _wait_for(cmd, "worker spinning in the candidate's loop", _spinning_worker)
    _kill_and_check(cmd, procs, sig)


# ---- on a GPU: the device's memory comes back too ------------------------------------------------------------
def _gpu_memory_used_mb() -> float:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "--id=0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.strip().splitlines()[0])


def _worker(p: psutil.Process) -> bool:
    try:
        return "rubric_rl.sandbox.run.worker" in " ".join(p.cmdline())
    except psutil.Error:
        return False


@pytest.mark.gpu
@pytest.mark.alone_on_gpu  # the device's memory level is read for the whole GPU: no other test may move it
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_verify_killed_on_a_gpu_gives_back_the_device(sig, build_cache, tmp_path):
    gpu = REPO / "tests" / "programs" / "gpu"
    before = _gpu_memory_used_mb()
    cmd = _start(
        ["verify", str(gpu / "reference_large.py"), str(gpu / "hang.py"), "--device", "cuda", "--no-compile"]
        + ["--cache-dir", str(build_cache)],
        tmp_path,
    )
    procs = _wait_for(cmd, "worker", _worker, timeout_s=400)
    end = time.monotonic() + 400
    while _gpu_memory_used_mb() < before + 100 and time.monotonic() < end:
        time.sleep(0.5)
    assert _gpu_memory_used_mb() >= before + 100  # a worker holds device memory
    time.sleep(15)  # past the build and the reference: in the candidate's endless kernel
    _kill_and_check(cmd, procs, sig)
    end = time.monotonic() + 30
    while _gpu_memory_used_mb() > before + 64 and time.monotonic() < end:
        time.sleep(0.5)
    assert _gpu_memory_used_mb() <= before + 64
