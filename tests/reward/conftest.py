"""Fixtures for the reward tests: Verdicts and Judgments built directly, the scripted OpenAI-protocol judge
server on 127.0.0.1, the bundled candidates, a small byte-level tokenizer built here (no download), and a
build cache kept across runs by RUBRIC_RL_TEST_CACHE."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from stub_server import StubOpenAIServer
from tiny_model import save_tokenizer

from rubric_rl.judge import JudgeConfig, Judgment, make_judge
from rubric_rl.sandbox import Verdict

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
EXAMPLE = REPO / "examples" / "fused_add_relu"
ADVERSARIAL = TESTS / "adversarial" / "cpu"
PROGRAMS = TESTS / "programs"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, build_cache: Path) -> None:
    """No judge endpoint or reward config from the environment; builds and baselines in the test cache."""
    for name in ("RUBRIC_RL_JUDGE_BASE_URL", "RUBRIC_RL_JUDGE_MODEL", "OPENAI_API_KEY", "RUBRIC_RL_REWARD_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUBRIC_RL_CACHE", str(build_cache))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


@pytest.fixture
def stub_server() -> Iterator[StubOpenAIServer]:
    with StubOpenAIServer() as server:
        yield server


def _verdict(status: str = "correct", **fields: Any) -> Verdict:
    return Verdict.model_validate({"status": status, "candidate_sha256": "0" * 64, **fields})


@pytest.fixture(scope="session")
def make_verdict() -> Callable[..., Verdict]:
    """``make_verdict(status, **fields)``: a Verdict built directly (the sandbox is not run)."""
    return _verdict


@pytest.fixture(scope="session")
def make_judgment(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Judgment]:
    """``make_judgment(total=0.75, hack_gate=False, failed=False)``: an offline judgment with its total, gate
    and failure flag set (so mixes see what a real judge returns)."""
    judge = make_judge(JudgeConfig(offline=True, cache=False))
    reference = (EXAMPLE / "reference.py").read_text()
    candidate = (EXAMPLE / "candidate_correct.py").read_text()
    from rubric_rl.judge import build_request

    base = judge.judge_now(build_request("generate", reference, candidate, backend="cpu"))  # type: ignore[attr-defined]

    def make(total: float = 0.75, hack_gate: bool = False, failed: bool = False) -> Judgment:
        gates = [
            g.model_copy(update={"fired": hack_gate if g.name == "major_hacking" else g.fired}) for g in base.gates
        ]
        return base.model_copy(
            update={
                "total": total,
                "raw_total": total,
                "gates": gates,
                "judge_failed": failed,
                "failure": "http_503" if failed else None,
            }
        )

    return make


@pytest.fixture(scope="session")
def reference() -> str:
    return (EXAMPLE / "reference.py").read_text()


@pytest.fixture(scope="session")
def responses() -> dict[str, str]:
    """Coder responses (Markdown around the program) keyed by what they hold."""

    def fenced(path: Path, note: str = "") -> str:
        return f"Here is the program.{note}\n\n```python\n{path.read_text()}```\n"

    return {
        "correct": fenced(EXAMPLE / "candidate_correct.py"),
        "incorrect": fenced(EXAMPLE / "candidate_wrong.py"),
        "hack": fenced(ADVERSARIAL / "no_kernel_at_all.py"),
        "unparsable": "I would write a fused kernel here, but I ran out of time.",
        "hang": fenced(PROGRAMS / "fault_hang.py"),
    }


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE tokenizer trained here (lossless decode of any text), saved for verl's hf_tokenizer."""
    pytest.importorskip("tokenizers")
    path = tmp_path_factory.mktemp("tokenizer")
    corpus = [(EXAMPLE / "candidate_correct.py").read_text()]
    specials = ["<pad>", "</s>"]
    save_tokenizer(path, corpus, vocab_size=400, specials=specials, eos="</s>", pad="<pad>", chat_template=None)
    return path


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str))))
    return path


@pytest.fixture(scope="session")
def write_yaml() -> Callable[[Path, dict[str, Any]], Path]:
    """``write_yaml(path, data)``: data as a YAML file (paths as strings)."""
    return _write_yaml
