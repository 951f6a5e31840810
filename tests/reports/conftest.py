"""The fixed run of report_fixtures.py, written to a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import BASE, TRAINED, write_run


@pytest.fixture
def fixed_runs(tmp_path: Path) -> tuple[Path, Path]:
    return (
        write_run(tmp_path / "base", "base", "own_kernels", BASE),
        write_run(tmp_path / "trained", "trained", "libraries", TRAINED),
    )
