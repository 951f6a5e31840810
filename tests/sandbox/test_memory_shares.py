"""A device's memory: shares side by side, or held whole by an evaluation that ran out of its share."""

import asyncio
import threading
import time

import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.evaluate import Evaluator
from rubric_rl.sandbox.executors import ExecutorConfig
from rubric_rl.sandbox.executors.local import LocalExecutor, out_of_device_memory
from rubric_rl.sandbox.executors.memory_shares import MemoryShares
from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.tasks.task import Task


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_shares_are_held_side_by_side_and_the_whole_alone():
    async def main():
        mem = MemoryShares(["0", "1"])
        order: list[str] = []
        first, second = mem.share("0"), mem.share("0")
        await first.__aenter__()
        await second.__aenter__()
        assert mem.holders("0") == 2

        async def whole():
            async with mem.whole("0"):
                order.append("whole in")
                assert mem.holders("0") == 0
                await asyncio.sleep(0.01)
                order.append("whole out")

        async def late_share():
            async with mem.share("0"):
                order.append("late share")

        async def other_device():
            async with mem.share("1"):
                order.append("device 1")

        w = asyncio.ensure_future(whole())
        await _settle()
        late = asyncio.ensure_future(late_share())  # asked after the whole was: waits behind it (no starvation)
        other = asyncio.ensure_future(other_device())
        await _settle()
        assert order == ["device 1"] and not w.done() and not late.done()
        await first.__aexit__(None, None, None)
        await _settle()
        assert not mem.held_whole("0")  # one share is still held
        await second.__aexit__(None, None, None)
        await asyncio.gather(w, late, other)
        assert order == ["device 1", "whole in", "whole out", "late share"]

    asyncio.run(main())


def test_a_baseline_passes_a_waiting_whole_only_while_a_share_holder_awaits_a_baseline():
    # Evaluations that hold shares may be waiting for their task's baseline: a baseline queued behind a
    # whole-memory request that waits for those evaluations would never run. But a baseline that passes a
    # waiting request always starves it: on the H200, 31 baselines in a row kept three waiting 203-220 s.
    async def main():
        mem = MemoryShares(["0"])
        held = mem.share("0")
        await held.__aenter__()
        w_entered = asyncio.Event()
        w_release = asyncio.Event()

        async def whole():
            async with mem.whole("0"):
                w_entered.set()
                await w_release.wait()

        w = asyncio.ensure_future(whole())
        await _settle()
        queued_cm = mem.share("0", baseline=True)  # referenced: a collected context manager gives its share back
        queued = asyncio.ensure_future(queued_cm.__aenter__())
        await _settle()
        assert not queued.done()  # nobody waits for it: behind the request
        async with mem.awaiting_baseline("0"):  # the holder now waits for a baseline
            await asyncio.wait_for(queued, 1)  # passes the waiting request
            assert mem.holders("0") == 2
            async with mem.share("0", baseline=True):
                assert mem.holders("0") == 3
            later_cm = mem.share("0")
            later = asyncio.ensure_future(later_cm.__aenter__())  # an evaluation's share never passes
            await _settle()
            assert not later.done()
        await queued_cm.__aexit__(None, None, None)
        await held.__aexit__(None, None, None)
        await w_entered.wait()
        assert not later.done()
        baseline_cm = mem.share("0", baseline=True)
        baseline = asyncio.ensure_future(baseline_cm.__aenter__())
        async with mem.awaiting_baseline("0"):
            await _settle()
            assert not baseline.done()  # the whole is held: nobody else allocates
        w_release.set()
        await asyncio.wait_for(baseline, 1)
        await baseline_cm.__aexit__(None, None, None)
        await asyncio.wait_for(later, 1)
        await later_cm.__aexit__(None, None, None)
        await w
        assert mem.holders("0") == 0

    asyncio.run(main())


