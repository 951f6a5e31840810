"""The reward ledger: every scored sample appended as one JSON line (a RewardRecord) under the run directory.

Each process writes its own file (``<run>/ledger/rewards-<host>-<pid>.jsonl``), so the reward workers of a run
never interleave lines; a reader takes every ``*.jsonl`` under the directory. Lines are written whole and
flushed as they come, so a killed run keeps every sample scored before the kill (a torn last line is skipped
with a warning when read).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from rubric_rl.reward.record import RewardRecord

log = logging.getLogger(__name__)


def ledger_dir(run_dir: Path) -> Path:
    return run_dir / "ledger"


class LedgerWriter:
    """Appends records to this process's ledger file."""

    def __init__(self, run_dir: Path) -> None:
        self.path = ledger_dir(run_dir) / f"rewards-{socket.gethostname()}-{os.getpid()}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.written = 0

    def append(self, record: RewardRecord) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock, self.path.open("a") as f:
            f.write(line)
            f.flush()
            self.written += 1


def ledger_files(path: Path) -> list[Path]:
    """A ledger file, or every ``*.jsonl`` under a run or ledger directory (metrics files excepted)."""
    if path.is_file():
        return [path]
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such ledger file or directory")
    return sorted(p for p in path.rglob("*.jsonl") if not p.name.startswith("metrics"))


def read_ledger(path: Path) -> Iterator[RewardRecord]:
    """Records in file order; a line that is not a RewardRecord is skipped with a warning naming it."""
    for file in ledger_files(path):
        with file.open() as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield RewardRecord.model_validate_json(line)
                except ValidationError as e:
                    log.warning("%s:%d: not a RewardRecord, skipped (%s)", file, n, e.errors()[0]["msg"])


def write_ledger(records: Iterable[RewardRecord], path: Path) -> int:
    """Write records to one JSONL file (e.g. recomputed ones); returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w") as f:
        for r in records:
            f.write(r.model_dump_json() + "\n")
            n += 1
    return n


def summary(records: Iterable[RewardRecord]) -> dict[str, object]:
    """Counts and means for a table: samples, masked, statuses, mean score per data source."""
    by_source: dict[str, list[float]] = {}
    statuses: dict[str, int] = {}
    masked = 0
    total = 0
    for r in records:
        total += 1
        masked += r.masked
        statuses[r.verdict.status] = statuses.get(r.verdict.status, 0) + 1
        by_source.setdefault(r.data_source, []).append(r.score)
    return {
        "samples": total,
        "masked": masked,
        "statuses": statuses,
        "mean_score": {k: sum(v) / len(v) for k, v in sorted(by_source.items())},
    }


def dumps(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
