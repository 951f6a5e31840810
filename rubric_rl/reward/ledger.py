"""The reward ledger: every scored sample appended as one JSON line (a RewardRecord) under the run directory.

Each process writes its own file (``<run>/ledger/rewards-<host>-<pid>.jsonl``), so the reward workers of a run
never interleave lines; a reader takes every ``*.jsonl`` under the directory. Lines are written whole and
flushed as they come, so a killed run keeps every sample scored before the kill (a torn last line is skipped
with a warning when read).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.record import RewardRecord

log = logging.getLogger(__name__)


def ledger_dir(run_dir: Path) -> Path:
    return run_dir / "ledger"


CONFIG_FILE = "reward_config.json"


class LedgerWriter:
    """Appends records to this process's ledger file; the run's resolved config is written beside them once."""

    def __init__(self, run_dir: Path, config: RewardConfig) -> None:
        self.path = ledger_dir(run_dir) / f"rewards-{socket.gethostname()}-{os.getpid()}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.written = 0
        saved = self.path.parent / CONFIG_FILE
        if not saved.exists():
            tmp = saved.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(config.model_dump_json(indent=2))
            os.replace(tmp, saved)  # whole, whichever worker writes it last

    def append(self, record: RewardRecord) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock, self.path.open("a") as f:
            f.write(line)
            f.flush()
            self.written += 1


def saved_config(path: Path) -> RewardConfig | None:
    """The config a run's ledger was written under (``reward_config.json`` beside it), if present."""
    for d in (path if path.is_dir() else path.parent, ledger_dir(path)):
        f = d / CONFIG_FILE
        if f.is_file():
            return RewardConfig.model_validate_json(f.read_text())
    return None


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
