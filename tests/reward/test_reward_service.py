"""One bounded evaluation service per node under Ray: verl's RewardLoopManager with 2 reward workers shares one
executor; killing the service (SIGTERM or SIGKILL of its process) leaves none of its workers running."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_env import python_path

from rubric_rl.reward import read_ledger

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "rubric_rl_test"


@pytest.fixture(scope="module")
def local_ray(build_cache: Path) -> Iterator[None]:
    env = {
        "PYTHONPATH": python_path(),
        "RUBRIC_RL_CACHE": str(build_cache),
    }
    if ray.is_initialized():  # an earlier test's executor or service started one in this process
        ray.shutdown()
    ray.init(
        num_cpus=4, namespace=NAMESPACE, include_dashboard=False, runtime_env={"env_vars": env}, log_to_driver=False
    )
    yield
    ray.shutdown()


def services() -> list[str]:
    return [
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("rubric_rl.eval.")
    ]


def gone_within(pids: dict[int, float], seconds: float) -> list[int]:
    """The listed processes (same create time) still running after ``seconds``."""
    import psutil

    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for pid, created in pids.items():
            try:
                p = psutil.Process(pid)
                if abs(p.create_time() - created) < 0.01 and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.Error:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def test_two_reward_workers_share_one_executor(local_ray, tokenizer_dir, tmp_path, write_yaml, reference, responses):
    pytest.importorskip("verl")
    from test_reward_verl import compose, make_rows, reward_overrides
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager
    from verl.utils import hf_tokenizer

    from rubric_rl.sandbox.executors.service import descendants

    reward_yaml = write_yaml(
        tmp_path / "reward.yaml",
        {
            "rule": {"name": "milestone"},
            "mix": {"name": "none"},
            "service": {"mode": "ray", "namespace": NAMESPACE, "max_inflight": 4},
            "ledger": {"dir": str(tmp_path / "run")},
            "backend": "cpu",
        },
    )
    manager = RewardLoopManager(compose(reward_overrides(tokenizer_dir, reward_yaml, workers=2)))
    assert len(manager.reward_loop_workers) == 2
    # Two hacks (decided by the static checks, before any worker starts) and two wrong programs (run in the
    # executor's workers, whose end with the service is checked below).
    hack, wrong = responses["hack"], responses["incorrect"]
    texts = [hack, hack.replace("Here is", "Here's"), wrong, wrong]
    rows = make_rows(hf_tokenizer(str(tokenizer_dir)), reference, texts, ["a", "a", "b", "b"])
    out = manager.compute_rm_score(rows)
    assert out.batch["rm_scores"].sum(-1).tolist() == [-1.0] * 4  # the hack penalty, and milestone's fail
    assert list(out.non_tensor_batch["hack"]) == [1.0, 1.0, 0.0, 0.0]

    names = services()
    assert len(names) == 1, names
    stats = ray.get(ray.get_actor(names[0], namespace=NAMESPACE).stats.remote())
    assert stats["executors_created"] == 1 and stats["evaluations"] == 4
    assert len(stats["clients"]) == 2, stats["clients"]  # both reward workers, one service
    assert len(list(read_ledger(tmp_path / "run"))) == 4
    workers = descendants(stats["pid"])
    workers.pop(stats["watchdog_pid"], None)
    assert workers, "the local executor keeps warm workers"
    for w in manager.reward_loop_workers:  # the run ends: the service, owned by a reward worker, ends with it
        ray.kill(w)
    deadline = time.monotonic() + 60
    while services() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert services() == []
    assert gone_within(workers, 15.0) == []


def test_detached_service_is_shut_down_by_name(local_ray, reference, responses):
    from rubric_rl.reward.scorer import SampleInfo, make_reference_task
    from rubric_rl.sandbox import SandboxConfig
    from rubric_rl.sandbox.executors.service import ServiceExecutor, descendants, shutdown_service
    from rubric_rl.skills import extract_program

    client = ServiceExecutor(
        SandboxConfig(backend="cpu"), name="rubric_rl.eval.detached", namespace=NAMESPACE, lifetime="detached"
    )
    program = extract_program(responses["hack"]).program
    assert program is not None
    task = make_reference_task(reference, SampleInfo(task_id="fused_add_relu"), "test")
    assert asyncio.run(client.evaluate(task, program)).status == "hack"
    stats = client.stats()
    procs = descendants(stats["pid"]) | {stats["pid"]: __import__("psutil").Process(stats["pid"]).create_time()}
    assert shutdown_service("rubric_rl.eval.detached", NAMESPACE)
    assert gone_within(procs, 15.0) == []
    assert not shutdown_service("rubric_rl.eval.detached", NAMESPACE)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_service_leaves_no_worker(local_ray, reference, responses, sig):
    """A candidate spinning in native code holds a worker; the service process is killed mid-evaluation."""
    from rubric_rl.reward.scorer import SampleInfo, make_reference_task
    from rubric_rl.sandbox import SandboxConfig
    from rubric_rl.sandbox.executors.service import ServiceExecutor, descendants, service_name
    from rubric_rl.skills import extract_program

    prefix = f"rubric_rl.eval.kill{int(sig)}"
    client = ServiceExecutor(SandboxConfig(backend="cpu"), name=prefix, namespace=NAMESPACE)
    actor = client.actor()
    pid = ray.get(actor.stats.remote())["pid"]
    program = extract_program(responses["hang"]).program
    assert program is not None
    task = make_reference_task(reference, SampleInfo(task_id="fused_add_relu"), "test")

    async def run():
        evaluation = asyncio.ensure_future(client.evaluate(task, program))
        seen: dict[int, float] = {}
        deadline = time.monotonic() + 400  # the faults extension may have to be built first
        while time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            stats = await actor.stats.remote()
            now = descendants(pid)
            now.pop(stats["watchdog_pid"], None)
            seen.update(now)
            if stats["in_flight"] == 1 and busy_worker(now):
                break
        else:
            pytest.fail("the hanging candidate never ran")
        os.kill(pid, sig)
        verdict = await asyncio.wait_for(evaluation, 60)
        return seen, verdict

    seen, verdict = asyncio.run(run())
    assert verdict.infra_error is not None and "is gone" in verdict.infra_error  # masked, not scored
    assert seen
    assert gone_within(seen, 15.0) == []
    assert service_name(prefix, client.node_id) not in services()


def busy_worker(procs: dict[int, float]) -> bool:
    """A sandbox worker process has been spinning for a while (the candidate's forward)."""
    import psutil

    for pid in procs:
        try:
            p = psutil.Process(pid)
            if "rubric_rl.sandbox" in " ".join(p.cmdline()) and p.cpu_times().user > 3.0:
                return True
        except psutil.Error:
            continue
    return False


def test_kernel_metrics_through_the_service(local_ray, reference, responses):
    """The agent's profile tool under Ray asks the node's service: its answer comes back whole (here, on the cpu
    backend, why there are no GPU kernels to measure), never the default of an executor that cannot run ncu."""
    from rubric_rl.reward.scorer import SampleInfo, make_reference_task
    from rubric_rl.sandbox import NcuOptions, SandboxConfig
    from rubric_rl.sandbox.executors.service import ServiceExecutor, shutdown_service
    from rubric_rl.sandbox.measure.kernel_metrics import CPU_BACKEND
    from rubric_rl.skills import extract_program

    client = ServiceExecutor(SandboxConfig(backend="cpu"), name="rubric_rl.eval.ncu", namespace=NAMESPACE)
    program = extract_program(responses["correct"]).program
    assert program is not None
    task = make_reference_task(reference, SampleInfo(task_id="fused_add_relu"), "test")
    try:
        report = asyncio.run(client.kernel_metrics(task, program, NcuOptions(max_kernels=3)))
        assert report.error == CPU_BACKEND and report.kernels == []
    finally:
        shutdown_service("rubric_rl.eval.ncu", NAMESPACE)
