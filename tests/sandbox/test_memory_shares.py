"""A device's memory: shares side by side, several held by an evaluation that ran out of its one."""

import asyncio
import threading
import time

import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.evaluate import Evaluator
from rubric_rl.sandbox.executors import ExecutorConfig, local
from rubric_rl.sandbox.executors.local import LocalExecutor, out_of_device_memory
from rubric_rl.sandbox.executors.memory_shares import MemoryShares
from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.tasks.task import Task


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_shares_are_held_side_by_side_and_the_whole_alone():
    async def main():
        mem = MemoryShares(["0", "1"], 4)
        order: list[str] = []
        first, second = mem.share("0"), mem.share("0")
        await first.__aenter__()
        await second.__aenter__()
        assert mem.held("0") == 2

        async def whole():
            async with mem.share("0", 4):
                order.append("whole in")
                assert mem.held("0") == 4
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
        assert mem.held("0") == 1  # one share is still held: the whole waits
        await second.__aexit__(None, None, None)
        await asyncio.gather(w, late, other)
        assert order == ["device 1", "whole in", "whole out", "late share"]

    asyncio.run(main())


def test_halves_are_held_side_by_side_and_single_shares_fill_the_room_left():
    async def main():
        mem = MemoryShares(["0"], 6)
        first = mem.share("0", 3)
        assert await first.__aenter__() >= 0.0
        singles = [mem.share("0") for _ in range(3)]
        for cm in singles:
            await asyncio.wait_for(cm.__aenter__(), 1)  # beside a half: three single shares
        assert mem.held("0") == 6
        await singles.pop().__aexit__(None, None, None)
        second_cm = mem.share("0", 3)
        second = asyncio.ensure_future(second_cm.__aenter__())
        await _settle()
        assert not second.done()  # 5 held: no room for the half
        await singles.pop().__aexit__(None, None, None)
        await _settle()
        assert not second.done() and mem.held("0") == 4
        await first.__aexit__(None, None, None)
        await asyncio.wait_for(second, 1)
        assert mem.held("0") == 4  # a single and the second half
        for cm in (*singles, second_cm):
            await cm.__aexit__(None, None, None)
        assert mem.held("0") == 0
        with pytest.raises(ValueError, match="7 shares"):
            async with mem.share("0", 7):
                pass

    asyncio.run(main())


def test_singles_pass_a_waiting_request_that_cannot_fit_beside_the_holders_of_several():
    # Backfilling: the whole must wait for the half holder anyway, so singles run beside it; once the half has
    # left, new singles queue behind the whole, which starts when the singles that passed are done.
    async def main():
        mem = MemoryShares(["0"], 6)
        half = mem.share("0", 3)
        await half.__aenter__()
        whole_cm = mem.share("0", 6)
        whole = asyncio.ensure_future(whole_cm.__aenter__())
        await _settle()
        passed = [mem.share("0") for _ in range(3)]
        for cm in passed:
            await asyncio.wait_for(cm.__aenter__(), 1)
        assert mem.held("0") == 6 and not whole.done()
        await passed.pop().__aexit__(None, None, None)
        await half.__aexit__(None, None, None)
        await _settle()
        assert mem.held("0") == 2 and not whole.done()
        late_cm = mem.share("0")
        late = asyncio.ensure_future(late_cm.__aenter__())  # no holder of several left: behind the whole
        await _settle()
        assert not late.done()
        for cm in passed:
            await cm.__aexit__(None, None, None)
        await asyncio.wait_for(whole, 1)
        await _settle()
        assert mem.held("0") == 6 and not late.done()
        await whole_cm.__aexit__(None, None, None)
        await asyncio.wait_for(late, 1)
        await late_cm.__aexit__(None, None, None)
        assert mem.held("0") == 0

    asyncio.run(main())


