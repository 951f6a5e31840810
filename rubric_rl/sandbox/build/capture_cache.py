"""The extensions a candidate asks ``load_inline`` for, recorded once per candidate text and kept beside the build
cache.

Building ahead of execution starts by importing the candidate in a sandboxed worker to record its
``load_inline`` calls: a fresh process importing torch (1.35 s one at a time on 2 idle cores). On a warm cache
that was the whole prebuild (every build a hit): on an H100 host, a warm pass's first evaluation started 7 s in,
after the prebuilds of 32 candidates. The record is a pure function of the candidate's text (and the backend it
was captured for); a capture that misses some builds never changes a Verdict (the execution worker asks for them
again), so a kept one is safe to reuse. Failed captures are not kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path

from rubric_rl.sandbox.build.extension import ExtensionSpec

log = logging.getLogger(__name__)

# Part of the key: a record kept in another layout is captured again.
CAPTURE_SCHEMA = 1


class CaptureCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def _path(self, candidate: str, backend: str) -> Path:
        blob = json.dumps({"candidate": candidate, "backend": backend, "schema": CAPTURE_SCHEMA}, sort_keys=True)
        return self.root / f"{hashlib.sha256(blob.encode()).hexdigest()[:32]}.json"

    def get(self, candidate: str, backend: str) -> list[ExtensionSpec] | None:
        """The specs recorded for this candidate, or None (never captured, or an unreadable record)."""
        path = self._path(candidate, backend)
        found: list[ExtensionSpec] | None = None
        try:
            found = [ExtensionSpec.model_validate(raw) for raw in json.loads(path.read_text())]
        except FileNotFoundError:
            pass
        except (ValueError, TypeError) as e:
            log.warning("unreadable capture record %s (%s); capturing again", path, e)
        with self._lock:
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        return found

    def put(self, candidate: str, backend: str, specs: list[ExtensionSpec]) -> None:
        """Keep a successful capture; written whole or not at all (concurrent writers of one key agree)."""
        path = self._path(candidate, backend)
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump([s.model_dump(mode="json") for s in specs], f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)  # a full disk leaves no half-written file behind
            raise

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}
