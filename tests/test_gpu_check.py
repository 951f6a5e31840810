"""scripts/gpu_check.sh on a machine without a GPU: what it decides before any benchmark runs (phase names, the
budget, and BUNDLE=1's packing of its results for a runner that brings back few files)."""

from __future__ import annotations

import subprocess
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
