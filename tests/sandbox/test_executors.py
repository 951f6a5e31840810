"""The executors and verify-batch on the cpu backend: concurrency, baselines, resume, and Ray."""

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import pytest

from rubric_rl.batch import BatchInputError, load_done, read_candidates, run_batch
from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.executors import ExecutorConfig, make_executor
from rubric_rl.sandbox.run.device_gate import DeviceGate
from rubric_rl.tasks import load_tasks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sandbox(build_cache: Path) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"trials": 10, "warmup_trials": 1, "compile_baseline": False},
        limits={"run_timeout_s": 120},
    )


@pytest.fixture(scope="module")
def example_tasks(examples_dir: Path):
    return {t.id: t for t in load_tasks(examples_dir / "tasks.jsonl")}


@pytest.fixture(scope="module")
def example_rows(examples_dir: Path):
    return read_candidates(examples_dir / "candidates.jsonl")


def test_local_executor_runs_candidates_concurrently(sandbox, example_tasks, example_rows):
    async def main():
        async with make_executor(sandbox, ExecutorConfig(kind="local", build_workers=2, cpu_slots=1)) as ex:
            task = example_tasks["T-1"]
            verdicts = await asyncio.gather(*(ex.evaluate(task, r.code) for r in example_rows))
            return verdicts, ex.stats()

    verdicts, stats = asyncio.run(main())
    by_id = {r.candidate_id: v.status for r, v in zip(example_rows, verdicts, strict=True)}
    assert by_id == {
        "fused_add_relu/compile_error": "compile_error",
        "fused_add_relu/correct": "correct",
        "fused_add_relu/wrong": "incorrect",
    }
    correct = verdicts[[r.candidate_id for r in example_rows].index("fused_add_relu/correct")]
    assert correct.timings.eager_drift is not None  # eager re-timed beside the candidate, against the baseline
    baselines = stats["baselines"]  # one measurement per task at most (none if an earlier run left it on disk)
    assert baselines["measured"] <= 1 and baselines["measured"] + baselines["reused"] == 3
    assert stats["builds"]["hits"] >= 3  # the execution worker found every prebuilt extension in the cache
    waits = stats["waits_s"]  # each candidate through every stage of the queue
    assert {stage: w["n"] for stage, w in waits.items()} == dict.fromkeys(waits, 3)


def test_one_executor_serves_several_event_loops(sandbox, example_tasks, example_rows):
    # A reward function may call asyncio.run once per batch with one long-lived executor; the executor's queue
    # was bound to the first loop and the second batch failed as soon as a candidate had to wait for a slot.
    from rubric_rl.sandbox.executors.local import LocalExecutor

    ex = LocalExecutor(sandbox, ExecutorConfig(build_workers=1, cpu_slots=1, spare_workers=0, reuse_baselines=False))
    task = example_tasks["T-1"]
    codes = [r.code for r in example_rows if r.candidate_id != "fused_add_relu/compile_error"]

    async def batch():
        return [v.status for v in await asyncio.gather(*(ex.evaluate(task, code) for code in codes))]

    try:
        assert asyncio.run(batch()) == asyncio.run(batch()) == ["correct", "incorrect"]
        assert ex.stats()["captures"]["hits"] >= 2  # the second batch's prebuilds spawned no capture worker
    finally:
        asyncio.run(ex.close())


class _RecordingGate(DeviceGate):
    """A DeviceGate that records when each hold began and ended."""

    def __init__(self) -> None:
        super().__init__("recording")
        self.intervals: list[tuple[str, float, float]] = []
        self._open: dict[tuple[int, str], float] = {}

    def acquire(self, mode):
        waited = super().acquire(mode)
        self._open[(threading.get_ident(), mode)] = time.monotonic()
        return waited

    def release(self, mode):
        began = self._open.pop((threading.get_ident(), mode))
        self.intervals.append((mode, began, time.monotonic()))
        super().release(mode)


