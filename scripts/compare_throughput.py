"""Compare the throughput benchmark's (b) and (c) on two trees, from the JSON files of several alternating runs.

``gpu_check.sh compare`` runs the benchmark on an old tree and on this one in the order COMPARE_ORDER (default
old,new,new,old: each tree runs once first and once last, so that a machine that warms up or slows down over the call
favours neither). This script pairs the files by tree (``bench_throughput_<tree><n>.json``), prints each run's
wall seconds and the ratio new / old of the mean wall per mode, and writes the table as JSON.

    python scripts/compare_throughput.py runs/gpu-check/bench_throughput_*.json --out runs/gpu-check/compare.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from benchlib import print_table, write_json

MODES = ("b_executor_cold", "c_executor_warm")
NAME = re.compile(r"bench_throughput_(old|new)(\d*)\.json$")


def load_runs(paths: list[Path]) -> dict[str, list[dict[str, float]]]:
    """Each tree's runs, in file order: mode -> wall seconds. Files of another name are an error."""
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for path in sorted(paths, key=lambda p: p.name):
        match = NAME.search(path.name)
        if match is None:
            raise SystemExit(f"{path}: not a bench_throughput_old<n>.json or bench_throughput_new<n>.json file")
        data = json.loads(path.read_text())
        runs[match.group(1)].append({mode: float(data[mode]["wall_s"]) for mode in MODES if mode in data})
    return runs


def compare(runs: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per mode: both trees' wall seconds per run, their means, and new / old of the means (None where a tree has
    no run of that mode)."""
    table: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        old = [run[mode] for run in runs["old"] if mode in run]
        new = [run[mode] for run in runs["new"] if mode in run]
        ratio = statistics.fmean(new) / statistics.fmean(old) if old and new else None
        table[mode] = {"old_wall_s": old, "new_wall_s": new, "new_over_old": ratio}
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    table = compare(load_runs(args.files))
    rows = []
    for mode, row in table.items():
        ratio = row["new_over_old"]
        rows.append(
            [
                mode,
                ", ".join(f"{s:.1f}" for s in row["old_wall_s"]),
                ", ".join(f"{s:.1f}" for s in row["new_wall_s"]),
                "-" if ratio is None else f"{ratio:.3f}",
            ]
        )
    print_table("old and new tree, wall seconds per run", ["mode", "old", "new", "new / old (means)"], rows)
    if args.out is not None:
        write_json(args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
