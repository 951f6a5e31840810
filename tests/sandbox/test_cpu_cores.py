"""Reserving CPU cores for timings: the plan, and moving a real process's threads."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rubric_rl.sandbox.run.cpu_cores import parse_cpu_list, physical_cores, pin_process, plan_cores, thread_affinities

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity (Linux)")


def fake_sysfs(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, text in siblings.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(text + "\n")
    return root


def test_cpu_lists_are_parsed():
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("5") == {5}
    with pytest.raises(ValueError):
        parse_cpu_list("a-b")


def test_hyperthread_siblings_are_one_core(tmp_path):
    # 8 cores, 2 threads each, numbered the way Linux numbers them on x86 (cpu i and i+8 share a core).
    sysfs = fake_sysfs(tmp_path, {i: f"{i % 8},{i % 8 + 8}" for i in range(16)})
    cores = physical_cores(frozenset(range(16)), sysfs)
    assert cores == [frozenset({i, i + 8}) for i in range(8)]
    # A sibling outside our mask (a cpuset) is not ours to take.
    assert physical_cores(frozenset({0, 1, 9}), sysfs) == [frozenset({0}), frozenset({1, 9})]
    # Unreadable topology: every CPU its own core.
    assert physical_cores(frozenset({0, 3}), tmp_path / "missing") == [frozenset({0}), frozenset({3})]


@linux_only
def test_whole_cores_are_reserved_per_device_from_the_top(tmp_path):
    sysfs = fake_sysfs(tmp_path, {i: f"{i % 8},{i % 8 + 8}" for i in range(16)})
    plan = plan_cores(["0"], 2, frozenset(range(16)), sysfs=sysfs)
    assert plan.active and plan.timing == {"0": frozenset({7, 15})}
    assert plan.general == frozenset(range(16)) - {7, 15}
    two = plan_cores(["0", "1"], 3, frozenset(range(16)), sysfs=sysfs)  # 3 logical CPUs: two whole cores each
    assert two.timing == {"0": frozenset({6, 7, 14, 15}), "1": frozenset({4, 5, 12, 13})}
    assert not two.general & (two.timing["0"] | two.timing["1"])


@linux_only
def test_nothing_is_reserved_when_the_cores_are_too_few(tmp_path):
    flat = tmp_path / "none"
    assert not plan_cores(["0"], 0, frozenset(range(16)), sysfs=flat).active
    assert not plan_cores([], 2, frozenset(range(16)), sysfs=flat).active
    # 8 GPUs x 2 on 16 CPUs would leave nothing for builds and workers.
    tight = plan_cores([str(i) for i in range(8)], 2, frozenset(range(16)), sysfs=flat)
    assert not tight.active and tight.general == frozenset(range(16))
    # One core whose two threads are both needed: nothing left for everything else.
    ht = fake_sysfs(tmp_path / "ht", {0: "0,1", 1: "0,1"})
    assert not plan_cores(["0"], 1, frozenset({0, 1}), sysfs=ht).active


@linux_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_every_thread_of_a_running_process_is_moved():
    mine = sorted(os.sched_getaffinity(0))
    # A child with several threads already running, and one it starts after the move.
    code = (
        "import threading, time, sys\n"
        "ev = threading.Event()\n"
        "ts = [threading.Thread(target=ev.wait) for _ in range(3)]\n"
        "[t.start() for t in ts]\n"
        "print('up', flush=True)\n"
        "sys.stdin.readline()\n"
        "late = threading.Thread(target=ev.wait); late.start()\n"
        "print('late', flush=True)\n"
        "sys.stdin.readline(); ev.set()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        target = frozenset({mine[-1]})
        assert pin_process(child.pid, target) >= 4
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "late"
        masks = thread_affinities(child.pid)
        assert len(masks) >= 5 and set(masks.values()) == {target}
        back = frozenset(mine)
        pin_process(child.pid, back)
        assert set(thread_affinities(child.pid).values()) == {back}
    finally:
        child.kill()
        child.wait()
    time.sleep(0)
    assert pin_process(child.pid, frozenset(mine)) == 0  # gone: nothing to move, no error
