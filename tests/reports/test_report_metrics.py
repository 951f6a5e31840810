"""The report's metrics against the hand-computed table of the fixed run (tests/reports/conftest.py)."""

from __future__ import annotations

import json
import math

import pytest
from report_fixtures import verdict

from rubric_rl.reports import build_report, lower_speedup
from rubric_rl.reports.metrics import paired_ratios

# Hand-computed from the table in conftest.py (N = 5).
EXPECTED_FAST_P = {
    "eager": {"0": 0.6, "0.5": 0.6, "0.8": 0.4, "1": 0.4, "1.5": 0.2, "2": 0.2},
    # L: L3-1 2.5; L3-2 10th percentile of [0.9, 0.9, 1.2 x8] = 0.9; L3-3 no rounds (unknown, never counts)
    "eager_noise_aware": {"0": 0.4, "0.5": 0.4, "0.8": 0.4, "1": 0.2, "1.5": 0.2, "2": 0.2},
    "compile": {"0": 0.6, "0.5": 0.4, "0.8": 0.2, "1": 0.2, "1.5": 0.0, "2": 0.0},
    # compile ratios = eager ratios x speedup_compile / speedup_eager: L3-1 1.2, L3-2 0.9 x 0.5 = 0.45
    "compile_noise_aware": {"0": 0.4, "0.5": 0.2, "0.8": 0.2, "1": 0.2, "1.5": 0.0, "2": 0.0},
}


def test_metrics_match_the_hand_computed_table(fixed_runs, tmp_path):
    summary = build_report(list(fixed_runs), tmp_path / "report")
    base, trained = summary["runs"]
    assert list(base["tracks"]) == ["own_kernels"] and list(trained["tracks"]) == ["libraries"]
    m = base["tracks"]["own_kernels"]
    assert m["tasks"] == 5 and m["correct"] == 3 and m["correct_rate"] == 0.6
    for key, row in EXPECTED_FAST_P.items():
        assert m["fast_p"][key] == pytest.approx(row), key
    assert m["geomean_speedup"]["eager"] == pytest.approx((2.5 * 1.2 * 0.7) ** (1 / 3))
    assert m["geomean_speedup"]["compile"] == pytest.approx(0.6)
    assert m["timed_with_rounds"] == 2
    assert m["turns_to_first_correct"] == {"mean": 2.0, "median": 2, "never": 2, "counts": {"1": 1, "2": 1, "3": 1}}
    f = m["failures"]
    assert f["final_status"] == {"correct": 3, "hack": 1, "incorrect": 1}
    assert f["turn_status"] == {"compile_error": 2, "correct": 3, "hack": 1, "incorrect": 3}
    assert f["hack_rules"] == {"static.torch_compute_call": 1} and f["no_program"] == {"no_code": 1}
    assert f["stop_reasons"] == {"max_turns": 5} and f["infra_errors"] == f["endpoint_errors"] == 0
    assert m["seconds_per_task"] == {"mean": 9.0, "median": 10.0, "total": 45.0}  # 5 s per turn: 5, 15, 10, 10, 5
    assert m["stage_seconds_per_task"]["sandbox_s"]["mean"] == pytest.approx(4.0 * 9 / 5)
    t = trained["tracks"]["libraries"]
    assert t["correct_rate"] == 0.5 and t["fast_p"]["eager"]["2"] == 0.5 and t["fast_p"]["eager_noise_aware"]["0"] == 0
    rows = {r["task_id"]: r for r in base["problems"]}
    assert rows["L3-2"]["lower_speedup_eager"] == pytest.approx(0.9)
    assert rows["L3-2"]["lower_speedup_compile"] == pytest.approx(0.45)
    assert rows["L3-5"]["hack_rules"] == ["static.torch_compute_call"] and rows["L3-3"]["lower_speedup_eager"] is None
    assert json.loads((tmp_path / "report" / "summary.json").read_text()) == summary


@pytest.mark.parametrize(
    ("rounds", "se", "sc", "against", "expected"),
    [
        ({"candidate": [1.0] * 10, "eager": [2.0] * 10}, 2.0, None, "eager", 2.0),
        ({"candidate": [1.0] * 4, "eager": [2.0] * 4}, 2.0, None, "eager", None),  # fewer than 5 pairs
        ({"candidate": [1.0] * 11, "eager": [float(i) for i in range(1, 12)]}, 6.0, None, "eager", 2.0),
        ({"candidate": [2.0] * 5, "eager": [2.0] * 5, "compile": [1.0] * 5}, 1.0, 0.5, "compile", 0.5),
        ({"candidate": [1.0] * 5, "eager": [3.0] * 5}, 3.0, 1.5, "compile", 1.5),  # reused baseline: scaled
        ({"candidate": [1.0] * 5, "eager": [3.0] * 5}, 3.0, None, "compile", None),
    ],
)
def test_lower_speedup_is_the_10th_percentile_of_paired_rounds(rounds, se, sc, against, expected):
    v = verdict("correct", se, sc, rounds)
    assert lower_speedup(v, against) == (pytest.approx(expected) if expected is not None else None)
    assert lower_speedup(verdict("incorrect", rounds=rounds), against) is None


def test_paired_ratios_pair_round_by_round():
    v = verdict("correct", 2.0, None, {"candidate": [1.0, 2.0, 4.0], "eager": [2.0, 2.0, 2.0]})
    assert paired_ratios(v, "eager") == [2.0, 1.0, 0.5]
    assert math.isclose(sum(paired_ratios(v, "eager")), 3.5)


def test_report_files_put_runs_side_by_side(fixed_runs, tmp_path):
    out = tmp_path / "report"
    build_report(list(fixed_runs), out, labels=["base model", "trained model"])
    md = (out / "report.md").read_text()
    assert "| metric | base model / own_kernels | trained model / libraries |" in md
    assert "base model: vs eager" in md and "| L3-5 | hack | - | - | - | - | - |" in md
    assert "| correct rate | 60.0% | 50.0% |" in md
    assert "| base model / own_kernels | eager (noise-aware) | 40.0% | 40.0% | 40.0% | 20.0% | 20.0% | 20.0% |" in md
    html = (out / "report.html").read_text()
    assert html.count("<img ") == 3 and "problem L3-1" in html
    for png in ("speedup_distribution.png", "fast_p.png", "turns_to_first_correct.png"):
        assert (out / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_labels_must_match_the_runs(fixed_runs, tmp_path):
    with pytest.raises(ValueError, match="2 run directories"):
        build_report(list(fixed_runs), tmp_path / "r", labels=["one"])
    with pytest.raises(FileNotFoundError, match="no results.jsonl"):
        build_report([tmp_path], tmp_path / "r")
