"""A persistent cache of judgments, so that the same candidate is never judged twice.

SQLite in WAL mode: readers never block, writers wait on a busy timeout, so several processes (reward workers,
a CLI) may share one file. The key is a hash of everything that determines an answer: rubric name, version
and content hash, model, the prompt's sha256 (which covers the prompt template, the candidate, the reference,
the feedback and the evidence) and the sampling parameters. Only judgments whose samples all succeeded are
stored; a failure is never cached. An entry whose JSON no longer validates (schema change) is a miss.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubric_rl.judge.record import JUDGMENT_SCHEMA_VERSION, Judgment

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    rubric TEXT NOT NULL,
    rubric_version INTEGER NOT NULL,
    rubric_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    created REAL NOT NULL,
    judgment TEXT NOT NULL
)
"""


def cache_key(
    *, rubric: str, rubric_version: int, rubric_hash: str, model: str, prompt_sha256: str, params: dict[str, Any]
) -> str:
    payload = {
        "rubric": rubric,
        "rubric_version": rubric_version,
        "rubric_hash": rubric_hash,
        "model": model,
        "prompt_sha256": prompt_sha256,
        "params": params,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class JudgmentCache:
    """``get``/``put`` of Judgments by key; thread-safe, process-safe; counts hits and misses."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), timeout=busy_timeout_s, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self.hits = 0
        self.misses = 0
        self.writes = 0

    def get(self, key: str) -> Judgment | None:
        with self._lock:
            row = self._db.execute(
                "SELECT judgment FROM judgments WHERE key = ? AND schema_version = ?", (key, JUDGMENT_SCHEMA_VERSION)
            ).fetchone()
            judgment = None
            if row is not None:
                try:
                    judgment = Judgment.model_validate_json(row[0])
                except ValidationError as e:
                    logger.warning("judge cache %s: entry %s does not validate (%s); a miss", self.path, key[:12], e)
            if judgment is None:
                self.misses += 1
            else:
                self.hits += 1
            return judgment

    def put(self, key: str, judgment: Judgment) -> None:
        ident = judgment.identity
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    ident.rubric,
                    ident.rubric_version,
                    ident.rubric_hash,
                    ident.model or "",
                    judgment.prompt_sha256 or "",
                    JUDGMENT_SCHEMA_VERSION,
                    time.time(),
                    judgment.model_dump_json(),
                ),
            )
            self.writes += 1

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}

    def close(self) -> None:
        with self._lock:
            self._db.close()