def test_two_slots_share_the_device_but_time_alone(sandbox, example_tasks, example_rows):
    from rubric_rl.sandbox.executors.local import LocalExecutor

    ex = LocalExecutor(sandbox, ExecutorConfig(build_workers=2, cpu_slots=2))
    gate = ex._gates["cpu"] = _RecordingGate()
    task = example_tasks["T-1"]
    codes = [r.code for r in example_rows] + [r.code for r in example_rows if r.candidate_id.endswith("/correct")]

    async def batch():
        try:
            return await asyncio.gather(*(ex.evaluate(task, code) for code in codes)), ex.stats()
        finally:
            await ex.close()

    verdicts, stats = asyncio.run(batch())
    assert [v.status for v in verdicts] == ["compile_error", "correct", "incorrect", "correct"]
    timed = [m for m, _, _ in gate.intervals if m == "exclusive"]
    assert len(timed) == 2 + stats["baselines"]["measured"]  # each timed candidate and each baseline, alone
    for mode, began, ended in gate.intervals:
        if mode != "exclusive":
            continue
        overlapping = [iv for iv in gate.intervals if iv[1] < ended and iv[2] > began and iv != (mode, began, ended)]
        assert overlapping == [], "another evaluation held the device while one was timed"
    assert all(v.durations.device_wait_s >= 0 for v in verdicts)
    assert stats["gates"]["cpu"]["shared_acquired"] >= 3


_HANGING_FORWARD = """


def _hanging_forward(self, *args):
    while True:
        pass


ModelNew.forward = _hanging_forward
"""


def test_a_statically_decided_candidate_waits_for_no_build_or_slot(sandbox, example_tasks, example_rows):
    # In a GRPO-shaped batch on the H100 a proven hack (torch.allclose patched) took 150 s from submission to its
    # Verdict, of which 0.1 s was its evaluation: it was captured, built and queued for an execution slot behind
    # the batch's hangs before the static checks, run in the slot, decided it.
    from rubric_rl.sandbox.executors.local import LocalExecutor

    correct = next(r.code for r in example_rows if r.candidate_id.endswith("/correct"))
    hanging = correct.rstrip() + _HANGING_FORWARD
    hack = "import torch\ntorch.allclose = lambda *a, **k: True\n" + correct
    broken = correct + "\ndef unfinished(:\n"
    config = sandbox.model_copy(update={"limits": sandbox.limits.model_copy(update={"stage_timeout_floor_s": 10.0})})
    ex = LocalExecutor(config, ExecutorConfig(build_workers=1, cpu_slots=1, spare_workers=0, reuse_baselines=False))
    task = example_tasks["T-1"]

    async def batch():
        try:
            hang = asyncio.ensure_future(ex.evaluate(task, hanging))
            await asyncio.sleep(0)  # the hang is first in line
            decided = await asyncio.gather(ex.evaluate(task, hack), ex.evaluate(task, broken))
            hang_was_running = not hang.done()
            return decided, hang_was_running, await hang, ex.stats()
        finally:
            await ex.close()

    (hacked, syntax), hang_was_running, hung, stats = asyncio.run(batch())
    assert (hacked.status, syntax.status, hung.status) == ("hack", "compile_error", "timeout")
    assert hang_was_running, "the statically decided candidates waited for the slot the hang held"
    assert "SyntaxError" in (syntax.compile_log or "")
    assert stats["captures"]["hits"] + stats["captures"]["misses"] == 1  # the hang's capture only
    assert stats["evaluations"] == 3


def test_verify_batch_resumes_without_redoing_or_losing(tmp_path, sandbox, example_tasks, example_rows):
    out = tmp_path / "run"
    executor_cfg = ExecutorConfig(kind="local", build_workers=1, reuse_baselines=False, spare_workers=0)

    async def batch(rows):
        async with make_executor(sandbox, executor_cfg) as ex:
            return await run_batch(example_tasks, rows, ex, out)

    first = asyncio.run(batch(example_rows[:1]))
    assert first["evaluated_now"] == 1
    # A crash in the middle of writing the next row leaves a partial line behind.
    with (out / "verdicts.jsonl").open("a") as f:
        f.write('{"candidate_id": "fused_add_relu/corr')
    assert load_done(out / "verdicts.jsonl") == {example_rows[0].candidate_id}
    second = asyncio.run(batch(example_rows))
    assert second["evaluated_now"] == 2 and second["skipped_already_done"] == 1
    ids = [json.loads(line)["candidate_id"] for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(r.candidate_id for r in example_rows)
    third = asyncio.run(batch(example_rows))
    assert third["evaluated_now"] == 0 and third["candidates"] == 3


def test_candidates_file_errors(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"candidate_id": "a", "task_id": "T-1", "code": "x"}\n{"candidate_id": "a", "task_id": "T-1", "code": "y"}\n'
    )
    with pytest.raises(BatchInputError, match=r"c.jsonl:2: candidate_id 'a' repeats line 1"):
        read_candidates(path)
    path.write_text('{"candidate_id": "a", "task_id": "T-1"}\n')
    with pytest.raises(BatchInputError, match="exactly one of 'code' and 'response'"):
        read_candidates(path)


