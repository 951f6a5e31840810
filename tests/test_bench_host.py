"""scripts/bench_host.py: slow spells of the host probe, and a short run on the CPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_host.py"


def test_a_spell_runs_from_its_first_slow_probe_to_its_last_plus_one_interval(load_script):
    spells = load_script("bench_host").spells
    samples = [(0.0, 1.0), (0.1, 3.0), (0.2, 3.0), (0.3, 1.0), (0.4, 3.0), (0.5, 1.0), (0.6, 2.5), (0.7, 2.6)]
    assert spells(samples, 2.0, 0.1) == pytest.approx([0.2, 0.1, 0.2])  # the last one still running at the end
    assert spells(samples, 5.0, 0.1) == []
    assert spells([], 2.0, 0.1) == []


def test_a_phase_counts_its_slow_probes_against_the_quiet_threshold(load_script):
    summary = load_script("bench_host").phase_summary
    probes = [{"t": 0.1 * i, "launch_us": 5.0 + i, "python_us": 0.04 if i in (3, 4) else 0.02} for i in range(10)]
    s = summary(probes, 0.03, 0.1)
    assert s["probes"] == 10 and s["slow_share"] == pytest.approx(0.2)
    assert s["spells"] == 1 and s["longest_spell_s"] == pytest.approx(0.2)
    assert s["launch_us"] == {"median": 9.5, "p90": 14.0, "max": 14.0}
    assert s["python_us"]["max"] == 0.04


def test_a_short_run_on_the_cpu_probes_both_phases_and_starts_workers(tmp_path):
    out = tmp_path / "host.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--seconds", "2", "--interval", "0.05", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    quiet, busy = report["phases"]["quiet"], report["phases"]["workers_starting"]
    assert quiet["probes"] >= 5 and busy["probes"] >= 5
    assert busy["workers_started"] >= 1
    assert all(p["launch_us"] > 0 and p["python_us"] > 0 for p in report["probes"]["quiet"])
    assert "slow %" in run.stdout
