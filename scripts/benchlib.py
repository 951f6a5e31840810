"""Shared pieces of the benchmark scripts: candidate discovery, table printing, JSON output."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CANDIDATES = REPO / "benchmarks" / "kernelbench"


def default_problems() -> Path:
    for p in (REPO / ".device" / "problems.jsonl", REPO.parent / "shared" / "kernelbench" / "problems.jsonl"):
        if p.exists():
            return p
    raise SystemExit("no problems file: pass --problems (KernelBench problems.jsonl)")


def discover(candidates_dir: Path, tasks: dict) -> list[tuple[str, Path]]:
    """(task id, file) for every candidate file named '<task id>_<anything>.py' whose task exists."""
    found = []
    for path in sorted(candidates_dir.glob("L*-*_*.py")):
        task_id = path.name.split("_", 1)[0]
        if task_id in tasks:
            found.append((task_id, path))
    return found


def spread(found: list[tuple[str, Path]], n: int) -> list[tuple[str, Path]]:
    """Up to n candidates, taken round-robin over levels so every level is represented."""
    by_level: dict[str, list[tuple[str, Path]]] = {}
    for item in found:
        by_level.setdefault(item[0].split("-")[0], []).append(item)
    out: list[tuple[str, Path]] = []
    while len(out) < n and any(by_level.values()):
        for level in sorted(by_level):
            if by_level[level] and len(out) < n:
                out.append(by_level[level].pop(0))
    return out


def cv(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    return statistics.pstdev(values) / statistics.fmean(values)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def fmt(x, spec: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*r)
    Console(width=200).print(table)


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