def test_response_rows_are_extracted_or_rejected_with_the_reason(tmp_path, sandbox, example_tasks, examples_dir):
    code = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    path = tmp_path / "c.jsonl"
    path.write_text(
        json.dumps({"candidate_id": "r1", "task_id": "T-1", "response": f"Sure!\n```python\n{code}```"})
        + "\n"
        + json.dumps({"candidate_id": "r2", "task_id": "T-1", "response": "I can't."})
        + "\n"
    )

    async def batch():
        async with make_executor(sandbox, ExecutorConfig(kind="local", build_workers=1, spare_workers=0)) as ex:
            return await run_batch(example_tasks, read_candidates(path), ex, tmp_path / "run")

    summary = asyncio.run(batch())
    assert summary["status"] == {"compile_error": 1, "correct": 1}
    rows = {
        json.loads(x)["candidate_id"]: json.loads(x)
        for x in (tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()
    }
    assert "no program in the response (no_code)" in rows["r2"]["verdict"]["errors"][0]


def test_ray_executor_returns_the_same_verdicts(sandbox, example_tasks, example_rows):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # an earlier test's executor or service started one in this process
        ray.shutdown()
    ray.init(
        num_cpus=2,
        resources={"rubric_rl_eval": 1},
        include_dashboard=False,
        namespace="rubric_rl_test",
        log_to_driver=False,
    )
    try:

        async def main():
            cfg = ExecutorConfig(
                kind="ray", ray={"build_actors": 1, "execution_actors": 1, "namespace": "rubric_rl_test"}
            )
            ex = make_executor(sandbox, cfg)
            try:
                task = example_tasks["T-1"]
                return await asyncio.gather(*(ex.evaluate(task, r.code) for r in example_rows)), ex
            finally:
                await ex.close()

        verdicts, ex = asyncio.run(main())
        statuses = {r.candidate_id: v.status for r, v in zip(example_rows, verdicts, strict=True)}
        assert statuses == {
            "fused_add_relu/compile_error": "compile_error",
            "fused_add_relu/correct": "correct",
            "fused_add_relu/wrong": "incorrect",
        }
        named = ray.get_actor("rubric_rl.exec.0", namespace="rubric_rl_test")  # reachable by name
        assert named is not None
        stats = ex.stats()  # summed over the build actors, as the local executor's
        assert stats["captures"]["hits"] + stats["captures"]["misses"] == 3 and {"hits", "misses"} <= set(
            stats["builds"]
        )
        ex.shutdown_actors()
    finally:
        ray.shutdown()


def test_a_baseline_still_being_measured_is_awaited_only_before_timing(sandbox, examples_dir):
    # The executor hands the evaluation a baseline that is still being measured: the worker must skip
    # torch.compile, the correctness trials must not wait for it, and the timing must use it once it is there.
    from rubric_rl.sandbox import Evaluator, Placement, TaskBaseline
    from rubric_rl.sandbox.measure.timing import summarize

    cfg = sandbox.updated(timing={"compile_baseline": True})
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    baseline = TaskBaseline.from_rounds({"eager": [2.0, 2.0], "compile": [1.0, 1.0]}, "default")
    calls: list[float] = []

    def await_baseline():
        calls.append(time.monotonic())
        time.sleep(0.5)
        return baseline

    v = Evaluator(cfg).evaluate(reference, program, placement=Placement(await_baseline=await_baseline))
    assert v.status == "correct", v.errors
    assert len(calls) == 1 and v.durations.device_wait_s >= 0.5
    assert v.timings.baseline_source == "reused" and v.timings.compile.median_ms == 1.0
    assert v.speedup_compile is not None and v.timings.eager_drift is not None
    # The reused compile time follows eager's drift since the baseline: 1.0 ms at an eager of 2.0 ms there.
    t = v.timings
    assert v.speedup_compile == pytest.approx(1.0 / 2.0 * t.eager.median_ms / t.candidate.median_ms)
    # Every timed round is kept, the models' times side by side (the reused compile was not timed here).
    assert set(t.rounds_ms) == {"candidate", "eager"} and len(t.rounds_ms["eager"]) == cfg.timing.trials
    assert t.eager == summarize(t.rounds_ms["eager"]) and t.candidate == summarize(t.rounds_ms["candidate"])

    # A baseline that does not come (it failed, or was left to the task's candidates because it would not fit
    # beside other evaluations): the worker, told at setup to skip torch.compile, compiles and times it beside
    # the candidate. It used to report no speedup over compile at all.
    gate = DeviceGate("cpu")
    waiting = Placement(await_baseline=lambda: None, gate=gate)
    missing = Evaluator(cfg).evaluate(reference, program, placement=waiting)
    assert missing.status == "correct", missing.errors
    # Its warm-up holds no gate: in the timing's exclusive hold it kept every other evaluation off the H200 for
    # 5-6 s per KernelBench L1 task.
    d = missing.durations
    print("compile", d.compile_s, "timing wall", d.timing_wall_s, "held alone", gate.exclusive_held_s)
    assert d.compile_s > 0 and gate.exclusive_held_s <= d.timing_wall_s + 0.25, (d, gate.stats())
    assert missing.timings.baseline_source == "measured" and missing.timings.compile is not None
    assert missing.speedup_compile is not None and missing.timings.compile_warmup_s is not None
    beside = TaskBaseline.beside(missing.timings)
    assert beside is not None and beside.source == "beside_candidate" and beside.eager == missing.timings.eager
    assert beside.rounds_ms == {k: missing.timings.rounds_ms[k] for k in ("eager", "compile")}
    assert TaskBaseline.beside(v.timings) is None  # a reused compile time is no new baseline


def _correct_example_behind_a_timing(sandbox, examples_dir: Path, seconds: float):
    """The correct example evaluated on a gate that another evaluation holds exclusively for ``seconds``."""
    from rubric_rl.sandbox import Evaluator, Placement

    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    gate = DeviceGate("cpu")
    gate.acquire("exclusive")
    releaser = threading.Timer(seconds, gate.release, args=("exclusive",))
    releaser.start()
    try:
        v = Evaluator(sandbox).evaluate(reference, program, placement=Placement(gate=gate))
    finally:
        releaser.join()
    assert v.status == "correct", v.errors
    return v


def test_waiting_for_the_device_before_setup_is_counted(sandbox, examples_dir):
    # The first shared hold, taken before the worker's setup, waits behind every timing in the queue: it was
    # missing from device_wait_s (measured on the H200: verdicts whose stage times summed to a quarter of
    # their total), while the worker's load time must not lose it.
    v = _correct_example_behind_a_timing(sandbox, examples_dir, 1.5)
    assert v.durations.device_wait_s >= 1.0, v.durations
    assert v.durations.load_s >= 0.0 and v.durations.total_s >= v.durations.device_wait_s


def test_correctness_gives_way_to_a_waiting_timing_between_trials(sandbox, examples_dir):
    # A 256 MB task's correctness phase held the device shared for 20-35 s on the H200 while timings waited:
    # the worker now asks before each reference and candidate trial, and gives way whenever a timing waits.
    from rubric_rl.sandbox import Evaluator, Placement

    class AlwaysAWriter(_RecordingGate):
        def writers_waiting(self) -> bool:
            return True

    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    gate = AlwaysAWriter()
    v = Evaluator(sandbox).evaluate(reference, program, placement=Placement(gate=gate))
    assert v.status == "correct", v.errors
    trials = len([t for t in v.trials if t.distribution != "timed"])
    shared = [iv for iv in gate.intervals if iv[0] == "shared"]
    # One hold per reference trial and one per candidate trial (the first of each phase continues a hold),
    # plus the profile's; never two at once.
    assert len(shared) >= 2 * trials - 1, (len(shared), trials)
    spans = sorted((b, e) for _, b, e in gate.intervals)
    assert all(e1 <= b2 for (_, e1), (b2, _) in zip(spans, spans[1:], strict=False))


def test_the_device_is_free_while_the_evaluator_compares_a_trial(sandbox, examples_dir, monkeypatch):
    # On the H200 a slot held the device shared while its evaluator read and compared each 256 MB trial output
    # (about a second each), and waiting timings waited for it: the worker now finishes a trial's device work
    # before sending it, and the evaluator compares holding no gate (beside the worker's next trial, which
    # holds it shared only once the evaluator has let it go on).
    from rubric_rl.sandbox import Evaluator, Placement
    from rubric_rl.sandbox.run import conversation

    gate = _RecordingGate()
    held: list[tuple[int, bool]] = []
    compare_trial = conversation.compare_trial

    def recording(*args):
        held.append((gate._readers, gate._writer))
        return compare_trial(*args)

    monkeypatch.setattr(conversation, "compare_trial", recording)
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    v = Evaluator(sandbox).evaluate(reference, program, placement=Placement(gate=gate))
    assert v.status == "correct", v.errors
    assert len(held) == len([t for t in v.trials if t.distribution != "timed"]) > 1
    assert held == [(0, False)] * len(held)


def test_stage_durations_add_up_to_the_total(sandbox, examples_dir):
    # On the H200 the stages of a verdict summed to 24 of its 31 s: the evaluator's own handling of the
    # reference outputs, the worker's load preamble and the timed rounds' output checks were in no stage.
    v = _correct_example_behind_a_timing(sandbox, examples_dir, 1.0)
    d = v.durations.model_dump()
    parts = {k: x for k, x in d.items() if k not in ("total_s", "timing_s", "worker")}  # timing_s: within timing_wall_s
    inside = v.diagnostics.worker_stages  # the worker's own clock: its phases fit within the stages
    assert inside["reference_trials_s"] > 0 and inside["correctness_trials_s"] > 0 and inside["timing_rounds_s"] > 0
    assert sum(x for k, x in inside.items() if k != "evaluator_wait_s") <= d["total_s"], inside
    assert all(x >= 0 for x in parts.values()), parts
    assert parts["reference_s"] > 0 and parts["correctness_s"] > 0 and parts["timing_wall_s"] > 0
    assert abs(sum(parts.values()) - d["total_s"]) <= 0.25 + 0.03 * d["total_s"], d


def test_a_spare_worker_imports_what_the_load_stage_needs_before_its_setup(sandbox, examples_dir):
    # The load stage was mostly the op guard's first import of torch._dynamo (1.6 s of 1.7 s on 2 cores; on
    # the H200 with 4 slots the load stage averaged 5.8 s): a spare worker imports it while it waits.
    from rubric_rl.sandbox import Evaluator, Placement
    from rubric_rl.sandbox.run.process import WorkerProcess

    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    ev = Evaluator(sandbox)
    cold = ev.evaluate(reference, program, placement=Placement(worker=WorkerProcess(sandbox)))
    spare = WorkerProcess(sandbox, ahead=True)
    spare.start()
    warm = ev.evaluate(reference, program, placement=Placement(worker=spare))
    assert cold.status == warm.status == "correct", (cold.errors, warm.errors)
    before, after = cold.diagnostics.worker_stages["load_preamble_s"], warm.diagnostics.worker_stages["load_preamble_s"]
    assert after < 0.5 * before, (before, after)
    # A worker started for the evaluation imports torch after its setup was sent: the verdict says how long.
    assert (
        cold.diagnostics.worker_stages["start_wait_s"] > 0.2 and warm.diagnostics.worker_stages["start_wait_s"] >= 0.0
    )


def wait_until_idle(pid: int, timeout_s: float = 60.0) -> None:
    """Until process ``pid`` stops using the CPU (a spare done importing, waiting for its setup)."""
    import psutil

    proc, last, still = psutil.Process(pid), -1.0, 0
    deadline = time.monotonic() + timeout_s
    while still < 3 and time.monotonic() < deadline:
        used = sum(proc.cpu_times()[:2])
        still = still + 1 if used == last else 0
        last = used
        time.sleep(0.1)
    assert still >= 3, f"process {pid} still busy after {timeout_s} s"


def test_a_baseline_is_measured_on_the_warm_worker_it_is_given_and_says_where_its_time_went(sandbox, examples_dir):
    # Baselines started a fresh interpreter each (importing torch while the candidates waited for them); the
    # executor now hands each baseline lane a spare, and the baseline records its worker's phases.
    from rubric_rl.sandbox import Placement, measure_baseline
    from rubric_rl.sandbox.run.process import WorkerProcess

    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    spare = WorkerProcess(sandbox, ahead=True)
    spare.start()  # imports torch while the cold measurement runs
    cold = measure_baseline(reference, sandbox)
    # Started beside the cold worker on 2 cores, the spare was sometimes still importing (1.2 s of waiting for
    # it against the cold worker's 1.8 s): a spare ready when asked is what this compares.
    assert spare.proc is not None
    wait_until_idle(spare.proc.pid)
    warm = measure_baseline(reference, sandbox, placement=Placement(worker=spare))
    assert spare.proc.poll() is not None  # it was the spare that measured, and it ended
    for b in (cold, warm):
        assert {"start_wait_s", "setup_s", "reference_model_s", "compile_warmup_s", "gate_wait_s"} <= set(b.phases)
        assert b.phases["timing_rounds_s"] > 0
    assert cold.phases["start_wait_s"] > 0.2
    assert warm.phases["start_wait_s"] < 0.5 * cold.phases["start_wait_s"], (cold.phases, warm.phases)


def test_a_spare_imports_torch_compile_before_its_setup(sandbox, examples_dir):
    # On the H200 a baseline's compile phase took 5-17 s for a first compiled call of 0.8-4 s: the rest was
    # torch.compile's imports (torch._dynamo and inductor, 2 s on 2 cores idle), paid while builds load every
    # core. A spare imports them while it waits; its compile phase is then little more than the first call.
    from rubric_rl.sandbox import Placement, measure_baseline
    from rubric_rl.sandbox.run.process import WorkerProcess

    compiling = sandbox.updated(timing={"compile_baseline": True})
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    spare = WorkerProcess(compiling, ahead=True, compiles=True)
    spare.start()
    cold = measure_baseline(reference, compiling)  # inductor's cache is warm for the spare's first call after this
    warm = measure_baseline(reference, compiling, placement=Placement(worker=spare))
    assert cold.compile is not None and warm.compile is not None, (cold, warm)
    before = cold.phases["compile_warmup_s"] - (cold.compile_warmup_s or 0.0)
    after = warm.phases["compile_warmup_s"] - (warm.compile_warmup_s or 0.0)
    assert before > 0.5 and after < 0.5 * before, (
        cold.phases,
        cold.compile_warmup_s,
        warm.phases,
        warm.compile_warmup_s,
    )


def test_the_device_is_free_before_the_checked_timed_outputs_ship(sandbox, examples_dir, monkeypatch):
    # On the H200 the exclusive hold lasted until the timed rounds' checked outputs (2 GB for a 256 MB task)
    # had crossed the pipe: 30 s of timing wall for 1 s of rounds, every other evaluation waiting.
    from rubric_rl.sandbox import Evaluator, Placement
    from rubric_rl.sandbox.run.protocol import Channel

    arrived: list[float] = []
    recv = Channel.recv

    def recording_recv(self, deadline=None):
        msg = recv(self, deadline)
        if msg.type == "timing":
            arrived.append(time.monotonic())
        return msg

    monkeypatch.setattr(Channel, "recv", recording_recv)
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    gate = _RecordingGate()
    v = Evaluator(sandbox).evaluate(reference, program, placement=Placement(gate=gate))
    assert v.status == "correct", v.errors
    exclusive = [iv for iv in gate.intervals if iv[0] == "exclusive"]
    assert len(exclusive) == 1 and len(arrived) == 1, (gate.intervals, arrived)
    assert exclusive[0][2] < arrived[0], (exclusive, arrived)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs (Linux)"
)
def test_timings_run_on_the_reserved_cores_and_everything_else_off_them(sandbox, example_tasks, example_rows):
    # On the H200 a launch-bound program's timings stretched by up to 2x while builds and torch.compile
    # warm-ups ran on every core: its device's timing cores are its own while it times, and nothing else
    # the executor starts runs there.
    from rubric_rl.sandbox.executors.local import LocalExecutor
    from rubric_rl.sandbox.run.cpu_cores import thread_affinities

    mine = frozenset(os.sched_getaffinity(0))
    ex = LocalExecutor(sandbox, ExecutorConfig(build_workers=1, cpu_slots=1, timing_cores_per_device=1))
    plan = ex.cores
    if not plan.active:
        pytest.skip("this machine's CPUs are one physical core: nothing can be reserved")
    reserved = plan.timing["cpu"]
    task = example_tasks["T-1"]
    code = next(r.code for r in example_rows if r.candidate_id.endswith("/correct"))
    seen: list[frozenset[int]] = []

    async def batch():
        try:
            seen.extend(thread_affinities(os.getpid()).values())  # this process, after the executor started
            verdict = await ex.evaluate(task, code)
            for spare in ex._warm.spares("cpu.0"):
                if spare.proc is not None:
                    seen.extend(thread_affinities(spare.proc.pid).values())  # a worker started by the executor
            return verdict
        finally:
            await ex.close()

    verdict = asyncio.run(batch())
    assert verdict.status == "correct", verdict.errors
    assert verdict.diagnostics.timing_cores == sorted(reserved)  # what the worker saw while it timed
    assert seen and all(mask == plan.general for mask in seen)
    assert not plan.general & reserved
    assert frozenset(os.sched_getaffinity(0)) == mine  # the process has its cores back once the executor closes


