"""The benchmarks' statistics (scripts/benchlib.py): what their tables report must mean what the columns say."""

import random

import pytest


@pytest.fixture(scope="module")
def benchlib(load_script):
    return load_script("benchlib")


def test_a_spread_between_processes_is_not_counted_within_one(benchlib):
    """The H100's L3-34 pattern: each evaluation flat to 0.1% around its own level, the levels 5% apart."""
    rng = random.Random(0)
    evaluations = []
    for level in (0.897, 0.901, 0.912, 0.935, 0.940):
        candidate = [level * (1 + rng.gauss(0, 0.001)) for _ in range(100)]
        eager = [13.35 * (1 + rng.gauss(0, 0.001)) for _ in range(100)]
        evaluations.append((eager, candidate))
    across = benchlib.cv([13.35 / level for level in (0.897, 0.901, 0.912, 0.935, 0.940)])
    within = [benchlib.within_evaluation_cv(e, c) for e, c in evaluations]
    assert across > 0.015
    assert all(w < 0.001 for w in within), within


def test_noisy_rounds_show_within_an_evaluation(benchlib):
    rng = random.Random(1)
    eager = [10 * (1 + rng.gauss(0, 0.05)) for _ in range(100)]
    drifting = [1 + 0.1 * (i // 25) for i in range(100)]  # four slices, 1.0 to 1.3 ms
    within = benchlib.within_evaluation_cv(eager, drifting)
    assert 0.04 < within < 0.07  # CV of 10/1.0, 10/1.1, 10/1.2, 10/1.3 (about 0.10), over sqrt(4)
    assert benchlib.within_evaluation_cv(eager[:7], drifting[:7]) is None  # under two rounds a slice


def test_set_pairs_become_sandbox_fields_or_a_clear_error(benchlib):
    from rubric_rl.sandbox import SandboxConfig

    got = benchlib.sandbox_overrides(["timing.l2_flush=false", "timing.trials=30", "seed=3"])
    assert got == {"timing": {"l2_flush": False, "trials": 30}, "seed": 3}
    cfg = SandboxConfig().updated(**got)
    assert cfg.timing.l2_flush is False and cfg.timing.trials == 30 and cfg.seed == 3
    for bad in ["no_such_field=1", "timing.l2_flush", "timing.nope=1", "timing=1", "perf_trials=3"]:
        with pytest.raises(SystemExit, match="FIELD=VALUE"):
            benchlib.sandbox_overrides([bad])


def test_speedups_that_follow_the_host_launch_rate_correlate_with_it(benchlib):
    assert benchlib.correlation([14.2, 14.5, 16.8, 17.0], [5.0, 5.1, 6.9, 7.0]) > 0.99
    assert benchlib.correlation([1.0, 1.0, 1.0], [5.0, 6.0, 7.0]) is None  # constant: no correlation to report
    assert benchlib.correlation([1.0, 2.0], [3.0, 4.0]) is None  # two pairs say nothing


def test_rounds_stretched_by_another_process_are_reported_as_disturbed(benchlib):
    from rubric_rl.sandbox.measure.timing import summarize
    from rubric_rl.sandbox.verdict import Timings

    class Verdict:  # the fields disturbed_timings reads
        def __init__(self, rounds):
            self.timings = Timings(timer="host_sync", eager=summarize(rounds["eager"]), rounds_ms=rounds)
            self.speedup_eager = 1.0

    rng = random.Random(2)
    quiet = [4.3 * (1 + rng.gauss(0, 0.005)) for _ in range(100)]
    # KernelBench L1-21 on an H100 while another task's compile warm-up tuned its kernels: 72 rounds stretched.
    sliced = [rng.choice([5.1, 7.6, 9.7]) if i < 72 else 4.3 for i in range(100)]
    named = [
        ("quiet", Verdict({"eager": quiet, "candidate": quiet})),
        ("sliced", Verdict({"eager": quiet, "candidate": sliced})),
        ("short", Verdict({"eager": sliced[:5]})),  # too few rounds to tell
    ]
    named.append(("untimed", type("V", (), {"timings": None, "speedup_eager": None})()))
    found = benchlib.disturbed_timings(named)
    assert [d["candidate"] for d in found] == ["sliced"]
    assert found[0]["p90_over_median"]["candidate"] > 1.15 and found[0]["p90_over_median"]["eager"] < 1.02


def test_a_speedup_agrees_within_the_executors_own_spread_or_not(benchlib):
    class V:
        def __init__(self, status, speedup):
            self.status, self.speedup_eager = status, speedup

    # An H100 run: L3-1 and L2-12 (the executor's passes, then (a)).
    l3_1 = benchlib.agreement(
        {"candidate": "L3-1", "compiled": True, "correct": True, "speedup": 0.7497},
        [V("correct", 0.7574), V("correct", 0.7574), V("correct", 0.7500), V("correct", 0.7650)],
    )
    assert l3_1["statuses_agree"] and l3_1["a_within_noise"] is True
    l2_12 = benchlib.agreement(
        {"candidate": "L2-12", "compiled": True, "correct": True, "speedup": 0.8691},
        [V("correct", 0.9008), V("correct", 0.9026), V("correct", 0.9010)],
    )
    assert l2_12["a_within_noise"] is False  # 3.6 % off, the executor's spread 0.1 %: a protocol difference
    wrong = benchlib.agreement({"candidate": "x", "compiled": True, "correct": False}, [V("incorrect", None)])
    assert wrong["a_status"] == "incorrect" and wrong["statuses_agree"] and wrong["a_within_noise"] is None
    broken = benchlib.agreement({"candidate": "y", "compiled": False}, [V("correct", 1.2), V("correct", 1.2)])
    assert broken["a_status"] == "compile_error" and not broken["statuses_agree"]


def test_a_bench_stopped_by_sigterm_reports_the_samples_its_phase_finished(tmp_path) -> None:
    # gpu_check.sh runs each phase under `timeout` for what is left of its BUDGET_S; a phase cut there used to leave
    # nothing but its log (an H100 16 x 8 reward batch stopped at 413 s told nothing of where its samples were).
    import json
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    out = tmp_path / "report.json"
    program = textwrap.dedent(
        f"""
        import json, os, signal, time
        from benchlib import CutGuard

        guard = CutGuard()
        guard.install()
        guard.start(lambda done, elapsed: open({str(out)!r}, "w").write(json.dumps({{"done": done}})))
        guard.add({{"sample": 1}})
        guard.add({{"sample": 2}})
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        """
    )
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    ran = subprocess.run([sys.executable, "-c", program], cwd=scripts, timeout=60, capture_output=True, text=True)
    assert ran.returncode == 124, ran.stderr
    assert json.loads(out.read_text()) == {"done": [{"sample": 1}, {"sample": 2}]}


def test_a_finished_phase_is_not_reported_again_when_the_bench_is_stopped_later(benchlib) -> None:
    guard = benchlib.CutGuard()
    reported: list[list[dict]] = []
    guard.start(lambda done, elapsed: reported.append(done))
    guard.add({"sample": 1})
    guard.stop()
    guard.start(lambda done, elapsed: reported.append(done))  # the next phase starts with nothing done
    assert guard.done == []
    assert reported == []
