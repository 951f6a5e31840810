"""scripts/compare_throughput.py: the old/new verdict of the restructuring's throughput check pairs runs by tree,
whatever order they ran in, and compares the means."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def compare_throughput(load_script):
    return load_script("compare_throughput")


def _write(folder: Path, name: str, cold: float, warm: float | None) -> Path:
    data: dict[str, object] = {"candidates": 8, "b_executor_cold": {"wall_s": cold}}
    if warm is not None:
        data["c_executor_warm"] = {"wall_s": warm}
    path = folder / f"bench_throughput_{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_runs_are_paired_by_tree_and_compared_by_their_means(compare_throughput, tmp_path: Path, capsys) -> None:
    # Run in the order old, new, new, old: the machine slowed down over the call, which the means cancel.
    files = [
        _write(tmp_path, "old1", 60.0, 20.0),
        _write(tmp_path, "new1", 66.0, 22.0),
        _write(tmp_path, "new2", 70.0, 24.0),
        _write(tmp_path, "old2", 76.0, 26.0),
    ]
    out = tmp_path / "compare.json"
    assert compare_throughput.main([str(f) for f in files] + ["--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert table["b_executor_cold"]["old_wall_s"] == [60.0, 76.0]
    assert table["b_executor_cold"]["new_wall_s"] == [66.0, 70.0]
    assert table["b_executor_cold"]["new_over_old"] == pytest.approx(1.0)
    assert table["c_executor_warm"]["new_over_old"] == pytest.approx(23.0 / 23.0)
    assert "new / old" in capsys.readouterr().out


def test_a_mode_one_tree_lacks_has_no_ratio(compare_throughput, tmp_path: Path) -> None:
    # A run cut by the budget before its warm pass wrote only (b).
    runs = compare_throughput.load_runs([_write(tmp_path, "old1", 60.0, 20.0), _write(tmp_path, "new1", 54.0, None)])
    table = compare_throughput.compare(runs)
    assert table["b_executor_cold"]["new_over_old"] == pytest.approx(0.9)
    assert table["c_executor_warm"]["new_over_old"] is None


def test_a_file_of_another_name_is_refused(compare_throughput, tmp_path: Path) -> None:
    stray = tmp_path / "bench_throughput.json"
    stray.write_text("{}")
    with pytest.raises(SystemExit, match="not a bench_throughput_old"):
        compare_throughput.load_runs([stray])