def test_singles_do_not_pass_a_half_that_fits_beside_the_half_held():
    # On the H100's cold pass, singles that took the other half beside one L1 task's kept the next L1 task from
    # running beside it: the eleven ran one at a time.
    async def main():
        mem = MemoryShares(["0"], 6)
        first, single = mem.share("0", 3), mem.share("0")
        await first.__aenter__()
        await single.__aenter__()
        second_cm = mem.share("0", 3)
        second = asyncio.ensure_future(second_cm.__aenter__())
        late_cm = mem.share("0")
        late = asyncio.ensure_future(late_cm.__aenter__())
        await _settle()
        assert not second.done() and not late.done() and mem.held("0") == 4  # behind the second half
        await single.__aexit__(None, None, None)
        await asyncio.wait_for(second, 1)  # two halves side by side
        await _settle()
        assert mem.held("0") == 6 and not late.done()
        await first.__aexit__(None, None, None)
        await asyncio.wait_for(late, 1)
        for cm in (second_cm, late_cm):
            await cm.__aexit__(None, None, None)
        assert mem.held("0") == 0

    asyncio.run(main())


def test_requests_for_several_shares_are_served_in_the_order_they_came():
    # A half that would fit waits behind an earlier whole: halves arriving one after another cannot starve it.
    async def main():
        mem = MemoryShares(["0"], 6)
        order: list[str] = []
        first = mem.share("0", 3)
        await first.__aenter__()

        async def hold(name: str, shares: int) -> None:
            async with mem.share("0", shares):
                order.append(name)
                await asyncio.sleep(0.01)

        whole = asyncio.ensure_future(hold("whole", 6))
        await _settle()
        half = asyncio.ensure_future(hold("half", 3))
        await _settle()
        assert order == [] and mem.held("0") == 3
        await first.__aexit__(None, None, None)
        await asyncio.gather(whole, half)
        assert order == ["whole", "half"]

    asyncio.run(main())


def test_a_baseline_passes_a_waiting_whole_only_while_a_share_holder_awaits_a_baseline():
    # Evaluations that hold shares may be waiting for their task's baseline: a baseline queued behind a
    # whole-memory request that waits for those evaluations would never run. But a baseline that passes a
    # waiting request always starves it: on the H200, 31 baselines in a row kept three waiting 203-220 s.
    async def main():
        mem = MemoryShares(["0"], 4)
        held = mem.share("0")
        await held.__aenter__()
        w_entered = asyncio.Event()
        w_release = asyncio.Event()

        async def whole():
            async with mem.share("0", 4):
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
            assert mem.held("0") == 2
            async with mem.share("0", baseline=True):
                assert mem.held("0") == 3
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
        assert mem.held("0") == 0

    asyncio.run(main())


def test_a_cancelled_whole_request_lets_the_shares_behind_it_go():
    async def main():
        mem = MemoryShares(["0"], 4)
        held = mem.share("0")
        await held.__aenter__()

        async def whole():
            async with mem.share("0", 4):
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


def _never_settled(self, reference: str, program: str, *, task_id: str | None = None) -> None:
    """The fake evaluations' programs ("big-a", ...) are no Python: the executor's static question is skipped."""
    return None


