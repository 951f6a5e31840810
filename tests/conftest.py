"""Shared fixtures: one build cache for the whole run (builds take ~25 s each on two cores), the bundled
examples, and the ``gpu`` marker's skip when no CUDA device is visible."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_PROBLEMS = REPO.parent / "shared" / "kernelbench" / "problems.jsonl"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is false)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build cache shared by every test of the run (RUBRIC_RL_TEST_CACHE keeps it across runs)."""
    env = os.environ.get("RUBRIC_RL_TEST_CACHE")
    path = Path(env) if env else tmp_path_factory.mktemp("build-cache")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    return REPO / "examples"


@pytest.fixture(scope="session")
def problems_file() -> Path:
    if not SHARED_PROBLEMS.exists():
        pytest.skip(f"{SHARED_PROBLEMS} not present")
    return SHARED_PROBLEMS
