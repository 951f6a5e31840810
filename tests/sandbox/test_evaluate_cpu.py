"""The whole sandbox on the cpu backend, with real C++ extensions: every way a candidate can end."""

import threading
import time
from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.measure import comparison
from rubric_rl.sandbox.run import protocol
from rubric_rl.sandbox.run.conversation import Conversation

pytestmark = pytest.mark.slow

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


@pytest.fixture(scope="module")
def reference(examples_dir: Path) -> str:
    return (examples_dir / "fused_add_relu" / "reference.py").read_text()


@pytest.fixture(scope="module")
def evaluator(build_cache: Path) -> Evaluator:
    return Evaluator(
        SandboxConfig(
            backend="cpu",
            build={"cache_dir": build_cache},
            timing={"trials": 15, "warmup_trials": 2, "compile_baseline": False},
            limits={"run_timeout_s": 120},
        )
    )


def with_overrides(evaluator: Evaluator, **overrides) -> Evaluator:
    cfg = evaluator.config.updated(**overrides)
    return Evaluator(cfg, builder=evaluator.builder)


def run(evaluator: Evaluator, reference: str, program: Path, **overrides):
    if overrides:
        evaluator = with_overrides(evaluator, **overrides)
    return evaluator.evaluate(reference, program.read_text(), task_id=program.stem)


def test_correct_candidate(evaluator, reference, examples_dir):
    v = run(evaluator, reference, examples_dir / "fused_add_relu" / "candidate_correct.py")
    assert v.status == "correct", v.errors
    assert [t.distribution for t in v.trials[:7]] == ["task"] * 5 + ["signed", "heavy_tailed"]
    assert all(t.passed and t.max_abs_error == 0 for t in v.trials)
    assert v.timings is not None and v.timings.candidate.n == 15 and v.timings.eager.n == 15
    assert v.speedup_eager is not None and v.speedup_eager > 0
    assert v.diagnostics.host_launch_us > 0 and v.diagnostics.host_python_us > 0  # the host's speed where it timed
    assert v.builds and v.builds[0].ok
    assert set(v.aten_ops) <= {"empty_like", "clone", "contiguous"}
    assert v.findings == []
    assert v.environment.backend == "cpu"


def test_incorrect_candidate(evaluator, reference, examples_dir):
    v = run(evaluator, reference, examples_dir / "fused_add_relu" / "candidate_wrong.py")
    assert v.status == "incorrect"
    assert not v.trials[0].passed and v.trials[0].mismatched > 0
    assert v.speedup_eager is None and v.timings is None
    assert "outside tolerance" in v.errors[0]


def test_compile_error_maps_to_candidate_line(evaluator, reference, examples_dir):
    v = run(evaluator, reference, examples_dir / "fused_add_relu" / "candidate_compile_error.py")
    assert v.status == "compile_error"
    assert v.compile_log.startswith("candidate line 17: error:")
    assert v.builds[0].ok is False


def test_python_syntax_error_is_a_compile_error(evaluator, reference):
    v = evaluator.evaluate(reference, "class ModelNew(:\n    pass\n")
    assert v.status == "compile_error" and "SyntaxError" in v.compile_log


@pytest.mark.parametrize(
    "program, status, words",
    [
        ("fault_segfault.py", "runtime_error", "SIGSEGV (segmentation fault)"),
        ("fault_exit_zero_native.py", "runtime_error", "exited with status 0 before finishing"),
        ("fault_raises.py", "runtime_error", "ValueError: the candidate gave up (candidate line"),
    ],
)
def test_failures_become_verdicts_and_the_next_evaluation_works(evaluator, reference, program, status, words):
    v = run(evaluator, reference, PROGRAMS / program)
    assert v.status == status, v.errors
    assert any(words in e for e in v.errors), v.errors
    assert run(evaluator, reference, PROGRAMS / "fault_honest.py").status == "correct"


def test_hang_is_a_timeout(evaluator, reference):
    v = run(evaluator, reference, PROGRAMS / "fault_hang.py", limits={"run_timeout_s": 15})
    assert v.status == "timeout"
    assert "stage: correctness" in v.errors[0]


def test_a_hang_costs_what_the_reference_takes_not_the_run_limit(evaluator, reference):
    # In RL a hung sample holds its whole batch: its limit derives from the reference's own trials, not from
    # run_timeout_s (300 s here).
    limits = {"run_timeout_s": 300, "stage_timeout_factor": 1, "stage_timeout_floor_s": 8}
    v = run(evaluator, reference, PROGRAMS / "fault_hang.py", limits=limits)
    assert v.status == "timeout"
    assert "derived from the reference's" in v.errors[0] and "stage: correctness" in v.errors[0], v.errors
    assert v.durations.total_s < 150


def test_a_hang_while_loading_costs_what_the_reference_takes_not_the_run_limit(evaluator, reference):
    # A candidate that never finishes building ModelNew held its slot for run_timeout_s: loading had no limit of
    # its own. It now gets stage_timeout_factor times the reference's import and model, at least the floor.
    limits = {"run_timeout_s": 300, "stage_timeout_factor": 1, "stage_timeout_floor_s": 8}
    v = run(evaluator, reference, PROGRAMS / "fault_hang_at_load.py", limits=limits)
    assert v.status == "timeout"
    assert "stage: load" in v.errors[0], v.errors
    assert "to import the reference and build its model" in v.errors[0], v.errors
    assert v.durations.total_s < 150


