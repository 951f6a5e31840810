"""JSONL files that a run appends to row by row and a rerun resumes from."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def repaired_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file (none when it does not exist), after cutting from the file a last line left
    half-written by a crash, so that the rerun's appends start on a line of their own."""
    if not path.exists():
        return []
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep != len(data):
        logger.warning("%s: cutting an unfinished last row (%d bytes)", path, len(data) - keep)
        with path.open("r+b") as f:
            f.truncate(keep)
    return [json.loads(line) for line in data[:keep].splitlines() if line.strip()]
