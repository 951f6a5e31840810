"""scripts/bench_evaluator.py: one Evaluator's stages over repeated warm evaluations, appended run by run (it
compares two trees of the package by running once from each)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


def test_runs_are_appended_with_their_tree_and_every_evaluation(load_script, build_cache, tmp_path, monkeypatch):
    bench = load_script("bench_evaluator")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "build").symlink_to(build_cache)  # the run's shared build cache
    monkeypatch.setenv("RUBRIC_RL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "bench.json"
    out.write_text(json.dumps([{"tree": "/elsewhere/old", "device": "cpu", "medians": {}, "evaluations": []}]))
    monkeypatch.setattr(sys, "argv", ["bench_evaluator.py", "--n", "1", "--out", str(out)])
    bench.main()
    earlier, run = json.loads(out.read_text())
    assert earlier["tree"] == "/elsewhere/old"
    assert run["tree"] == str(Path(__file__).resolve().parents[1])
    assert [e["status"] for e in run["evaluations"]] == ["correct"]
    assert run["medians"]["total_s"] == pytest.approx(run["evaluations"][0]["total_s"])