def _sharing_executor(
    tmp_path, monkeypatch, needs: dict[str, int], *, error: str = _OOM, status: dict[str, str] | None = None
):
    """A cpu executor whose memory is divided as a cuda executor's (3 slots and a baseline lane: 4 shares),
    running a fake evaluation that runs out of memory (``error``) unless it has the shares its task ``needs``,
    and then has its task's ``status`` (default correct). Returns the executor and the calls: (program, shares
    held, alone, shares held by everything beside it)."""
    sandbox = SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"}, timing={"enabled": False})
    ex = LocalExecutor(sandbox, ExecutorConfig(cpu_slots=3, spare_workers=0, reuse_baselines=False, prebuild=False))
    ex._divided = True  # as a cuda executor divides the config's 0.9 of the device
    assert ex._shares == 4
    lock = threading.Lock()
    running: dict[int, int] = {}  # call index -> shares held
    calls: list[tuple[str, int, bool, int]] = []

    def fake_evaluate(self, reference, program, *, task_id=None, placement):
        shares, alone = round(placement.memory_fraction / 0.9 * 4), placement.alone
        with lock:
            me = len(calls)
            running[me] = shares
            calls.append((program, shares, alone, 0))
            total = sum(running.values())
            for i in running:  # the most held beside each running call
                p, held, a, beside = calls[i]
                calls[i] = (p, held, a, max(beside, total - held))
        time.sleep(0.15)
        with lock:
            del running[me]
        if shares < needs.get(task_id, 1):
            infra = error if error.startswith("task error") else None
            return Verdict(
                status="runtime_error", task_id=task_id, candidate_sha256="0", errors=[error], infra_error=infra
            )
        return Verdict(status=(status or {}).get(task_id, "correct"), task_id=task_id, candidate_sha256="0")

    monkeypatch.setattr(Evaluator, "evaluate", fake_evaluate)
    monkeypatch.setattr(Evaluator, "settled_statically", _never_settled)
    return ex, calls


def _task(i: str) -> Task:
    return Task(id=i, problem_id=1, name=i, origin="test", code=f"# task {i}\n")


def _batch_then_one(ex: LocalExecutor, batch: list[tuple[Task, str]], later: tuple[Task, str]):
    """The ``batch`` evaluated at once, then ``later`` alone; the executor closed after."""

    async def main():
        first = await asyncio.gather(*(ex.evaluate(t, p) for t, p in batch))
        return first, await ex.evaluate(*later)

    try:
        return asyncio.run(main())
    finally:
        asyncio.run(ex.close())


def test_an_evaluation_out_of_its_share_runs_again_with_half_the_device_beside_others(tmp_path, monkeypatch):
    """KernelBench L1-19's seven 6 GB reference outputs ran out of a share on the H200. Retried with the whole
    device, the eleven such tasks of the throughput benchmark ran one after another with nothing beside them;
    they fit half of it."""
    ex, calls = _sharing_executor(tmp_path, monkeypatch, {"L1-19": 2})
    big, small = _task("L1-19"), _task("L1-1")
    batch = [(big, "big-a"), *((small, f"small-{i}") for i in range(4)), (big, "big-b")]
    first, later = _batch_then_one(ex, batch, (big, "big-c"))
    assert [v.status for v in first] == ["correct"] * 6 and later.status == "correct"
    assert all(held + beside <= 4 for _, held, _, beside in calls), calls  # never more shares than the device has
    halves = [c for c in calls if c[1] == 2]
    assert sorted(p for p, *_ in halves) == ["big-a", "big-b", "big-c"] and not any(c[2] for c in halves)
    assert any(beside > 0 for *_, beside in halves), calls  # others ran beside a half
    # big-a's reference stage ran out of its share: the task is known, and its later candidates take half the
    # device without trying a share first.
    assert [c[:2] for c in calls if c[0] in ("big-b", "big-c")] == [("big-b", 2), ("big-c", 2)]
    stats = ex.stats()
    assert stats["memory_retried"] == ["candidate L1-19: 1 -> 2 shares"] and stats["large_memory_tasks"] == 1
    assert len(stats["memory_waits_s"]) == 3


def test_an_evaluation_out_of_half_the_device_runs_again_with_all_of_it_alone(tmp_path, monkeypatch):
    ex, calls = _sharing_executor(tmp_path, monkeypatch, {"huge": 4})
    huge, small = _task("huge"), _task("small")
    batch = [(huge, "huge-a"), *((small, f"small-{i}") for i in range(3))]
    first, later = _batch_then_one(ex, batch, (huge, "huge-b"))
    assert [v.status for v in first] == ["correct"] * 4 and later.status == "correct"
    assert [c[:3] for c in calls if c[0].startswith("huge")] == [
        ("huge-a", 1, False),
        ("huge-a", 2, False),
        ("huge-a", 4, True),
        ("huge-b", 4, True),  # known: all of it at once
    ]
    assert all(beside == 0 for _, held, _, beside in calls if held == 4), calls  # nothing beside the whole
    assert ex.stats()["memory_retried"] == ["candidate huge: 1 -> 2 shares", "candidate huge: 2 -> 4 shares"]


