"""Reading rollout directories for a report, read-only (a run may still be writing them)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from rubric_rl.agents.pcv.records import TaskResult, Turn

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class RunRecords(BaseModel):
    """One run directory's records."""

    dir: str
    label: str
    name: str
    results: list[TaskResult]
    turns: list[Turn]


def read_rows(path: Path, model: type[M]) -> list[M]:
    """Complete rows of a JSONL file (a last line still being written is skipped, not removed)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines(keepends=True):
        if line.endswith("\n") and line.strip():
            rows.append(model.model_validate_json(line))
    return rows


def load_run(path: Path, label: str | None = None) -> RunRecords:
    if not (path / "results.jsonl").exists():
        raise FileNotFoundError(f"{path}: no results.jsonl (not a rollout directory, or no task finished yet)")
    name = path.name
    config = path / "config.json"
    if config.exists():
        name = json.loads(config.read_text()).get("rollout", {}).get("name", name)
    return RunRecords(
        dir=str(path),
        label=label or name,
        name=name,
        results=read_rows(path / "results.jsonl", TaskResult),
        turns=read_rows(path / "turns.jsonl", Turn),
    )


def load_runs(paths: list[Path], labels: list[str] | None = None) -> list[RunRecords]:
    """The runs, each with a label unique among them (``--label`` values in order, else the run names)."""
    if labels and len(labels) != len(paths):
        raise ValueError(f"--label: {len(labels)} label(s) for {len(paths)} run directories")
    runs = [load_run(p, (labels or [None] * len(paths))[i]) for i, p in enumerate(paths)]
    seen: dict[str, int] = {}
    for run in runs:
        n = seen.get(run.label, 0)
        seen[run.label] = n + 1
        if n:
            run.label = f"{run.label} ({n + 1})"
    return runs