_SLOW_FIRST_CALL = """

import time as _time

_forward, _first = ModelNew.forward, [True]


def _slow_first_forward(self, *args):
    if _first:
        _first.pop()
        _time.sleep(3.0)
    return _forward(self, *args)


ModelNew.forward = _slow_first_forward
"""


def test_the_verdict_says_how_long_the_worker_went_silent_in_each_stage(evaluator, reference):
    # The stage limits' floor (30 s) was chosen with no measurement of how long a legitimate candidate goes
    # without a message; each Verdict now records it per stage, so a batch's correct candidates are the evidence.
    program = (PROGRAMS / "fault_honest.py").read_text() + _SLOW_FIRST_CALL
    v = evaluator.evaluate(reference, program, task_id="slow_first_call")
    assert v.status == "correct", v.errors
    silence = v.diagnostics.longest_silence_s
    assert {"setup", "reference", "load", "correctness", "timing"} <= set(silence), silence
    assert 3.0 <= silence["correctness"] < 60, silence
    # The one slow call is the correctness stage's: the reference's trials and the timed rounds had no sleep.
    assert silence["reference"] < silence["correctness"] and silence["timing"] < silence["correctness"], silence


def test_the_evaluators_own_time_does_not_count_against_the_worker(evaluator, reference, examples_dir, monkeypatch):
    # Under a loaded host, comparing large outputs here took longer than the worker's whole limit (four gpu
    # test processes on one H200 host): the worker, idle and waiting for "go", was timed out.
    compare = Conversation._trial
    slow = {"first": True}

    def slow_trial(self, *args, **kwargs):
        if slow.pop("first", False):
            time.sleep(16)
        return compare(self, *args, **kwargs)

    monkeypatch.setattr(Conversation, "_trial", slow_trial)
    v = run(
        evaluator, reference, examples_dir / "fused_add_relu" / "candidate_correct.py", limits={"run_timeout_s": 15}
    )
    assert v.status == "correct", v.errors


def test_a_trials_comparison_runs_while_the_worker_goes_on_to_the_next(evaluator, reference, examples_dir, monkeypatch):
    # Comparing a shipped trial's outputs here took about as long as the trial itself (256 MB outputs on the
    # H200 host), and the worker waited for it before its next trial. Each comparison below holds on until the
    # evaluator has told the worker to go on: done one after the other, none would see it.
    gos = threading.Condition()
    sent = {"go": 0}
    real_send, real_compare = protocol.Channel.send, comparison.compare_outputs

    def send(self, type_, body=None, tensors=None):
        real_send(self, type_, body, tensors)
        if type_ == "go":
            with gos:
                sent["go"] += 1
                gos.notify_all()

    overlapped: dict[int, bool] = {}
    at_trial: dict[int, int] = {}  # "go"s sent when each trial's outputs arrived
    real_trial = Conversation._trial

    def trial(self, body, *args):
        at_trial[body.index] = sent["go"]
        return real_trial(self, body, *args)

    def compare(*args, **kwargs):
        index = kwargs["index"]
        if index < 6:  # every trial but the plan's last (5 task, 2 other distributions)
            with gos:
                overlapped[index] = gos.wait_for(lambda: sent["go"] > at_trial[index], timeout=10)
        return real_compare(*args, **kwargs)

    monkeypatch.setattr(protocol.Channel, "send", send)
    monkeypatch.setattr(Conversation, "_trial", trial)
    monkeypatch.setattr(comparison, "compare_outputs", compare)
    v = run(
        evaluator,
        reference,
        examples_dir / "fused_add_relu" / "candidate_correct.py",
        correctness={"reference_cache_mb": 0},
    )
    assert v.status == "correct", v.errors
    assert overlapped == dict.fromkeys(range(6), True)
    assert [t.index for t in v.trials[:7]] == list(range(7))  # collected in trial order


def test_python_exit_zero_is_not_success(evaluator, reference):
    # The static rule would call this a hack before it runs; switch it off to exercise the runtime path.
    v = run(
        evaluator,
        reference,
        PROGRAMS / "fault_exit_zero_python.py",
        policy={"rules": {"static.forbidden_import": "off"}},
    )
    assert v.status == "runtime_error"
    assert "exited with status 0 before finishing" in v.errors[0]


def test_memory_blowup_is_killed(evaluator, reference):
    v = run(evaluator, reference, PROGRAMS / "fault_memory_blowup.py", limits={"memory_mb": 1024})
    assert v.status == "runtime_error"
    assert "memory" in v.errors[0].lower(), v.errors


def test_build_failure_is_final_even_when_the_candidate_catches_it(evaluator, reference, examples_dir):
    """A candidate that catches its failed build and falls back to PyTorch is still a compile error."""
    broken = (examples_dir / "fused_add_relu" / "candidate_compile_error.py").read_text()
    sneaky = (
        broken.replace("fused = load_inline(", "try:\n    fused = load_inline(")
        .replace(
            '    extra_ldflags=["-fopenmp"],\n)',
            '    extra_ldflags=["-fopenmp"],\n)\nexcept Exception:\n    fused = None',
        )
        .replace(
            "        return fused.fused_add_relu_scale(x, y, self.scale)",
            "        if fused is None:\n            return torch.relu(x + y) * self.scale\n"
            "        return fused.fused_add_relu_scale(x, y, self.scale)",
        )
    )
    assert "except Exception" in sneaky
    lenient = with_overrides(evaluator, policy={"rules": {"static.fallback_try_except": "off"}})
    v = lenient.evaluate(reference, sneaky)
    assert v.status == "compile_error", (v.status, v.errors)
