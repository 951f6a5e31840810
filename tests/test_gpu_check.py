"""scripts/gpu_check.sh on a machine without a GPU: what it decides before any benchmark runs (phase names, the
budget, and BUNDLE=1's packing of its results for a runner that brings back few files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from child_env import REPO, child_env

SCRIPT = REPO / "scripts" / "gpu_check.sh"


def _run(out: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # No wheels to install: a checkout prepared for the GPU machine holds some for its Python, not this one's.
    no_wheels = out.parent / "no-wheels"
    no_wheels.mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=REPO,
        env=child_env(OUT=str(out), WHEELS=str(no_wheels), **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_unknown_phase_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = _run(tmp_path / "out", "tests,nonsense")
    assert done.returncode == 2
    assert "unknown phase 'nonsense'" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_spent_budget_skips_every_phase_and_the_results_are_packed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _run(out, "tests,synth", BUDGET_S="0", BUNDLE="1")
    assert done.returncode == 1  # a skipped phase fails the call
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "gpu-check.tgz", "skipped.txt"]
    assert (out / "skipped.txt").read_text().count("skipped") == 2
    with tarfile.open(out / "gpu-check.tgz") as packed:
        names = {Path(n).name for n in packed.getnames()}
    assert {"env.txt", "skipped.txt"} <= names


def test_a_compare_order_naming_a_third_tree_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = _run(tmp_path / "out", "compare", COMPARE_ORDER="old,new,newer")
    assert done.returncode == 2
    assert "not 'newer'" in done.stderr
    assert not (tmp_path / "out").exists()


def _fake_tree(root: Path, walls: dict[str, float]) -> Path:
    """A tree whose throughput benchmark only writes the given wall seconds (b_executor_cold, c_executor_warm)."""
    (root / "scripts").mkdir(parents=True)
    result = {mode: {"wall_s": s} for mode, s in walls.items()}
    (root / "scripts" / "bench_throughput.py").write_text(
        f"import json, sys\nout = sys.argv[sys.argv.index('--out') + 1]\nopen(out, 'w').write(json.dumps({result!r}))\n"
    )
    return root


def test_compare_runs_both_trees_in_order_and_reports_new_over_old(tmp_path: Path) -> None:
    # The whole phase on two stand-in trees: the runs in COMPARE_ORDER, their files, and the comparison step at
    # the end (on the GPU its PYTHONPATH once left out the repository and the table was never printed; where
    # rubric_rl is installed, as here, that slip cannot show).
    old = _fake_tree(tmp_path / "old", {"b_executor_cold": 50.0, "c_executor_warm": 20.0})
    new = _fake_tree(tmp_path / "new", {"b_executor_cold": 45.0, "c_executor_warm": 22.0})
    out = tmp_path / "out"
    # The script calls python3: here, this interpreter (CI runs the tests without activating their environment, and
    # the machine's own python3 has neither torch nor rich).
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    problems = str(tmp_path / "problems.jsonl")
    done = _run(out, "compare", OLD_TREE=str(old), NEW_TREE=str(new), PROBLEMS=problems, PATH=path)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = sorted(p.name for p in out.glob("bench_throughput_*.json"))
    assert runs == [f"bench_throughput_{t}.json" for t in ("new1", "new2", "old1", "old2")]
    table = json.loads((out / "compare.json").read_text())
    assert table["b_executor_cold"]["new_over_old"] == 0.9
    assert table["c_executor_warm"]["new_over_old"] == 1.1