def test_a_task_whose_correct_candidate_needed_more_shares_gives_them_to_its_later_candidates(tmp_path, monkeypatch):
    """On the H100 the reference stage of KernelBench's L1 tasks fit half the device, but their candidates, beside
    the kept 6 GB reference outputs, did not: each of the eleven ran out of half of it before running alone, in
    the warm pass as in the cold one. A correct candidate's need is the task's; a wrong one's is not."""
    candidate_oom = "correctness trial 0: OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB."
    ex, calls = _sharing_executor(
        tmp_path, monkeypatch, {"big": 4, "wrong": 2}, error=candidate_oom, status={"wrong": "incorrect"}
    )
    big, wrong = _task("big"), _task("wrong")
    first, later = _batch_then_one(ex, [(big, "big-a"), (wrong, "wrong-a")], (big, "big-b"))
    assert [v.status for v in first] == ["correct", "incorrect"] and later.status == "correct"
    assert ex._task_shares == {big.code: 4}  # the wrong candidate taught nothing
    assert [c[:2] for c in calls if c[0] == "big-b"] == [("big-b", 4)]  # all of it at once, no failed run first
    assert ex.stats()["memory_retried"].count("candidate big: 2 -> 4 shares") == 1


@pytest.mark.parametrize("status", ["incorrect", "correct"])
def test_only_a_failure_for_memory_is_retried(status):
    v = Verdict(status=status, task_id="t", candidate_sha256="0", errors=["CUDA out of memory"])
    assert not out_of_device_memory(v)


def _timed_correct(task_id: str, baseline) -> Verdict:
    """A correct verdict with timings: eager and compile timed beside the candidate where no ``baseline`` was
    given (the worker compiled the reference itself), else the baseline's compile reused."""
    from rubric_rl.sandbox.measure.timing import summarize
    from rubric_rl.sandbox.verdict import Timings

    if baseline is None:
        rounds = {"candidate": [1.5], "eager": [3.0], "compile": [2.0]}
        timings = Timings(timer="host", rounds_ms=rounds, **{k: summarize(v) for k, v in rounds.items()})
    else:
        timings = Timings(
            timer="host",
            candidate=summarize([1.5]),
            eager=summarize([3.0]),
            compile=baseline.compile,
            baseline_source="reused",
        )
    return Verdict(status="correct", task_id=task_id, candidate_sha256="0", timings=timings)


def test_a_baseline_out_of_its_share_is_measured_beside_the_tasks_whole_memory_candidates(tmp_path, monkeypatch):
    """On the H200, ten L1 baselines ran out of their shares and were measured again alone: each held the
    device exclusively for its worker's start and torch.compile's warm-up (5-18 s), every other evaluation
    paused, only for the task's candidates to take the whole device next. The candidates' whole-memory runs
    now time eager and compile beside them, and the first such run gives the task its baseline."""
    from rubric_rl.sandbox.measure.baseline import BaselineError, TaskBaseline

    sandbox = SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"})
    ex = LocalExecutor(sandbox, ExecutorConfig(cpu_slots=2, spare_workers=0, prebuild=False))
    ex._divided = True
    measured: list[tuple[str, bool]] = []
    calls: list[tuple[str, bool, str | None, bool]] = []  # (program, alone, baseline source, awaiting one)

    def fake_measure(reference, config, *, placement):
        measured.append((reference, placement.alone))
        if "big" in reference:
            raise BaselineError("baseline measurement failed: OutOfMemoryError: CUDA out of memory.")
        return TaskBaseline.from_rounds({"eager": [2.0], "compile": [1.0]}, "default")

    def fake_evaluate(self, reference, program, *, task_id=None, placement):
        alone, baseline, await_baseline = placement.alone, placement.baseline, placement.await_baseline
        if await_baseline is not None and not program.startswith("big"):
            baseline = await_baseline()
        calls.append((program, alone, baseline.source if baseline else None, await_baseline is not None))
        if program.startswith("big") and not alone:
            return Verdict(
                status="runtime_error", task_id=task_id, candidate_sha256="0", errors=[_OOM], infra_error=_OOM
            )
        return _timed_correct(task_id, baseline)

    monkeypatch.setattr(local, "measure_baseline", fake_measure)
    monkeypatch.setattr(Evaluator, "evaluate", fake_evaluate)
    monkeypatch.setattr(Evaluator, "settled_statically", _never_settled)
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