def test_a_cancelled_whole_request_lets_the_shares_behind_it_go():
    async def main():
        mem = MemoryShares(["0"])
        held = mem.share("0")
        await held.__aenter__()

        async def whole():
            async with mem.whole("0"):
                pass

        w = asyncio.ensure_future(whole())
        await _settle()
        late = asyncio.ensure_future(mem.share("0").__aenter__())
        await _settle()
        assert not late.done()
        w.cancel()
        await asyncio.wait_for(late, 1)

    asyncio.run(main())


def test_out_of_memory_in_any_stage_is_recognised():
    def verdict(status, error, infra=None):
        return Verdict(status=status, task_id="t", candidate_sha256="0", errors=[error], infra_error=infra)

    reference = (
        "task error (reference): the reference program failed: OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 6.00 GiB."
    )
    assert out_of_device_memory(verdict("runtime_error", reference, reference))
    assert out_of_device_memory(verdict("runtime_error", "load: RuntimeError: CUDA error: out of memory"))
    assert not out_of_device_memory(verdict("runtime_error", "correctness trial 0: illegal memory access"))


_OOM = "task error (reference): the reference program failed: OutOfMemoryError: CUDA out of memory."


def test_an_evaluation_out_of_its_share_runs_again_with_the_whole_device(tmp_path, monkeypatch):
    """KernelBench L1-19's seven 6 GB reference outputs ran out of a 4-slot share on the H200 and were scored
    runtime_error: the retry then held the gate alone while the other workers still held their memory."""
    sandbox = SandboxConfig(backend="cpu", cache_dir=tmp_path / "build", measure_performance=False)
    ex = LocalExecutor(sandbox, ExecutorConfig(cpu_slots=3, prewarm=False, reuse_baselines=False, prebuild=False))
    ex._alone_config = sandbox.model_copy(update={"gpu_memory_fraction": 0.9})  # as a cuda executor divides it
    lock = threading.Lock()
    running: list[str] = []
    calls: list[tuple[str, bool, int]] = []  # (program, alone, evaluations running beside it)

    def fake_evaluate(self, reference, program, *, task_id=None, alone=False, **_):
        with lock:
            calls.append((program, alone, len(running)))
            running.append(program)
        time.sleep(0.15)
        with lock:
            running.remove(program)
        if program.startswith("big") and not alone:
            return Verdict(
                status="runtime_error", task_id=task_id, candidate_sha256="0", errors=[_OOM], infra_error=_OOM
            )
        return Verdict(status="correct", task_id=task_id, candidate_sha256="0")

    monkeypatch.setattr(Evaluator, "evaluate", fake_evaluate)

    def task(i: str) -> Task:
        return Task(id=i, problem_id=1, name=i, origin="test", code=f"# task {i}\n")

    big, small = task("L1-19"), task("L1-1")

    async def main():
        first = await asyncio.gather(
            ex.evaluate(big, "big-a"), *(ex.evaluate(small, f"small-{i}") for i in range(4)), ex.evaluate(big, "big-b")
        )
        later = await ex.evaluate(big, "big-c")
        return first, later

    try:
        first, later = asyncio.run(main())
    finally:
        asyncio.run(ex.close())
    assert [v.status for v in first] == ["correct"] * 6 and later.status == "correct"
    whole = [(p, n) for p, alone, n in calls if alone]
    assert sorted(p for p, _ in whole) == ["big-a", "big-b", "big-c"]
    assert all(n == 0 for _, n in whole), calls  # nothing else ran on the device beside a whole-memory retry
    # big-a's reference stage ran out of its share: the task is known, and its later candidates (big-b waited
    # for a slot behind the small ones) take the whole memory without trying a share first.
    assert [c for c in calls if c[0] in ("big-b", "big-c")] == [("big-b", True, 0), ("big-c", True, 0)]
    stats = ex.stats()
    assert stats["memory_retried"] == ["candidate L1-19"] and stats["whole_memory_tasks"] == 1
    assert len(stats["memory_waits_s"]) == 3


@pytest.mark.parametrize("status", ["incorrect", "correct"])
def test_only_a_failure_for_memory_is_retried(status):
    v = Verdict(status=status, task_id="t", candidate_sha256="0", errors=["CUDA out of memory"])
    assert not out_of_device_memory(v)


