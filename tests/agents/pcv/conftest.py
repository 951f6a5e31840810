"""Fixtures for the Planner / Coder / Verifier tests: the scripted server, the docs folder, two tasks made from
the bundled example, and a run definition pointing at all of them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pcv_fixtures import DOCS, EXAMPLE, SANDBOX, ScriptedRoles
from stub_server import StubOpenAIServer


@pytest.fixture
def stub() -> Iterator[StubOpenAIServer]:
    with StubOpenAIServer(ScriptedRoles(), model="stub") as server:
        yield server


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    reference = (EXAMPLE / "reference.py").read_text()
    path = tmp_path / "tasks.jsonl"
    rows = [
        {"level": None, "problem_id": i, "name": f"fused_add_relu_{i}", "code": f"{reference}\n# task T-{i}\n"}
        for i in (1, 2)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def write_run(tmp_path: Path, tasks_file: Path, docs_dir: Path) -> Callable[..., Path]:
    """``write_run(url, **sections)``: a run definition for the two tasks, every role at ``url``."""

    def write(url: str, **sections: Any) -> Path:
        endpoint = {"base_url": url, "model": "stub", "max_retries": 1, "backoff_initial_s": 0.05}
        data: dict[str, Any] = {
            "name": "cpu-e2e",
            "device": "cpu",
            "concurrency": 1,
            "tasks": {"source": str(tasks_file)},
            "planner": {
                "endpoint": endpoint,
                "system_prompt": "prompts/planner_system.md",
                "user_prompt": "prompts/planner_user.md",
                "profile_timeout_s": 120,
            },
            "coder": {"endpoint": endpoint, "plan_prompt": "prompts/coder_plan.md"},
            "verifier": {"docs_dir": str(docs_dir), "top_passages": 2},
            "budgets": {"max_turns": 2},
            "sandbox": SANDBOX,
            "executor": {"build_workers": 1, "cpu_slots": 1, "spare_workers": 0},
        }
        for key, value in sections.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write
