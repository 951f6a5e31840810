"""Shared fixtures: one build cache for the whole run (builds take ~25 s each on two cores), the bundled
examples, the benchmark scripts as modules, and the ``gpu`` marker's skip when no CUDA device is visible."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

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


@pytest.fixture(scope="session")
def load_script() -> Callable[[str], ModuleType]:
    """``load_script("benchlib")``: a file of scripts/ as a module (they import each other by plain name)."""
    scripts = REPO / "scripts"

    def load(name: str) -> ModuleType:
        sys.path.insert(0, str(scripts))
        try:
            spec = importlib.util.spec_from_file_location(name, scripts / f"{name}.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        finally:
            sys.path.remove(str(scripts))

    return load


@pytest.fixture(autouse=True)
def gpu_turn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """pytest-xdist runs the gpu tests in several processes on one GPU, each with its own evaluator, so no device
    gate keeps one's timing apart from another's kernels (a double-work kernel once timed at 0.22x its half), nor
    one's device memory apart from another's. A test marked ``alone_on_gpu`` holds the GPU exclusively, the other
    gpu tests share it. The exclusive turn takes the gate before it waits, and a shared turn passes the gate to
    start, so shared turns cannot starve it. Tests not marked ``gpu`` take no turn."""
    if request.node.get_closest_marker("gpu") is None:
        yield
        return
    root = tmp_path_factory.getbasetemp().parent  # one folder for every xdist process of the run
    alone = request.node.get_closest_marker("alone_on_gpu") is not None
    with open(root / "gpu-gate.lock", "a") as gate, open(root / "gpu-turn.lock", "a") as turn:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(turn, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        yield
