"""scripts/bench_agreement.py: how its table summarises runs, and the sandbox's own evaluations beside them."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def agreement(load_script):
    return load_script("bench_agreement")


def _run(speedup, candidate_ms=1.0):
    return {"speedup": speedup, "candidate_ms": candidate_ms, "eager_ms": (speedup or 1.0) * candidate_ms}


def test_protocols_are_summarised_over_processes_and_runs(agreement):
    results = [
        {"runs": {"kernelbench": [_run(1.0), _run(1.2)], "sandbox": [_run(0.9)]}},
        {"runs": {"kernelbench": [_run(1.1), _run(1.1)], "sandbox": [_run(None)]}},  # not correct there: left out
        {"error": "timed out after 300 s"},  # a process that gave nothing
    ]
    out = agreement.summarize_protocols(results)
    kb = out["kernelbench"]
    assert kb["speedup"] == pytest.approx(1.1) and kb["speedups"] == [1.0, 1.2, 1.1, 1.1]
    assert kb["cv"] > 0 and kb["process_cv"] == pytest.approx(0.0)  # both processes' medians are 1.1
    assert out["sandbox"]["speedups"] == [0.9] and out["sandbox"]["process_cv"] is None
    assert set(out) == {"kernelbench", "sandbox"}  # protocols with no run are absent
    assert agreement.summarize_protocols(results, ["evaluator"]) == {}


@pytest.mark.slow
def test_the_sandboxs_own_evaluations_alternate_unpinned_and_pinned(agreement, examples_dir: Path, build_cache):
    example = examples_dir / "fused_add_relu"
    results = agreement.evaluator_runs(
        (example / "reference.py").read_text(),
        (example / "candidate_correct.py").read_text(),
        1,
        {min(os.sched_getaffinity(0))},  # a CPU this machine lets us use
        build_cache,
        backend="cpu",
    )
    assert [list(r["runs"]) for r in results] == [["evaluator"], ["evaluator_pinned"]]
    for r in results:
        (run,) = next(iter(r["runs"].values()))
        assert run["status"] == "correct" and run["speedup"] > 0 and run["candidate_ms"] > 0
    summary = agreement.summarize_protocols(results, agreement.EVALUATOR)
    assert set(summary) == {"evaluator", "evaluator_pinned"}
