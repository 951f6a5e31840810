"""The tool benchmark's own pieces (the benchmark itself runs the sandbox for minutes: scripts/bench_agent_tools.py)."""

import pytest


def test_broken_variant_and_latency_table(load_script, programs) -> None:
    bench = load_script("bench_agent_tools")
    broken = bench.broken(programs["correct"])
    assert "#error deliberately broken" in broken and broken.count("#include <torch/extension.h>") == 1
    with pytest.raises(SystemExit, match="no '#include"):
        bench.broken("x = 1")
    rows = [
        {"label": "check (evaluates)", "cache": "cold", "latency_s": 9.0, "output_chars": 100},
        {"label": "check (evaluates)", "cache": "warm", "latency_s": 2.0, "output_chars": 100},
        {"label": "check (evaluates)", "cache": "warm", "latency_s": 4.0, "output_chars": 120},
    ]
    summary = bench.latency_table(rows)
    assert summary["check (evaluates), cold"]["median_s"] == 9.0
    assert summary["check (evaluates), warm"] == {"calls": 2, "median_s": 3.0, "max_s": 4.0, "output_chars": 110}
    assert len(bench.TRAJECTORY) == 10
