"""Fixtures of the recipe tests: a tiny model, skill datasets in verl's parquet format, a stand-in reward function,
a local OpenAI-protocol judge server, and each bundled recipe composed and checked once per session (composition
imports verl: seconds on two cores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from recipe_fixtures import BUNDLED, make_tiny_model, recipe_overrides, rl_rows, write_parquet


@pytest.fixture(scope="session")
def verl_installed() -> None:
    pytest.importorskip("verl", reason="the recipe checks compose verl's own config (the train extra)")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    return make_tiny_model(tmp_path_factory.mktemp("model") / "tiny-qwen2")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pyarrow")
    root = tmp_path_factory.mktemp("data")
    for skill in ("generate", "refine"):
        write_parquet(root / skill / "train.parquet", rl_rows(8, 50, skill))
        write_parquet(root / skill / "val.parquet", rl_rows(2, 50, skill))
    sft = [
        {"messages": [{"role": "user", "content": "w3 w4"}, {"role": "assistant", "content": "w5 " * 30}]}
        for _ in range(40)
    ]
    write_parquet(root / "rft" / "train.parquet", sft)
    return root


@pytest.fixture(scope="session")
def judge_server():
    """A real HTTP server on 127.0.0.1 speaking the OpenAI protocol (models list, chat completions)."""
    from stub_server import StubOpenAIServer

    with StubOpenAIServer(model="stub-judge") as server:
        yield server


@pytest.fixture(scope="session")
def checked(verl_installed, tiny_model, data_dir, judge_server) -> dict[str, Any]:
    """Every bundled recipe through pre-flight once, pointed at the session's fixtures."""
    from rubric_rl.recipes import preflight

    results = {
        name: preflight(name, recipe_overrides(name, tiny_model, data_dir, judge_server.url)) for name in BUNDLED
    }
    hosted = recipe_overrides("stitchcuda-grpo-32b", tiny_model, data_dir, judge_server.url)[:3]  # no judge URL
    results["stitchcuda-grpo-32b judge=hosted"] = preflight(
        "stitchcuda-grpo-32b", [*hosted, "judge=hosted", f"reward.reward_model.model_path={tiny_model}"]
    )
    return results


@pytest.fixture
def one_gpu(verl_installed, tiny_model, data_dir, judge_server):
    """Pre-flight of one-gpu-try with extra overrides (and settings), pointed at the session's fixtures."""
    from rubric_rl.recipes import PreflightConfig, preflight

    def run(*extra: str, **settings: Any):
        base = recipe_overrides("one-gpu-try", tiny_model, data_dir, judge_server.url)
        return preflight("one-gpu-try", [*base, *extra], PreflightConfig(**settings)).report

    return run
