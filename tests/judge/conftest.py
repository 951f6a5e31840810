"""Fixtures for the judge tests: a scripted OpenAI-compatible server on 127.0.0.1, rubrics, requests, Verdicts.

Nothing here touches any address but the loopback interface, starts the sandbox or compiles anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from stub_server import StubOpenAIServer

from rubric_rl.judge import JudgeConfig, JudgeRequest, Rubric, build_request, load_rubric
from rubric_rl.sandbox.verdict import Verdict

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"


@pytest.fixture(autouse=True)
def _no_judge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a real endpoint from the environment."""
    for name in ("RUBRIC_RL_JUDGE_BASE_URL", "RUBRIC_RL_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stub_server() -> Iterator[StubOpenAIServer]:
    with StubOpenAIServer() as server:
        yield server


@pytest.fixture
def rubric() -> Rubric:
    return load_rubric("stitchcuda")


@pytest.fixture
def llm_config(stub_server: StubOpenAIServer, tmp_path: Path) -> JudgeConfig:
    """Fast limits: short backoff and timeout, a cache of the test's own."""
    return JudgeConfig(
        base_url=stub_server.url,
        model="stub-judge",
        timeout_s=2.0,
        max_retries=3,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        cache_path=tmp_path / "judge.sqlite3",
    )


@pytest.fixture(scope="session")
def fused_reference(examples_dir: Path) -> str:
    return (examples_dir / "fused_add_relu" / "reference.py").read_text()


@pytest.fixture(scope="session")
def fused_candidate(examples_dir: Path) -> str:
    return (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()


@pytest.fixture
def request_(fused_reference: str, fused_candidate: str) -> JudgeRequest:
    return build_request("generate", fused_reference, fused_candidate, backend="cpu", task_id="fused")


def _make_verdict(status: str = "correct", **fields: Any) -> Verdict:
    return Verdict.model_validate({"status": status, "candidate_sha256": "0" * 64, **fields})


def _make_answer(rubric: Rubric, scores: dict[str, int] | int = 4, flags: dict[str, bool] | None = None) -> str:
    per = scores if isinstance(scores, dict) else {d.name: scores for d in rubric.dimensions}
    body: dict[str, Any] = {
        "dimensions": {name: {"rationale": f"because {name}", "score": s} for name, s in per.items()},
    }
    if rubric.flag_gates:
        body["flags"] = {g.name: False for g in rubric.flag_gates} | (flags or {})
    return json.dumps(body)


@pytest.fixture(scope="session")
def make_verdict() -> Callable[..., Verdict]:
    """``make_verdict(status, **fields)``: a Verdict built directly (the sandbox is never run)."""
    return _make_verdict


@pytest.fixture(scope="session")
def make_answer() -> Callable[..., str]:
    """``make_answer(rubric, scores=4, flags=None)``: a well-formed judge answer (JSON text)."""
    return _make_answer


@pytest.fixture(scope="session")
def read_candidate() -> Callable[[str], str]:
    """``read_candidate(name)``: an adversarial or example candidate kept under tests/judge/candidates."""
    return lambda name: (CANDIDATES / name).read_text()