def test_each_slot_keeps_as_many_spare_workers_as_asked_and_hands_out_the_oldest(sandbox):
    # With one spare, a slot whose evaluations run shorter than a worker takes to start waited for it.
    from rubric_rl.sandbox.executors.warm_workers import WarmWorkers

    warm = WarmWorkers(sandbox, depth=2)
    first = warm.take("cpu.0", None)  # no spare yet: a new one, and two spares start behind it
    try:
        deadline = time.monotonic() + 120
        while len(warm.spares("cpu.0")) < 2:
            assert time.monotonic() < deadline, "the spares did not start"
            time.sleep(0.1)
        oldest = warm.spares("cpu.0")[0]
        taken = warm.take("cpu.0", None)
        assert taken is oldest and taken.alive()
        assert len(warm.spares("cpu.0")) == 1  # and a replacement is starting: never more than two
        deadline = time.monotonic() + 120
        while len(warm.spares("cpu.0")) < 2:
            assert time.monotonic() < deadline, "the replacement did not start"
            time.sleep(0.1)
        assert len(warm.spares("cpu.0")) == 2
        taken.close()
    finally:
        first.close()
        spares = warm.spares("cpu.0")
        warm.close()
    assert spares and not any(w.alive() for w in spares)


def test_default_builds_at_once_leave_a_core_per_compiler(monkeypatch):
    # A split cuda build runs two compilers at once (kernel and torch glue): a build per core ran two per core,
    # and on a 16-core H100 host a cold pass's 32 builds took 1,197 s summed at 16 at a time, 651 s at 7.
    import psutil

    from rubric_rl.sandbox.executors.base import default_build_workers

    class Plenty:
        total = 1 << 40

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Plenty)
    assert default_build_workers("cuda", 16) == 8
    assert default_build_workers("cpu", 16) == 16
    assert default_build_workers("cuda", 1) == 1

    class Little:
        total = 12 << 30  # a build peaks near 3 GB: four at a time

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Little)
    assert default_build_workers("cpu", 16) == 4
