"""The environment of a command a test starts: this process's, with the checkout first on ``PYTHONPATH``.

First, not alone: a machine may provide the dependencies through ``PYTHONPATH`` (the GPU machine's wheels are
installed into a folder on it), and a child that lost them fails on its first import, which a test waiting for
the child's processes only sees at its time limit."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def python_path(*first: str | Path) -> str:
    """``first`` (default: the checkout), then this process's ``PYTHONPATH`` entries."""
    entries = [str(p) for p in (first or (REPO,))]
    return os.pathsep.join(filter(None, [*entries, os.environ.get("PYTHONPATH")]))


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with the checkout first on ``PYTHONPATH``, and ``extra`` set."""
    return {**os.environ, "PYTHONPATH": python_path(), **extra}
