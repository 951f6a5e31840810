"""tests/child_env.py: a child a test starts keeps this process's PYTHONPATH, with the checkout first."""

from __future__ import annotations

import os
import subprocess
import sys

from child_env import REPO, child_env, python_path


def test_the_checkout_comes_first_and_the_callers_entries_stay(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "wheels"), str(tmp_path / "more")]))
    assert python_path().split(os.pathsep) == [str(REPO), str(tmp_path / "wheels"), str(tmp_path / "more")]
    assert python_path(tmp_path).split(os.pathsep)[0] == str(tmp_path)
    env = child_env(EXTRA="1")
    assert env["EXTRA"] == "1" and env["PYTHONPATH"] == python_path()


def test_a_child_imports_a_module_only_the_callers_path_has(monkeypatch, tmp_path) -> None:
    # The GPU machine's dependencies live in a folder on PYTHONPATH: a child that lost it could not import them.
    (tmp_path / "only_here.py").write_text("VALUE = 7\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", "import only_here, rubric_rl; print(only_here.VALUE)"],
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    assert out.stdout.strip() == "7"


def test_no_test_replaces_pythonpath() -> None:
    tests = REPO / "tests"
    offenders = [
        p.relative_to(REPO)
        for p in tests.rglob("*.py")
        if p.name not in ("child_env.py", "test_child_env.py", "test_packaging.py")
        and '"PYTHONPATH": str(' in p.read_text()
    ]
    assert offenders == []