def test_what_a_candidate_timed_beside_its_baseline_needed_is_asked_at_once_by_those_that_reuse_it(
    tmp_path, monkeypatch
):
    """On the H100, L1-25's first candidate timed eager and compile beside it (its baseline did not fit a share) and
    needed all of the device. Its later candidates, with the task's baseline reused, were once asked for half of it
    first: they ran out of it too, and each paid a failed run before it got all of it."""
    from rubric_rl.sandbox.measure.baseline import BaselineError

    sandbox = SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"})
    ex = LocalExecutor(sandbox, ExecutorConfig(cpu_slots=3, spare_workers=0, prebuild=False))
    ex._divided = True
    assert ex._shares == 4
    calls: list[tuple[str, int, bool]] = []

    def fake_measure(reference, config, *, placement):
        raise BaselineError("baseline measurement failed: OutOfMemoryError: CUDA out of memory.")

    def fake_evaluate(self, reference, program, *, task_id=None, placement):
        shares, baseline = round(placement.memory_fraction / 0.9 * 4), placement.baseline
        calls.append((program, shares, baseline is not None))
        if shares < 4:  # as measured: all of the device, baseline reused or not
            return Verdict(status="runtime_error", task_id=task_id, candidate_sha256="0", errors=[_OOM[23:]])
        return _timed_correct(task_id, baseline)

    monkeypatch.setattr(local, "measure_baseline", fake_measure)
    monkeypatch.setattr(Evaluator, "evaluate", fake_evaluate)
    monkeypatch.setattr(Evaluator, "settled_statically", _never_settled)
    swish = Task(id="L1-25", problem_id=25, name="swish", origin="test", code="# swish\n")

    async def main():
        return [await ex.evaluate(swish, p) for p in ("first", "second", "third")]

    try:
        verdicts = asyncio.run(main())
    finally:
        asyncio.run(ex.close())
    assert [v.status for v in verdicts] == ["correct"] * 3
    assert [c for c in calls if c[0] == "first"][-2:] == [("first", 2, False), ("first", 4, False)]  # half, then all
    assert [c for c in calls if c[0] != "first"] == [("second", 4, True), ("third", 4, True)]  # no failed run
    assert ex._task_shares == {swish.code: 4}


def test_a_cuda_executor_gives_each_worker_its_share_and_leaves_the_config_as_given(tmp_path):
    # The executor used to copy the user's config with gpu_memory_fraction divided by the shares; each evaluation
    # is now told its share by its Placement.
    sandbox = SandboxConfig(
        backend="cuda", build={"cache_dir": tmp_path / "build"}, limits={"gpu_memory_fraction": 0.8}
    )
    config = ExecutorConfig(slots_per_gpu=3, baseline_workers_per_gpu=1, timing_cores_per_device=0, spare_workers=0)
    ex = LocalExecutor(sandbox, config)
    try:
        assert ex.sandbox is sandbox and ex.evaluator.config is sandbox and sandbox.limits.gpu_memory_fraction == 0.8
        assert ex._shares == 4 and ex._divided
        assert ex._memory_fraction(1) == pytest.approx(0.2) and ex._memory_fraction(4) == pytest.approx(0.8)
    finally:
        asyncio.run(ex.close())