def test_a_baseline_out_of_its_share_is_measured_beside_the_tasks_whole_memory_candidates(tmp_path, monkeypatch):
    """On the H200, ten L1 baselines ran out of their shares and were measured again alone: each held the
    device exclusively for its worker's start and torch.compile's warm-up (5-18 s), every other evaluation
    paused, only for the task's candidates to take the whole device next. The candidates' whole-memory runs
    now time eager and compile beside them, and the first such run gives the task its baseline."""
    from rubric_rl.sandbox.evaluate import BaselineError, TaskBaseline
    from rubric_rl.sandbox.timing import summarize
    from rubric_rl.sandbox.verdict import Timings

    sandbox = SandboxConfig(backend="cpu", cache_dir=tmp_path / "build")
    ex = LocalExecutor(sandbox, ExecutorConfig(cpu_slots=2, prewarm=False, prebuild=False))
    ex._alone_config = sandbox.model_copy(update={"gpu_memory_fraction": 0.9})
    measured: list[tuple[str, bool]] = []
    calls: list[tuple[str, bool, str | None, bool]] = []  # (program, alone, baseline source, awaiting one)

    def fake_measure(self, reference, *, alone=False, **_):
        measured.append((reference, alone))
        if "big" in reference:
            raise BaselineError("baseline measurement failed: OutOfMemoryError: CUDA out of memory.")
        return TaskBaseline(eager=summarize([2.0]), compile=summarize([1.0]), compile_mode="default")

    def fake_evaluate(self, reference, program, *, task_id=None, alone=False, baseline=None, await_baseline=None, **_):
        if await_baseline is not None and not program.startswith("big"):
            baseline = await_baseline()
        calls.append((program, alone, baseline.source if baseline else None, await_baseline is not None))
        if program.startswith("big") and not alone:
            return Verdict(
                status="runtime_error", task_id=task_id, candidate_sha256="0", errors=[_OOM], infra_error=_OOM
            )
        if baseline is None:  # the worker compiled the reference itself and timed it beside the candidate
            timings = Timings(
                timer="host", candidate=summarize([1.5]), eager=summarize([3.0]), compile=summarize([2.0])
            )
        else:
            timings = Timings(
                timer="host",
                candidate=summarize([1.5]),
                eager=summarize([3.0]),
                compile=baseline.compile,
                baseline_source="reused",
            )
        return Verdict(status="correct", task_id=task_id, candidate_sha256="0", timings=timings)

    monkeypatch.setattr(Evaluator, "measure_baseline", fake_measure)
    monkeypatch.setattr(Evaluator, "evaluate", fake_evaluate)
    big = Task(id="L1-19", problem_id=19, name="relu", origin="test", code="# big task\n")
    small = Task(id="L1-1", problem_id=1, name="matmul", origin="test", code="# small task\n")

    async def main():
        first = await asyncio.gather(ex.evaluate(big, "big-a"), ex.evaluate(small, "small-a"))
        later = await ex.evaluate(big, "big-b")
        return first, later

    try:
        (big_a, small_a), big_b = asyncio.run(main())
    finally:
        asyncio.run(ex.close())
    assert big_a.status == small_a.status == big_b.status == "correct"
    # The big baseline was tried once, in its share, and never again alone.
    assert sorted(measured) == [("# big task\n", False), ("# small task\n", False)], measured
    by_program = {c[0]: c for c in calls if c[1] or not c[0].startswith("big")}
    assert by_program["big-a"] == ("big-a", True, None, False)  # no baseline: eager and compile timed beside it
    assert by_program["big-b"] == ("big-b", True, "beside_candidate", False)  # big-a's, reused
    assert by_program["small-a"][2] == "baseline_worker"
    assert big_b.timings.baseline_source == "reused" and big_b.timings.compile.median_ms == 2.0
    stats = ex.stats()
    assert stats["baselines"]["deferred"] >= 1 and stats["baselines"]["failed"] == 0
    assert "baseline L1-19" in stats["memory_retried"]
