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
        frozenset({min(os.sched_getaffinity(0))}),  # a CPU this machine lets us use
        build_cache,
        backend="cpu",
    )
    assert [list(r["runs"]) for r in results] == [["evaluator"], ["evaluator_pinned"]]
    for r in results:
        (run,) = next(iter(r["runs"].values()))
        assert run["status"] == "correct" and run["speedup"] > 0 and run["candidate_ms"] > 0
    summary = agreement.summarize_protocols(results, agreement.EVALUATOR)
    assert set(summary) == {"evaluator", "evaluator_pinned"}


def test_a_build_adds_its_flags_after_the_candidates_own_and_restores_load_inline(agreement, tmp_path, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    from rubric_rl.sandbox.build.extension import EVALUATOR_FLAGS

    calls = []

    def recorder(*args, **kwargs):
        calls.append(kwargs)
        return "extension"

    monkeypatch.setattr(cpp_extension, "load_inline", recorder)
    monkeypatch.syspath_prepend(str(Path(agreement.__file__).parent))  # the child's path: scripts/ importable
    cand = tmp_path / "cand.py"
    cand.write_text(
        "from torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='x', cpp_sources='', extra_cflags=['-DOWN'])\n"
    )
    assert agreement._load_candidate(str(cand), "default").ext == "extension"
    assert agreement._load_candidate(str(cand), "evaluator_flags").ext == "extension"
    assert calls[0]["extra_cflags"] == ["-DOWN"] and calls[0]["extra_cuda_cflags"] == []
    assert calls[1]["extra_cflags"] == ["-DOWN", *EVALUATOR_FLAGS["cuda"]["cflags"]]
    assert calls[1]["extra_cuda_cflags"] == EVALUATOR_FLAGS["cuda"]["cuda_cflags"]
    assert cpp_extension.load_inline is recorder  # the build's wrapper is gone again
    assert agreement.column("sandbox", "default") == "sandbox"
    assert agreement.column("sandbox", "evaluator_flags") == "sandbox/evaluator_flags"
    with pytest.raises(ValueError, match="unknown build"):
        agreement.build_flags("O2")


def test_unknown_protocols_or_builds_are_refused_by_name(agreement):
    assert agreement._names("kernelbench, sandbox", agreement.PROTOCOLS, "--protocols") == ["kernelbench", "sandbox"]
    with pytest.raises(SystemExit, match="--builds 'O3'.*default, evaluator_flags"):
        agreement._names("O3", agreement.BUILDS, "--builds")
    with pytest.raises(SystemExit, match="--protocols ''"):
        agreement._names("", agreement.PROTOCOLS, "--protocols")


def test_the_report_prints_the_columns_it_was_measured_with(agreement, capsys):
    entry = {"correct": True, "protocols": {"sandbox/evaluator_flags": {"speedup": 1.25, "cv": 0.01}}}
    agreement.print_report(
        {"processes": 3, "repeats": 2, "columns": ["sandbox/evaluator_flags"], "candidates": {"L1-12": entry}}, None
    )
    out = capsys.readouterr().out
    assert "sandbox/evaluator_flags" in out and "1.250 (1.00%)" in out


def test_cores_are_a_kernel_cpu_list_of_cpus_this_process_may_use(agreement):
    first = min(os.sched_getaffinity(0))
    assert agreement._cores(f"{first}-{first}") == frozenset({first})
    assert agreement._cores(f"{first},") == frozenset({first})
    with pytest.raises(SystemExit, match="expected a CPU list"):
        agreement._cores("fourteen")
    with pytest.raises(SystemExit, match="not CPUs this process may run on"):
        agreement._cores("100000")
    with pytest.raises(SystemExit, match="not CPUs this process may run on"):
        agreement._cores("")
